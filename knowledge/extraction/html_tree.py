"""Reading an HTML tree: what is page chrome, what is removed before it is read (footnote
marks, struck-out text, runs of in-page links), and an element's visible text."""

from __future__ import annotations

import re

from knowledge.extraction.base import _JOIN, _SPACES, Limits

# The tag an element read as removed gets (renaming is O(1); detaching one of many siblings
# costs a scan of them, quadratic over a paragraph of thousands of marks).
_REMOVED = "supportbot-removed"
_HTML_DROP = [
    _REMOVED,
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
    "iframe",
    "svg",
    "canvas",
    "select",
    "input",
]
_HTML_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_CHROME = re.compile(
    r"\b(nav|navbar|menu|breadcrumbs?|cookie|footer|sidebar|sphinxsidebar|skip-link|headerlink)\b",
    re.I,
)
# Whole class or id tokens of generated tables of contents and navigation bars (DocBook
# "toc", "navheader", "navfooter"; Sphinx "toctree-wrapper"). Whole tokens only: Sphinx
# wraps heading text in <a class="toc-backref">, which is content.
_CHROME_TOKENS = {"toc", "navheader", "navfooter", "toctree-wrapper"}
# A docutils `.. contents::` block (Sphinx before docutils 0.18: <div class="contents local
# topic">; later ones write a <nav>, dropped anyway): the page's list of its own questions.
# Both tokens, never "contents" alone: Doxygen's <div class="contents"> is the page body.
_LOCAL_CONTENTS = {"contents", "topic"}
# Permalink anchors documentation generators put after headings ("¶", "#", "§").
_PERMALINK_TEXT = {"¶", "#", "§", "🔗"}


# Footnote references and their back-links ("also supported. [6]", "a limit [*]"): in a
# quote they read as one of our citation marks. Sphinx and Python-Markdown mark them by role
# or class, GitHub by a data attribute, DocBook only by a <sup> mark linking into the page.
_FOOTNOTE_ROLES = {"doc-noteref", "doc-backlink"}
_FOOTNOTE_CLASSES = {"footnote-reference", "footnote-ref", "footnote", "footnote-backref"}
_FOOTNOTE_DATA = ("data-footnote-ref", "data-footnote-backref")
_FOOTNOTE_MARK = re.compile(r"^\[?\s*(?:\d{1,3}|[a-z]|[*†‡§¶#↩]+)\s*\]?$")


_CLOSES_UP = re.compile(r"^[,.;:!?)\]]")


def _in_page(link) -> bool:
    """Whether an element is a link to a place on the same page."""
    return link.tag == "a" and (link.get("href") or "").startswith("#")


def _detach(nodes: list, join) -> None:
    """Remove sibling nodes (in order, one parent) and their text, keeping the last one's
    tail: `join(text before the first, that tail)` takes their place. The nodes stay in the
    tree as `_REMOVED` (read as nothing): detaching one of many siblings scans them, which
    made thousands of marks in one paragraph quadratic."""
    first, holder = nodes[0], nodes[0].getparent()
    previous = first.getprevious()
    before = (previous.tail if previous is not None else holder.text) or ""
    joined = join(before, nodes[-1].tail or "")
    for node in nodes:
        node.tag = _REMOVED
        node.tail = None
    if previous is not None:
        previous.tail = joined
    else:
        holder.text = joined


def _closing_up(before: str, tail: str) -> str:
    """Text on either side of a removed mark: no space left before punctuation, one space
    where both sides had one."""
    if _CLOSES_UP.match(tail.lstrip()):
        return before.rstrip() + tail.lstrip()
    if before[-1:].isspace() and tail[:1].isspace():
        return before + tail.lstrip()
    return before + tail


def _footnote_mark(link) -> bool:
    """Whether an <a> is a footnote reference or back-link (in-page, a mark for its text)."""
    if not _in_page(link):
        return False
    # The text decides first: Sphinx also marks a heading's link back to the page's table
    # of contents as role="doc-backlink", and that text is the heading.
    if not _FOOTNOTE_MARK.match("".join(link.itertext()).strip()):
        return False
    if link.get("role") in _FOOTNOTE_ROLES or any(a in link.attrib for a in _FOOTNOTE_DATA):
        return True
    if not _FOOTNOTE_CLASSES.isdisjoint(classes(link)):
        return True
    parent = link.getparent()
    return (parent is not None and parent.tag == "sup") or any(c.tag == "sup" for c in link)


def _footnote_marks_remove(root, limits: Limits) -> None:
    """Take footnote marks out of the tree, with a <sup> that holds nothing else, and close
    the space a mark leaves before punctuation ("sooner [†], or" -> "sooner, or")."""
    marks = [a for a in root.iter("a") if _footnote_mark(a)]
    limits.check_time()
    for link in marks:
        parent = link.getparent()
        sup_of_mark = (
            parent is not None
            and parent.tag == "sup"
            and len(parent) == 1
            and not (parent.text or "").strip()
            and not (link.tail or "").strip()
        )
        node = parent if sup_of_mark else link
        if node.tag != _REMOVED:
            _detach([node], _closing_up)


# Struck-out text (<del>, <s>, <strike>) is no longer true: an old price, a defunct link.
_STRUCK = ("del", "s", "strike")


def _visible_chars(text: str) -> int:
    return len(text) - sum(c.isspace() for c in text)


def _struck_remove(root, limits: Limits) -> None:
    """Take struck-out text out of the text read from the tree. Where it is all the text of
    its block (an entry struck out as obsolete: its heading, its link in the contents) it
    stays, so the block keeps its text."""
    struck = [
        e for e in root.iter(*_STRUCK) if not any(a.tag in _STRUCK for a in e.iterancestors())
    ]
    limits.check_time()
    by_block: dict = {}
    for element in struck:
        block = next((a for a in element.iterancestors() if a.tag in _HTML_BREAKING), root)
        by_block.setdefault(block, []).append(element)
    for block, elements in by_block.items():
        limits.check_time()
        rest = _visible_chars("".join(block.itertext())) - sum(
            _visible_chars("".join(e.itertext())) for e in elements
        )
        if rest > 0:
            for element in elements:
                element.tag = _REMOVED  # dropped where it is read, its tail kept (linear)


_DROP_ROLES = {"navigation", "banner", "contentinfo", "search"}
_HTML_CHECK_EVERY = 4096  # elements between deadline checks


def _byline(element) -> bool:
    """Whether a <div class="details"> is the byline of an Asciidoctor document header (the
    author, their e-mail and the revision under the title: "KeePassXC Team team@… version
    2.7.4"), which is not content."""
    parent = element.getparent()
    return parent is not None and parent.get("id") == "header" and element.tag == "div"


def classes(element) -> set[str]:
    """The element's class tokens, lower-cased: pages written in upper case (old DocBook
    stylesheets: CLASS="NAVHEADER", CLASS="NOTE") name the same things."""
    return set((element.get("class") or "").lower().split())


def _html_dropped(element) -> bool:
    """Whether an element is page chrome (or not an element: comments, instructions)."""
    tag = element.tag
    if not isinstance(tag, str):
        return True
    if tag in _HTML_DROP:
        return True
    if element.get("role") in _DROP_ROLES or element.get("aria-hidden") == "true":
        return True
    if tag in ("main", "article", "body"):
        return False
    if tag == "a" and len(element) == 0 and (element.text or "").strip() in _PERMALINK_TEXT:
        return True
    marker = f"{element.get('class') or ''} {element.get('id') or ''}".lower()
    if not marker.strip():
        return False
    tokens = set(marker.split())
    if tokens >= _LOCAL_CONTENTS:
        return True
    if "details" in tokens and _byline(element):
        return True
    return bool(_CHROME.search(marker)) or not _CHROME_TOKENS.isdisjoint(tokens)


# Elements that break a line where they start and end (text on either side is not one word).
_HTML_BREAKING = {
    *_HTML_HEADINGS,
    "p", "li", "dt", "dd", "pre", "blockquote", "figcaption", "caption", "tr", "td", "th",
    "div", "section", "ul", "ol", "dl", "table", "tbody", "thead", "br", "hr",
}  # fmt: skip


def _html_text(element, limits: Limits) -> str:
    """The element's visible text as a browser lays it out: inline strings joined as they
    are ("<code>os</code>.remove" stays "os.remove"), `_JOIN` where a block element starts
    or ends (no recursion). Line breaks are kept for `keep_lines` callers."""
    strings: list[str] = []
    stack: list = [element]
    seen = 0
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
            continue
        if _html_dropped(item):
            continue
        seen += 1
        if item is not element and item.tag in _HTML_BREAKING:
            strings.append("\n" if item.tag == "br" else _JOIN)
            stack.append(_JOIN)
        _push_children(stack, item)
        if seen % _HTML_CHECK_EVERY == 0:
            limits.check_time()
    return "".join(strings)


def _plain_text(element, limits: Limits) -> str:
    """The element's visible text on one line (spaces and `_JOIN`s one space), stripped."""
    return _SPACES.sub(" ", _html_text(element, limits)).strip()


def _below(level: int) -> int:
    """The level of a section heading found under a heading of `level` (0: none yet)."""
    return min(max(level, 1) + 1, 6)


def _push_children(stack: list, element, wrap=None) -> None:
    """Push the element's text and children (each followed by its tail) in reverse order;
    `wrap(child)` gives the items read in a child's place (in reading order)."""
    for child in reversed(element):
        if child.tail:
            stack.append(child.tail)
        if wrap is None:
            stack.append(child)
        else:
            stack.extend(reversed(wrap(child)))
    if element.text and isinstance(element.tag, str):
        stack.append(element.text)


def _local_contents(element) -> bool:
    """Is a list only links to places on the same page (a page's list of its own questions
    or sections, written without the class names `_html_dropped` knows)?"""
    items = [c for c in element if isinstance(c.tag, str)]
    if len(items) < 3 or any(c.tag != "li" for c in items):
        return False
    for item in items:
        links = [a for a in item.iter("a") if _in_page(a)]
        linked = "".join("".join(a.itertext()) for a in links)
        if not links or _SPACES.sub("", "".join(item.itertext())) != _SPACES.sub("", linked):
            return False
    return True


_LINK_RUN_GLUE = re.compile(r"^[\s|•·]*$")
LINK_RUN_MIN = 3


def _link_runs_remove(root, limits: Limits) -> None:
    """Take out runs of links into the same page set one to a line with <br> (a page's own
    contents written without a list: the Fetchmail FAQ's). Three or more such links with
    nothing but spaces or separators between them; a run inside a sentence stays."""
    parents = [e for e in root.iter() if isinstance(e.tag, str) and len(e)]
    limits.check_time()
    for parent in parents:
        run: list = []
        runs: list[list] = []
        for child in parent:
            in_page = _in_page(child)
            if (in_page or child.tag == "br") and _LINK_RUN_GLUE.match(child.tail or ""):
                run.append(child)
                continue
            if in_page:  # the last link of a run may be followed by text: it ends the run
                run.append(child)
            runs.append(run)
            run = []
        runs.append(run)
        for found in runs:
            while found and found[0].tag == "br":
                found = found[1:]  # the break before the run keeps what precedes on its line
            links = [c for c in found if c.tag == "a"]
            if len(links) < LINK_RUN_MIN:
                continue
            _detach(found, str.__add__)


def _html_root(document):
    """<main>, else <article>, else the element with role="main", else <body>: the first
    that is not inside page chrome."""
    for name in ("main", "article"):
        for candidate in document.iter(name):
            if not any(_html_dropped(e) for e in (candidate, *candidate.iterancestors())):
                return candidate
            break
    for candidate in document.iterfind(".//*[@role='main']"):
        if not any(_html_dropped(e) for e in (candidate, *candidate.iterancestors())):
            return candidate
        break
    body = document.find("body")
    return body if body is not None else document
