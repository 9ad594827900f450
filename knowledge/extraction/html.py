"""HTML: the main content's headings and blocks in document order (`_extract_html`): the page
is walked (`html_walk`), the shapes of its tags recognised (`html_shapes`)."""

from __future__ import annotations

import re

from lxml import etree

from knowledge.extraction.base import (
    HTML_MAX_DEPTH,
    Extracted,
    ExtractionError,
    Limits,
)
from knowledge.extraction.html_tree import (
    _footnote_marks_remove,
    _html_root,
    _html_text,
    _link_runs_remove,
    _struck_remove,
)
from knowledge.extraction.html_walk import _Walk
from knowledge.extraction.questions import labels_joined, parts_as_labels, questions_as_headings

_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")


def _extract_html(html: str, limits: Limits) -> Extracted:
    """Headings and blocks of the main content, in document order.

    A <dt> of a list of sections (`_dl_is_sections`) is a heading, and the list's end ends
    its sections; <li>, <dd> and <blockquote> holding paragraphs or listings keep them apart;
    an admonition's title and a callout's number (and command) open its first paragraph.

    Parsed by libxml2 (lxml), which builds at most HTML_MAX_DEPTH levels; deeper nesting fails
    the document. The tree is walked with an explicit stack, each node visited once (a
    list's terms and a callout list's listing are read once more before); each element is
    read by its tag's handler in `_ELEMENT_HANDLERS`."""
    document = _html_parse(html)
    result = Extracted(limits)
    if document is None:
        return result
    limits.check_time()
    root = _html_root(document)
    _footnote_marks_remove(root, limits)
    _struck_remove(root, limits)
    _link_runs_remove(root, limits)
    title_element = document.find("head/title")
    title = _html_text(title_element, limits) if title_element is not None else ""
    walk = _Walk(limits)
    walk.read(root)
    if title and not walk.has_h1:
        result.add(title, level=1)
    _entries_add(result, walk.entries)
    return result


def _html_parse(html: str):
    """The document tree of `html`, None for blank text; raise ExtractionError when libxml2
    stopped at its nesting or size limit."""
    parser = etree.HTMLParser(remove_comments=True, remove_pis=True, no_network=True)
    # XHTML (DocBook, many generators) opens with an XML declaration naming its encoding,
    # which lxml refuses on text that is already decoded.
    html = _XML_DECLARATION.sub("", html, count=1)
    document = etree.fromstring(html, parser) if html.strip() else None
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT":
            reason = entry.message.split(", use XML_PARSE_HUGE")[0].strip().rstrip(".")
            raise ExtractionError(
                f"The HTML is too deeply nested or too large to read safely "
                f"(at most {HTML_MAX_DEPTH} levels of elements): {reason}."
            )
    return document


def _entries_add(result: Extracted, entries: list[tuple[str | None, int]]) -> None:
    """Add the collected entries to `result`, FAQ questions and part headings read first
    (`questions`); a heading over nothing is dropped, and a list's end of sections is kept
    only when text follows it."""
    entries = labels_joined(parts_as_labels(questions_as_headings(entries)))
    for i, (text, level) in enumerate(entries):
        following = entries[i + 1][1] if i + 1 < len(entries) else 0
        if level > 0 and 0 < following <= level:
            continue  # a heading over nothing (a site title above the page's own h1)
        if text is None:
            if i + 1 < len(entries):  # text follows the list of sections
                result.end_sections(level)
        else:
            result.add(text, level=max(level, 0), keep_lines=level < 0)
