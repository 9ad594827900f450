"""Plain-text FAQs as they are written: Q:/A: entries, numbered titles, lists, indented code."""

import pytest

from knowledge.extraction import PLAIN, extract


def _blocks(text: str) -> list[tuple[int, str]]:
    result = extract(data=text.encode(), content_type=PLAIN)
    for block in result.blocks:
        assert result.text[block.start : block.end] == block.text
    return [(b.level, b.text) for b in result.blocks]


def test_q_and_a_entries_make_the_question_a_heading_and_drop_the_marks():
    text = (
        "   screen: frequently asked questions\n=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=\n\n"
        "Q:   When you start screen a page of text comes up.  Is there a way\n"
        "     to get rid of this text?\n\n"
        "A:   Just put the following line in your ~/.screenrc:\n"
        "         startup_message off\n"
        "     Many people ask this.\n\n"
        "Q: Why does it freeze?\nA: A known bug.\n"
    )
    assert _blocks(text) == [
        (0, "screen: frequently asked questions"),
        (
            1,
            "When you start screen a page of text comes up. Is there a way to get rid of "
            "this text?",
        ),
        (0, "Just put the following line in your ~/.screenrc:"),
        (0, "startup_message off"),
        (0, "Many people ask this."),
        (1, "Why does it freeze?"),
        (0, "A known bug."),
    ]


ZSH_LIKE = """Contents:
Chapter 1:  Introducing zsh
1.1. Where to read more
1.2. What is it?
1.3. What is it good at?

Chapter 1:  Introducing zsh

1.1: Sources of information

Information on zsh is available via the World Wide Web.  The
  server provides this FAQ.

1.2: What is it?

Zsh is a UNIX command interpreter (shell).

1.3: What is it good at?

  o  Command line editing:

    o  programmable completion: incorporates the ability to use the
       full power of zsh's globbing,
    o * multi-line commands editable
          as a single buffer.

  If you have zsh in a subdirectory `bin', put this in .profile:

    [ -f $HOME/bin/zsh ] && {
            exec $HOME/bin/zsh -l
    }

        because the return value from wc includes leading
        whitespace which causes wordsplitting.  Ksh handles the
        assignment specially as a single word.
"""


def test_numbered_chapters_and_entries_are_headings_and_the_contents_are_dropped():
    assert _blocks(ZSH_LIKE) == [
        (1, "Introducing zsh"),
        (2, "Sources of information"),
        (
            0,
            "Information on zsh is available via the World Wide Web. The server provides this FAQ.",
        ),
        (2, "What is it?"),
        (0, "Zsh is a UNIX command interpreter (shell)."),
        (2, "What is it good at?"),
        (0, "Command line editing:"),
        (
            0,
            "programmable completion: incorporates the ability to use the full power of "
            "zsh's globbing,",
        ),
        (0, "* multi-line commands editable as a single buffer."),
        (0, "If you have zsh in a subdirectory `bin', put this in .profile:"),
        (0, "[ -f $HOME/bin/zsh ] && {\n        exec $HOME/bin/zsh -l\n}"),
        (
            0,
            "because the return value from wc includes leading whitespace which causes "
            "wordsplitting. Ksh handles the assignment specially as a single word.",
        ),
    ]


CVS_LIKE = """  Category: /Branching/

    1. What is a branch?

          A branch is a line of development.

    2. How do I create a branch?

          Run the tag command with -b.  The branch starts at the
          revision you tag.

              # the first line tags the trunk; the second
              # checks the branch out in a new directory.

  Category: /Modules/

    1. What is a module?

          A module is a name in the modules file.
"""


def test_numbers_restarting_per_category_keep_every_entry_title():
    """Numbers alone name no heading when they restart (the CVS FAQ counts each category's
    entries from 1): only the same number with the same words is a contents line."""
    assert _blocks(CVS_LIKE) == [
        (0, "Category: /Branching/"),
        (1, "What is a branch?"),
        (0, "A branch is a line of development."),
        (1, "How do I create a branch?"),
        (0, "Run the tag command with -b. The branch starts at the revision you tag."),
        (
            0,
            "# the first line tags the trunk; the second\n# checks the branch out in a new "
            "directory.",
        ),
        (0, "Category: /Modules/"),
        (1, "What is a module?"),
        (0, "A module is a name in the modules file."),
    ]


def test_tab_indented_answers_keep_their_deeper_code_lines_and_list_items():
    text = (
        "1. How do I use procmail?\n\n"
        "\tYou're not supposed to start procmail from the command line.\n"
        "\tYour system may support a command like:\n"
        '\t\tmail -F "|/usr/bin/procmail"\n'
        "\tto set up forwarding to a program.\n\n"
        "2. The leading From_ line shows the wrong time.\n\n"
        "\tThis is a known bug in sendmail.  There are several solutions:\n"
        "\t- You could put the following at the end of your\n"
        "\t  .procmailrc file.\n"
        "\t- You can ignore the prob-\n"
        "\t  lem.\n"
    )
    assert _blocks(text) == [
        (1, "How do I use procmail?"),
        (
            0,
            "You're not supposed to start procmail from the command line. "
            "Your system may support a command like:",
        ),
        (0, 'mail -F "|/usr/bin/procmail"'),
        (0, "to set up forwarding to a program."),
        (1, "The leading From_ line shows the wrong time."),
        (0, "This is a known bug in sendmail. There are several solutions:"),
        (0, "You could put the following at the end of your .procmailrc file."),
        (0, "You can ignore the prob-lem."),
    ]


def test_numbered_steps_and_numbers_in_prose_are_not_headings():
    text = (
        "Install it:\n1. Download the tarball.\n2. Run make\n\n"
        "3. Run make install\n\n"
        "The limit is set by your system; the default is explained in question\n"
        "1.1) at the top.  A file of\n4 GB opens fine.\n\n"
        "   An old-fashioned paragraph indents its first line and\n"
        "wraps at the margin like this one.\n"
    )
    assert _blocks(text) == [
        (0, "Install it:"),
        (0, "1. Download the tarball."),
        (0, "2. Run make"),
        (0, "3. Run make install"),
        (
            0,
            "The limit is set by your system; the default is explained in question 1.1) at "
            "the top. A file of 4 GB opens fine.",
        ),
        (
            0,
            "An old-fashioned paragraph indents its first line and wraps at the margin like "
            "this one.",
        ),
    ]


def test_list_items_with_a_hanging_indent_keep_their_wrapped_lines():
    """YODL's text output indents every line after a paragraph's first by two columns, so an
    item's wrapped lines sit left of its text; at the mark's own column a line continues the
    item only when the line before stopped mid-sentence."""
    text = (
        "Do this:\n\n"
        "  1. ) First, ensure the bug is reproducible.  To do this, start\n"
        "  a new instance of the shell.\n\n"
        "2. ) Start a new instance of the shell by running the\n"
        "  command `zsh -f' from your regular shell prompt.\n\n"
        "- Check the version.\n"
        "Then report it.\n"
    )
    assert _blocks(text) == [
        (0, "Do this:"),
        (
            0,
            "1. ) First, ensure the bug is reproducible. To do this, start a new instance of "
            "the shell.",
        ),
        (
            0,
            "2. ) Start a new instance of the shell by running the command `zsh -f' from your "
            "regular shell prompt.",
        ),
        (0, "Check the version."),
        (0, "Then report it."),
    ]


def test_a_short_question_line_over_its_answer_is_a_heading_but_code_in_capitals_is_not():
    text = (
        "How do I reset my password?\n"
        "Open Settings, choose Security and follow the link we email to you.\n\n"
        "Set three variables, for example,\n\n"
        "    HISTSIZE=200\n    SAVEHIST=200\n\n"
        "NOTES\nThe end.\n"
    )
    assert _blocks(text) == [
        (1, "How do I reset my password?"),
        (0, "Open Settings, choose Security and follow the link we email to you."),
        (0, "Set three variables, for example,"),
        (0, "HISTSIZE=200\nSAVEHIST=200"),
        (2, "NOTES"),
        (0, "The end."),
    ]


@pytest.mark.slow
def test_hostile_plain_text_extracts_in_linear_time():
    """Every structure the reader looks for, repeated a hundred thousand times in one
    paragraph: hyphenated wraps, bullets, numbered lines, indented lines, questions. Quadratic
    work would take hours here; measured 0.3-1.4 s each (no timing is asserted)."""
    for unit in ("word-\nnext ", "o  item\n", "1.1. entry\n", "        code;\n", "Q: why?\n"):
        result = extract(data=(unit * 100_000).encode(), content_type=PLAIN)
        assert len(result.text) > 100_000
