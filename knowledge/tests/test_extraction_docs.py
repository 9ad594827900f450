"""HTML extraction of generated documentation pages (Sphinx): text as a browser lays it out,
code blocks with their lines, no permalink marks, the role="main" region only."""

from pathlib import Path

from knowledge.chunking import chunk_document
from knowledge.extraction import HTML, MARKDOWN, MAX_INDENT, extract

DEV_FAQ = Path(__file__).resolve().parents[2] / "demo" / "dev_faq" / "pages"


def _html(body: str) -> bytes:
    return f"<html><head><title>Page</title></head><body>{body}</body></html>".encode()


def test_inline_elements_join_as_laid_out_not_with_spaces():
    result = extract(
        data=_html(
            "<main><h1>Files</h1><p>Use <code>os</code>.<code>remove()</code> to delete, "
            "or write to <a href='#'>security</a>@example.com "
            "(<em>not</em> the list).</p></main>"
        ),
        content_type=HTML,
    )
    body = result.blocks[-1].text
    assert body == "Use os.remove() to delete, or write to security@example.com (not the list)."


def test_a_code_block_keeps_its_lines():
    result = extract(
        data=_html(
            "<main><h1>SQL</h1><p>Then do this:</p><pre><span></span>&gt;&gt;&gt; "
            "<span>from</span> django.db <span>import</span> connection\n&gt;&gt;&gt; "
            "connection<span>.</span>queries\n</pre></main>"
        ),
        content_type=HTML,
    )
    assert ">>> from django.db import connection\n>>> connection.queries" in result.text
    for block in result.blocks:
        assert result.text[block.start : block.end] == block.text


def test_a_code_block_keeps_each_lines_indentation_less_what_all_lines_share():
    result = extract(
        data=_html(
            "<main><h1>Defaults</h1><p>Build it on every call:</p><pre>"
            "  def append_to(element, to=None):\n"
            "      if to is None:\n"
            "          to  =  []\n"
            "\n"
            "      return to   \n</pre><p>A new list each time.</p></main>"
        ),
        content_type=HTML,
    )
    assert (
        "def append_to(element, to=None):\n    if to is None:\n        to = []\n    return to"
    ) in result.text
    assert "\n\nA new list each time." in result.text
    for block in result.blocks:
        assert result.text[block.start : block.end] == block.text


def test_a_code_lines_indentation_is_clamped_so_padding_cannot_bloat_the_text():
    padded = "x = 1\n" + " " * 200_000 + "y = 2\n" + "\t" * 50_000 + "z = 3\n"
    result = extract(data=_html(f"<main><h1>Pad</h1><pre>{padded}</pre></main>"), content_type=HTML)
    block = [b.text for b in result.blocks if "x = 1" in b.text][0]
    assert block == "x = 1\n" + " " * MAX_INDENT + "y = 2\n" + " " * MAX_INDENT + "z = 3"


def test_a_markdown_code_fence_keeps_its_lines_and_indentation():
    md = b"# Defaults\n\nBuild it:\n\n```python\ndef f(to=None):\n    if to is None:\n"
    md += b"        to = []\n```\n"
    result = extract(data=md, content_type=MARKDOWN)
    assert "def f(to=None):\n    if to is None:\n        to = []" in result.text


def test_permalink_marks_leave_headings():
    result = extract(
        data=_html(
            '<main><h1>FAQ<a class="headerlink" href="#faq">¶</a></h1>'
            '<h2>Can I delete Python?<a href="#can">¶</a></h2><p>That depends.</p></main>'
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks if b.level] == ["FAQ", "Can I delete Python?"]


def test_the_role_main_region_is_the_content_when_there_is_no_main_element():
    result = extract(
        data=_html(
            '<div class="related"><a href="a.html">previous</a> | <a href="b.html">next</a></div>'
            '<div class="body" role="main"><h1>Windows FAQ</h1><p>Use the py command.</p></div>'
            "<div><h3>Quick search</h3><p>This Page: Show Source</p></div>"
            "<div>© Copyright 2001-2023, Python Software Foundation.</div>"
        ),
        content_type=HTML,
    )
    assert result.text == "Windows FAQ\n\nUse the py command."


def test_a_real_django_faq_page_extracts_clean_code_and_headings():
    result = extract(data=(DEV_FAQ / "models.html").read_bytes(), content_type=HTML)
    headings = [b.text for b in result.blocks if b.level]
    assert "How can I see the raw SQL queries Django is running?" in headings
    assert not any("¶" in h for h in headings)
    assert "connection.queries is only available if DEBUG is True." in result.text
    assert "\nreset_queries()" in result.text
    assert "connection. queries" not in result.text
    assert "Quick search" not in result.text


def test_a_site_title_heading_over_nothing_is_dropped_but_parent_headings_stay():
    result = extract(
        data=_html(
            "<div><h1>Django 3.2 documentation</h1></div><div><h1>Troubleshooting</h1>"
            "<h2>Problems running django-admin</h2><h3>command not found</h3>"
            "<p>Activate your virtual environment.</p></div>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks if b.level] == [
        (1, "Troubleshooting"),
        (2, "Problems running django-admin"),
        (3, "command not found"),
    ]


DOCBOOK = b"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter 11. Customizing</title></head>
<body><div class="navheader"><table><tr><th colspan="3">Chapter 11. Customizing</th></tr>
<tr><td><a href="a.html">Prev</a></td><td> </td><td><a href="b.html">Next</a></td></tr>
<tr><td></td><td> </td><td></td></tr></table></div>
<div class="chapter"><h1>Chapter 11. Customizing</h1>
<div class="toc"><p><b>Table of Contents</b></p>
<dl class="toc"><dt>11.1. Paper size?</dt></dl></div>
<div class="section"><h2>11.1. How can I ensure that all programs use the same paper size?</h2>
<p>Install the <code>libpaper1</code> package.</p></div></div>
<div class="navfooter"><table><tr><td>Prev</td><td>Up</td><td>Next</td></tr></table></div>
</body></html>"""


def test_docbook_xhtml_with_an_xml_declaration_reads_without_its_navigation_and_toc():
    result = extract(data=DOCBOOK, content_type=HTML)
    assert result.text == (
        "Chapter 11. Customizing\n\n"
        "11.1. How can I ensure that all programs use the same paper size?\n\n"
        "Install the libpaper1 package."
    )


def test_sphinx_heading_text_inside_a_toc_backref_link_is_kept():
    result = extract(
        data=_html(
            '<div role="main"><h1>Programming FAQ</h1><h2><a class="toc-backref" href="#id1">'
            "General Questions</a></h2><p>Yes.</p></div>"
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks if b.level] == ["Programming FAQ", "General Questions"]


def test_a_docutils_table_of_contents_is_dropped_but_a_doxygen_body_is_kept():
    """Sphinx's `.. contents::` block lists the page's questions (quoted as an "answer" in
    the SQLAlchemy FAQ before); Doxygen's <div class="contents"> is the page itself."""
    sphinx = extract(
        data=_html(
            '<div role="main"><h1>Sessions FAQ</h1>'
            '<div class="contents faq local topic" id="contents"><ul>'
            '<li><a href="#a">I’m re-loading data with my Session but it isn’t seeing '
            "changes</a></li><li><a href='#b'>How do I make a Query that always adds a "
            "filter?</a></li></ul></div>"
            "<h2>How do I make a Query that always adds a filter?</h2>"
            "<p>Use the do_orm_execute event hook.</p></div>"
        ),
        content_type=HTML,
    )
    doxygen = extract(
        data=_html('<div class="contents"><h1>Class List</h1><p>Here are the classes.</p></div>'),
        content_type=HTML,
    )

    assert "re-loading data" not in sphinx.text
    assert sphinx.text.count("How do I make a Query that always adds a filter?") == 1
    assert "Use the do_orm_execute event hook." in sphinx.text
    assert "Here are the classes." in doxygen.text


# AsciiDoc (gitfaq, giteveryday, gitworkflows) and DocBook (the Git User Manual) pages:
# demo/dev_git_faq. The snippets below are cut from those pages.


def _asciidoc(body: str) -> bytes:
    return _html(f'<div id="content"><h1>gitfaq(7) Manual Page</h1>{body}</div>')


def test_a_space_before_a_token_that_starts_with_a_dot_is_kept():
    result = extract(
        data=_html(
            "<p>Which will add the following to a file named <code class='literal'>.gitconfig"
            "</code> in your home directory:</p>"
            "<p>e.g. they make <code class='literal'>git add .</code> practically useless.</p>"
            "<p>The <code class='literal'>git pull</code> command can also be given "
            "<code class='literal'>.</code> as the \"remote\" repository.</p>"
            "<p>register the public key (in this case, <code>~/.ssh/id_committer.pub</code>; "
            "note the <code>.pub</code>) with the hosting provider.</p>"
            "<p>You can check it by running <code class='literal'>git ls-remote ../a</code>.</p>"
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks[1:]] == [
        "Which will add the following to a file named .gitconfig in your home directory:",
        "e.g. they make git add . practically useless.",
        'The git pull command can also be given . as the "remote" repository.',
        "register the public key (in this case, ~/.ssh/id_committer.pub; note the .pub) with "
        "the hosting provider.",
        "You can check it by running git ls-remote ../a.",
    ]


def test_spaces_the_source_puts_before_punctuation_stay():
    """A browser shows them, and in prose about commands they are often part of one."""
    result = extract(
        data=_html(
            "<p>If using a SQLite <code>:memory:</code> database, buy one which does :)</p>"
            "<p>Wildcards in the pattern such as <code>*</code> or <code>?</code> are literal."
            "</p>"
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks[1:]] == [
        "If using a SQLite :memory: database, buy one which does :)",
        "Wildcards in the pattern such as * or ? are literal.",
    ]


GITFAQ_CONFIGURATION = """
<div class="sect1"><h2 id="_configuration">Configuration</h2><div class="sectionbody">
<div class="dlist" id="user-name"><dl>
<dt class="hdlist1">
What should I put in <code>user.name</code>?
</dt>
<dd>
<p>
        You should put your personal name, generally a form using a given name
        and family name.  For example, the current maintainer of Git uses "Junio C Hamano".
</p>
</dd>
<dt class="hdlist1" id="configure-editor">
How do I configure a different editor?
</dt>
<dd>
<p>
        If you haven&#8217;t specified an editor specifically for Git, it will by default
        use the editor you&#8217;ve configured using the <code>VISUAL</code> or <code>EDITOR</code>
        environment variables.
</p>
<div class="paragraph"><p>If you want to configure a general editor for most programs which
need one, you can edit your shell configuration (e.g., <code>~/.bashrc</code> or
<code>~/.zshenv</code>). For example, if you prefer the editor <code>nano</code>, then you
could write the following:</p></div>
<div class="listingblock">
<div class="content">
<pre><code>export VISUAL=nano</code></pre>
</div></div>
<div class="paragraph"><p>If you want to configure an editor specifically for Git, you can
either set the <code>core.editor</code> configuration value or the <code>GIT_EDITOR</code>
environment variable.</p></div>
</dd>
</dl></div>
</div></div>
<div class="sect1"><h2 id="_common_issues">Common Issues</h2><div class="sectionbody">
<div class="dlist" id="always-modified"><dl>
<dt class="hdlist1">
Why do I have a file that&#8217;s always modified?
</dt>
<dd>
<div class="paragraph" id="always-modified-files-case"><p>It&#8217;s best to remove one of the
files such that you only have one file.  You can do this with commands like the following
(assuming two files <code>AFile.txt</code> and <code>afile.txt</code>):</p></div>
<div class="listingblock">
<div class="content">
<pre><code>$ git rm --cached AFile.txt
$ git commit -m 'Remove files conflicting in case'
$ git checkout .</code></pre>
</div></div>
<div class="paragraph"><p>This avoids touching the disk, but removes the additional file.</p></div>
</dd>
</dl></div>
</div></div>
"""


def test_faq_questions_in_a_labelled_list_head_their_answers():
    """gitfaq's questions are the <dt> terms of a labelled list under six <h2> headings:
    each becomes a heading one level below the <h2>, so every entry is its own section."""
    result = extract(data=_asciidoc(GITFAQ_CONFIGURATION), content_type=HTML)
    headings = [(b.level, b.text) for b in result.blocks if b.level]
    assert headings == [
        (1, "gitfaq(7) Manual Page"),
        (2, "Configuration"),
        (3, "What should I put in user.name?"),
        (3, "How do I configure a different editor?"),
        (2, "Common Issues"),
        (3, "Why do I have a file that’s always modified?"),
    ]
    chunks = chunk_document(result)
    editor = [c for c in chunks if c.heading_path[-1] == "How do I configure a different editor?"]
    assert editor
    assert all("Junio" not in c.text and "AFile" not in c.text for c in editor)


def test_paragraphs_and_listings_inside_a_definition_stay_separate_blocks():
    result = extract(data=_asciidoc(GITFAQ_CONFIGURATION), content_type=HTML)
    texts = [b.text for b in result.blocks]
    assert "export VISUAL=nano" in texts
    assert (
        "$ git rm --cached AFile.txt\n$ git commit -m 'Remove files conflicting in case'\n"
        "$ git checkout ."
    ) in texts
    assert "This avoids touching the disk, but removes the additional file." in texts
    assert any(
        t.startswith("If you want to configure an editor specifically for Git") for t in texts
    )


def test_a_glossary_stays_body_text_each_term_opening_its_definition():
    result = extract(
        data=_html(
            "<h1>Glossary</h1><div class='glossary'><dl>"
            "<dt>blob object</dt><dd><p>Untyped object, e.g. the contents of a file.</p></dd>"
            "<dt>cache</dt><dd><p>Obsolete for: index.</p></dd>"
            "<dt>bare repository</dt><dd><p>A bare repository is normally an appropriately named "
            "directory with a .git suffix that does not have a locally checked-out copy of any "
            "of the files under revision control. That is, all of the Git administrative and "
            "control files that would normally be present in the hidden .git sub-directory "
            "are directly present in the repository.git directory instead, and no other files "
            "are present and checked out.</p></dd>"
            '<dt>changeset</dt><dd><p>BitKeeper/cvsps speak for "commit". Since Git does not '
            "store changes, but states, it really does not make sense to use the term "
            '"changesets" with Git.</p></dd></dl></div>'
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Glossary"),
        (0, "blob object: Untyped object, e.g. the contents of a file."),
        (0, "cache: Obsolete for: index."),
        (
            0,
            "bare repository: A bare repository is normally an appropriately named directory "
            "with a .git suffix that does not have a locally checked-out copy of any of the "
            "files under revision control. That is, all of the Git administrative and control "
            "files that would normally be present in the hidden .git sub-directory are "
            "directly present in the repository.git directory instead, and no other files are "
            "present and checked out.",
        ),
        (
            0,
            'changeset: BitKeeper/cvsps speak for "commit". Since Git does not store changes, '
            'but states, it really does not make sense to use the term "changesets" with Git.',
        ),
    ]


def test_option_aliases_label_their_shared_description_and_a_long_term_stays_apart():
    result = extract(
        data=_html(
            "<h1>Options</h1><dl compact='compact'>"
            "<dt><code>-E</code></dt><dt><code>--tabstospaces</code></dt>"
            "<dd><p>Convert each typed tab to spaces.</p><pre>nano -E file</pre></dd>"
            "<dt><code>-T <var>number</var></code></dt><dt><code>--tabsize=<var>number</var>"
            "</code></dt><dd>Set the displayed tab length to <var>number</var> columns.</dd>"
            "<dt>Freedom:</dt><dd>Debian will remain 100% free.</dd>"
            "<dt>0x00000002: Flag unrenderable messages (instead of just failing commands) "
            "(should only be on if you see the problems)</dt>"
            "<dt>0x00000004:</dt><dd>Return from the QUIT command early.</dd>"
            "<dt>an empty one</dt><dd> </dd>"
            "<dt>Listing first</dt><dd><pre>make install</pre><p>As root.</p></dd>"
            "</dl>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Options"),
        (0, "-E, --tabstospaces: Convert each typed tab to spaces."),
        (0, "nano -E file"),
        (0, "-T number, --tabsize=number: Set the displayed tab length to number columns."),
        (0, "Freedom: Debian will remain 100% free."),
        (
            0,
            "0x00000002: Flag unrenderable messages (instead of just failing commands) "
            "(should only be on if you see the problems)",
        ),
        (0, "0x00000004: Return from the QUIT command early."),
        (0, "an empty one"),
        (0, "Listing first"),
        (0, "make install"),
        (0, "As root."),
    ]


def test_text_after_a_list_of_entries_returns_to_the_enclosing_section():
    result = extract(
        data=_asciidoc(
            "<h2>Examples</h2><div class='dlist'><dl>"
            "<dt>Use a tarball as a starting point for a new repository.</dt>"
            "<dd><div class='listingblock'><pre><code>$ tar zxf frotz.tar.gz\n$ git init"
            "</code></pre></div><div class='paragraph'><p>Then add the files.</p></div></dd>"
            "</dl></div><div class='paragraph'><p>An alternate participant submission mechanism "
            "is using the git request-pull mechanism.</p></div>"
        ),
        content_type=HTML,
    )
    paths = {c.text: c.heading_path for c in chunk_document(result)}
    assert paths["$ tar zxf frotz.tar.gz\n$ git init\n\nThen add the files."] == [
        "gitfaq(7) Manual Page",
        "Examples",
        "Use a tarball as a starting point for a new repository.",
    ]
    assert paths[
        "An alternate participant submission mechanism is using the git request-pull mechanism."
    ] == ["gitfaq(7) Manual Page", "Examples"]


GITEVERYDAY_EXAMPLE = """
<h3 id="_examples">Examples</h3>
<div class="dlist"><dl>
<dt class="hdlist1">
Use a tarball as a starting point for a new repository.
</dt>
<dd>
<div class="listingblock">
<div class="content">
<pre><code>$ tar zxf frotz.tar.gz
$ cd frotz
$ git init
$ git add . <b>&lt;1&gt;</b>
$ git commit -m "import of frotz source tree."
$ git tag v2.43 <b>&lt;2&gt;</b></code></pre>
</div></div>
<div class="colist arabic"><ol>
<li>
<p>
add everything under the current directory.
</p>
</li>
<li>
<p>
make a lightweight, unannotated tag.
</p>
</li>
</ol></div>
</dd>
</dl></div>
"""


def test_a_listing_stays_a_code_block_and_each_callout_an_item_with_its_command():
    """giteveryday's examples: commands marked <1>, <2> and a numbered list explaining them."""
    result = extract(data=_asciidoc(GITEVERYDAY_EXAMPLE), content_type=HTML)
    assert [b.text for b in result.blocks if not b.level][-3:] == [
        "$ tar zxf frotz.tar.gz\n$ cd frotz\n$ git init\n$ git add . <1>\n"
        '$ git commit -m "import of frotz source tree."\n$ git tag v2.43 <2>',
        "<1> $ git add . — add everything under the current directory.",
        "<2> $ git tag v2.43 — make a lightweight, unannotated tag.",
    ]


def test_a_docbook_note_is_a_labelled_paragraph_not_a_heading_for_what_follows():
    result = extract(
        data=_html(
            '<div class="section"><h2 class="title">Submodules</h2>'
            "<pre class='screen'>$ git submodule add ~/git/$i $i</pre>"
            '<div class="note" style="margin-left: 0.5in; margin-right: 0.5in;">'
            '<h3 class="title">Note</h3><p>Do not use local URLs here if you plan to publish '
            "your superproject!</p></div><p>See what files <code class='literal'>git "
            "submodule</code> created:</p></div>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Page"),
        (2, "Submodules"),
        (0, "$ git submodule add ~/git/$i $i"),
        (0, "Note: Do not use local URLs here if you plan to publish your superproject!"),
        (0, "See what files git submodule created:"),
    ]


SQLITE_FAQ = Path(__file__).resolve().parents[2] / "demo" / "dev_sqlite_faq" / "pages"


def test_faq_questions_in_bold_paragraphs_head_their_answers():
    result = extract(data=(SQLITE_FAQ / "faq.html").read_bytes(), content_type=HTML)
    headings = [(b.level, b.text) for b in result.blocks if b.level]
    assert headings[:3] == [
        (1, "SQLite Frequently Asked Questions"),
        (2, "Frequently Asked Questions"),
        (3, "(1) How do I create an AUTOINCREMENT field?"),
    ]
    assert len([h for h in headings if h[0] == 3]) == 27  # every entry, question mark or not
    assert (3, "(19) INSERT is really slow - I can only do few dozen INSERTs per second") in (
        headings
    )
    # the page's list of its own questions (links to #q1 … #q28) is not a passage
    assert result.text.count("How do I create an AUTOINCREMENT field?") == 1
    chunks = chunk_document(result)
    autoincrement = next(c for c in chunks if "will autoincrement" in c.text)
    assert autoincrement.heading_path[-1] == "(1) How do I create an AUTOINCREMENT field?"


def test_a_bold_paragraph_that_asks_nothing_stays_body_text():
    result = extract(
        data=_html(
            "<main><h1>Setup</h1><p><b>Important:</b></p><p>Back up first.</p>"
            "<p><b>Do this before you start.</b></p><p>Then run it.</p>"
            "<p><b>Why?</b> Because the <b>disk</b> fills up?</p></main>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Setup"),
        (0, "Important: Back up first."),  # a label opens the paragraph it labels
        (0, "Do this before you start."),
        (0, "Then run it."),
        (0, "Why? Because the disk fills up?"),
    ]


def test_a_lone_bold_question_heads_its_answer_one_level_below_the_section():
    result = extract(
        data=_html(
            "<main><h1>Help</h1><h2>Billing</h2><p><strong>Can I pay by invoice?</strong></p>"
            "<p>Yes, on annual plans.</p><p><strong>Refunds are slow</strong></p>"
            "<p>They take 10 days.</p><h2>Shipping</h2><p>Ships in 2 days.</p></main>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Help"),
        (2, "Billing"),
        (3, "Can I pay by invoice?"),
        (0, "Yes, on annual plans."),
        (0, "Refunds are slow"),  # one question among two bold lines: not a list of them
        (0, "They take 10 days."),
        (2, "Shipping"),
        (0, "Ships in 2 days."),
    ]


def test_a_list_of_links_to_the_same_page_is_dropped_but_other_link_lists_stay():
    result = extract(
        data=_html(
            "<main><h1>FAQ</h1><ol><li><a href='#a'>Returns?</a></li><li><a href='#b'>Refunds?"
            "</a></li><li><a href='#c'>Shipping?</a></li></ol>"
            "<ul><li><a href='other.html'>Warranty</a></li><li><a href='x.html'>Repairs</a></li>"
            "<li><a href='y.html'>Parts</a></li></ul>"
            "<ul><li><a href='#a'>Returns</a> within 30 days</li><li><a href='#b'>Refunds</a>"
            "</li><li><a href='#c'>Shipping</a></li></ul><p>Done.</p></main>"
        ),
        content_type=HTML,
    )
    assert "Returns?" not in result.text
    assert "Warranty" in result.text
    assert "Returns within 30 days" in result.text  # an item says more than its link
    assert "Done." in result.text


def test_accordion_entries_and_q_paragraphs_head_their_answers():
    result = extract(
        data=_html(
            "<main><h1>Help</h1><h2>Orders</h2>"
            "<details><summary>How long does shipping take?</summary>"
            "<p>Standard shipping takes 3-5 days.</p><p>Express is next day.</p></details>"
            "<details><summary>Can I cancel?</summary>Yes, within one hour.</details>"
            "<p>After the entries.</p>"
            "<h2>Abroad</h2><p>Q: Do you ship abroad?</p><p>A: Yes, to 30 countries.</p>"
            "<p><strong>Q.</strong> Is gift wrap free?</p><p>No, it costs 2 EUR.</p>"
            "<p>Q: this one asks nothing.</p><details><summary> </summary>Empty summary.</details>"
            "</main>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks if b.text] == [
        (1, "Help"),
        (2, "Orders"),
        (3, "How long does shipping take?"),
        (0, "Standard shipping takes 3-5 days."),
        (0, "Express is next day."),
        (3, "Can I cancel?"),
        (0, "Yes, within one hour."),
        (0, "After the entries."),
        (2, "Abroad"),
        (3, "Do you ship abroad?"),
        (0, "A: Yes, to 30 countries."),
        (3, "Is gift wrap free?"),
        (0, "No, it costs 2 EUR."),
        (0, "Q: this one asks nothing."),
        (0, "Empty summary."),
    ]
    chunks = chunk_document(result)
    after = next(c for c in chunks if "After the entries." in c.text)
    assert after.heading_path[-1] == "Orders"  # the accordion's end returns to its section


def _body_texts(body: str) -> list[str]:
    return [b.text for b in extract(data=_html(body), content_type=HTML).blocks]


def test_footnote_marks_are_dropped_and_close_up_before_punctuation():
    """A footnote mark in a quote reads as one of our citation marks ("supported. [6]")."""
    sphinx = (
        "<main><h1>Tasks</h1><p>nodes that process them sooner "
        "<a class='footnote-reference brackets' href='#id5' id='id2' role='doc-noteref'>"
        "<span class='fn-bracket'>[</span>†<span class='fn-bracket'>]</span></a>, or the "
        "concurrency slots <a class='footnote-reference brackets' href='#id6' "
        "role='doc-noteref'>[‡]</a> (processes).</p></main>"
    )
    assert _body_texts(sphinx)[-1] == (
        "nodes that process them sooner, or the concurrency slots (processes)."
    )
    docbook = (
        "<main><h1>Init</h1><p>Other methods are also supported.  <a href='#ftn.idm1870' "
        "class='footnote' id='idm1870'><sup class='footnote'>[6]</sup></a></p>"
        "<div class='footnotes'><div id='ftn.idm1870' class='footnote'><p>"
        "<a href='#idm1870' class='para'><sup class='para'>[6] </sup></a> In 2014, Debian "
        "changed its default init system.</p></div></div></main>"
    )
    assert _body_texts(docbook)[-2:] == [
        "Other methods are also supported.",
        "In 2014, Debian changed its default init system.",
    ]
    github = (
        "<main><h1>Notes</h1><p>Refunds take 5 days<sup><a href='#user-content-fn-1' "
        "id='user-content-fnref-1' data-footnote-ref>1</a></sup>.</p></main>"
    )
    assert _body_texts(github)[-1] == "Refunds take 5 days."


def test_links_that_are_not_footnote_marks_stay():
    texts = _body_texts(
        "<main><h2><a class='toc-backref' href='#id2' role='doc-backlink'>How do I run it?"
        "</a></h2><p>See <a href='#step-2'>2</a> above, the <a href='https://x.test/'>[a]</a>"
        " list and x<sup>2</sup>.</p></main>"
    )
    assert texts[-2:] == ["How do I run it?", "See 2 above, the [a] list and x2."]


def test_a_contents_of_in_page_links_one_to_a_line_is_dropped_but_links_in_prose_stay():
    texts = _body_texts(
        "<h1>FAQ</h1><h2>Contents</h2>"
        "<a href='#G1'>G1. What is it?</a><br/>\n<a href='#G2'>G2. Where is it?</a><br/>\n"
        "<a href='#G3'>G3. Will you fix it?</a><br/>\n"
        "<h2 id='G1'>G1. What is it?</h2><p>A mail fetcher. See <a href='#G2'>G2</a>, "
        "<a href='#G3'>G3</a> and <a href='#G4'>G4</a> for more.</p>"
        "<p><a href='#a'>one</a> | <a href='https://x.test/'>two</a> | <a href='#c'>three</a>"
        "</p>"
    )
    assert "G2. Where is it?" not in " ".join(texts)
    assert "Contents" not in texts
    assert texts[-2:] == ["A mail fetcher. See G2, G3 and G4 for more.", "one | two | three"]


def test_text_around_a_dropped_contents_is_not_run_together():
    texts = _body_texts(
        "<main><h1>FAQ</h1><p>Intro text<br/><a href='#a'>A</a><br/><a href='#b'>B</a><br/>"
        "<a href='#c'>C</a>then more</p></main>"
    )
    assert texts[-1] == "Intro text then more"  # not "Intro textthen more"


def test_contents_section_titles_over_dropped_link_runs_head_nothing():
    result = extract(
        data=_html(
            "<h1>The FAQ</h1><h3>Table of Contents</h3>"
            "<h3><a href='#1'>1. General</a></h3><blockquote><p>"
            "<a href='#1.1'>1.1. What is it?</a><br><a href='#1.2'>1.2. Who wrote it?</a><br>"
            "<a href='#1.3'>1.3. Why the name?</a></p></blockquote>"
            "<h3><a href='#2'>2. Running</a></h3><blockquote><p>"
            "<a href='#2.1'>2.1. How do I quit?</a><br><a href='#2.2'>2.2. How do I save?</a>"
            "<br><a href='#2.3'>2.3. How do I undo?</a></p></blockquote>"
            "<h1 id='1'>1. General</h1><h3 id='1.1'>1.1. What is it?</h3>"
            "<blockquote><p>A small editor.</p></blockquote>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "The FAQ"),
        (1, "1. General"),
        (3, "1.1. What is it?"),
        (0, "A small editor."),
    ]


def test_struck_out_text_is_dropped_unless_it_is_all_of_its_block():
    result = extract(
        data=_html(
            "<h1>Plans</h1><p>Pro costs <s>$20</s> $15 a month.</p>"
            "<p>Download it at the <strike>http://old.example/</strike> <i>Link defunct</i> "
            "site.</p><p>Cancel <del>by phone or</del> online.</p>"
            "<h2><a id='B1'><strike>B1. Make dies on FreeBSD.</strike></a></h2>"
            "<p><i>Fixed in 6.3.0.</i></p>"
        ),
        content_type=HTML,
    )
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Plans"),
        (0, "Pro costs $15 a month."),
        (0, "Download it at the Link defunct site."),
        (0, "Cancel online."),
        (2, "B1. Make dies on FreeBSD."),
        (0, "Fixed in 6.3.0."),
    ]


# Old DocBook stylesheets ("Modular DocBook HTML Stylesheet", Privoxy's FAQ) write upper case.
OLD_DOCBOOK = b"""<HTML><HEAD><TITLE>Troubleshooting</TITLE></HEAD><BODY CLASS="SECT1">
<DIV CLASS="NAVHEADER"><TABLE SUMMARY="Header navigation table" WIDTH="100%" BORDER="0">
<TR><TH COLSPAN="3" ALIGN="center">Privoxy Frequently Asked Questions</TH></TR>
<TR><TD ALIGN="left"><A HREF="misc.html">Prev</A></TD><TD></TD>
<TD ALIGN="right"><A HREF="contact.html">Next</A></TD></TR></TABLE><HR></DIV>
<DIV CLASS="SECT1"><H1 CLASS="SECT1">5. Troubleshooting</H1>
<DIV CLASS="SECT2"><H3 CLASS="SECT2">5.9. How do I fix the permissions on Windows?</H3>
<P>Start an editor as administrator:</P>
<TABLE BORDER="0" BGCOLOR="#E0E0E0" WIDTH="100%"><TR><TD><PRE CLASS="SCREEN">
  runas /user:administrator "notepad config.txt"
  icacls config.txt /grant Users:M</PRE></TD></TR></TABLE>
<P>Then restart Privoxy.</P>
<DIV CLASS="NOTE"><BLOCKQUOTE CLASS="NOTE"><P><B>Note: </B>This only applies to Windows.</P>
</BLOCKQUOTE></DIV>
<TABLE BORDER="1"><TR><TH>Version</TH><TH>Platform</TH></TR>
<TR><TD>3.0.32</TD><TD>Windows XP</TD></TR></TABLE></DIV></DIV>
<DIV CLASS="NAVFOOTER"><HR><TABLE WIDTH="100%"><TR><TD><A HREF="misc.html">Prev</A></TD>
<TD><A HREF="index.html">Home</A></TD><TD><A HREF="contact.html">Next</A></TD></TR>
<TR><TD>Miscellaneous</TD><TD>&nbsp;</TD><TD>Contacting the developers</TD></TR></TABLE>
</DIV></BODY></HTML>"""


def test_upper_case_docbook_drops_its_navigation_and_keeps_a_boxed_listing_as_lines():
    """CLASS="NAVHEADER" is the navigation bar whatever its case (the book title and "Prev |
    Next" opened every page), and a one-cell table around a listing is a box, not a row: the
    listing keeps its lines (it was one run-on paragraph). A table of data stays rows."""
    result = extract(data=OLD_DOCBOOK, content_type=HTML)
    assert result.text.startswith("5. Troubleshooting\n\n5.9. How do I fix")
    assert "Prev" not in result.text
    assert "Contacting the developers" not in result.text
    assert (
        'runas /user:administrator "notepad config.txt"\nicacls config.txt /grant Users:M'
        in result.text
    )
    texts = [b.text for b in result.blocks]
    assert "Then restart Privoxy." in texts
    assert "Note: This only applies to Windows." in texts
    assert "3.0.32 | Windows XP" in texts


def test_a_list_item_whose_first_paragraph_is_only_a_term_labels_its_explanation():
    """DocBook's command-line options: each option in an emphasised paragraph of its own over
    the paragraph explaining it. The option opens its explanation, so a quote of the
    explanation names the option. A first paragraph that says something stays a paragraph."""
    result = extract(
        data=_html(
            "<h1>Command line options</h1><ul>"
            '<li><p><span class="emphasis"><i>--no-daemon</i></span>\n</p>'
            "<p>Don't become a daemon, i.e. don't fork. Unix only.</p></li>"
            "<li><p><b>--chroot</b></p><p>Chroot to the user's home directory.</p>"
            "<p>Needs --user.</p></li>"
            "<li><p>Use <code>--help</code> for more.</p><p>Unix only.</p></li>"
            "<li><p><code>configfile</code> is read from the current directory.</p>"
            "<p>On Windows: config.txt.</p></li></ul>"
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks if not b.level] == [
        "--no-daemon: Don't become a daemon, i.e. don't fork. Unix only.",
        "--chroot: Chroot to the user's home directory.",
        "Needs --user.",
        "Use --help for more.",
        "Unix only.",
        "configfile is read from the current directory.",
        "On Windows: config.txt.",
    ]


def test_a_table_row_that_leaves_its_group_blank_names_the_group_of_the_row_above():
    result = extract(
        data=_html(
            "<h1>Support</h1><table><tr><th>OS</th><th>Release</th><th>Earliest</th></tr>"
            "<tr><td>Windows</td><td>3.0.33</td><td>Vista</td></tr>"
            "<tr><td></td><td>3.0.32</td><td>XP</td></tr>"
            "<tr><td>macOS</td><td></td><td>Snow Leopard</td></tr>"
            "<tr><td></td><td></td><td>Tiger</td></tr></table>"
            "<table><tr><td>a</td><td>b</td></tr><tr><td></td><td>c</td><td>d</td></tr></table>"
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks if not b.level] == [
        "OS | Release | Earliest",
        "Windows | 3.0.33 | Vista",
        "Windows | 3.0.32 | XP",
        "macOS | | Snow Leopard",
        "macOS | | Tiger",
        "a | b",
        "| c | d",
    ]


def test_an_admonition_boxed_beside_its_icon_reads_as_a_labelled_paragraph():
    """Asciidoctor puts a note in a one-row table: an icon cell (a font icon titled "Note", or
    the word itself) beside the content. It read as a table row, "| On macOS…", with the icon
    lost; now the icon's word labels the content's first paragraph. A data row with a blank
    first cell, or an icon that is not an admonition's, stays a row."""
    result = extract(
        data=_html(
            "<h1>Keyboard shortcuts</h1>"
            '<div class="admonitionblock note"><table><tr><td class="icon">'
            '<i class="fa icon-note" title="Note"></i></td><td class="content">On macOS '
            "substitute <code>Ctrl</code> with <code>Cmd</code>.</td></tr></table></div>"
            '<div class="admonitionblock warning"><table><tr><td class="icon">'
            '<div class="title">Warning</div></td><td class="content">'
            '<div class="paragraph"><p>Keep your password safe.</p></div>'
            '<div class="paragraph"><p>It cannot be recovered.</p></div></td></tr></table></div>'
            "<p>Press Ctrl + O to open a database.</p>"
            "<table><tr><td></td><td>Total: 3</td></tr></table>"
            '<table><tr><td><img src="star.png" alt="Rating"></td><td>Five stars</td></tr></table>'
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks if not b.level] == [
        "Note: On macOS substitute Ctrl with Cmd.",
        "Warning: Keep your password safe.",
        "It cannot be recovered.",
        "Press Ctrl + O to open a database.",
        "| Total: 3",
        "| Five stars",
    ]


def test_an_asciidoctor_header_keeps_its_title_and_drops_the_byline():
    """The author, e-mail and revision under an Asciidoctor title were quoted as an answer
    ("KeePassXC Team team@keepassxc.org version 2.7.4"). A "details" box in the body stays."""
    result = extract(
        data=_html(
            '<div id="header"><h1>KeePassXC: User Guide</h1><div class="details">'
            '<span id="author" class="author">KeePassXC Team</span><br>'
            '<span id="email" class="email"><a href="mailto:team@example.org">team@example.org'
            '</a></span><br><span id="revnumber">version 2.7.4</span></div></div>'
            '<div id="content"><h2>Overview</h2><div class="details"><p>Entries hold your '
            "passwords.</p></div></div>"
        ),
        content_type=HTML,
    )
    assert [b.text for b in result.blocks] == [
        "KeePassXC: User Guide",
        "Overview",
        "Entries hold your passwords.",
    ]
