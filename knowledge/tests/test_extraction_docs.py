"""HTML extraction of generated documentation pages (Sphinx): text as a browser lays it out,
code blocks with their lines, no permalink marks, the role="main" region only."""

from pathlib import Path

from knowledge.extraction import HTML, extract

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
