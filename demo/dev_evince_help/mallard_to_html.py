"""Render Evince's Mallard help pages as plain HTML5, one file per page (how `pages/` was made).

    python mallard_to_html.py SRC_DIR OUT_DIR PAGE_ID...

Mallard (`.page`, XML) is not an upload format; yelp renders it to HTML for the reader. This
keeps what a reader of the page sees and drops the rest: the `<info>` block (credits,
revisions, licence, link metadata) is left out; titles become headings by depth; `steps` an
ordered list, `list` and `tree` bulleted lists, `terms` a definition list, `note` a `<div>`,
`screen` a `<pre>`, `table` a table; inline elements (`gui`, `key`, `app`, `link`…) keep their
text, `keyseq` joins its keys with "+" and `guiseq` its items with " ▸ " as yelp shows them;
images are dropped, their alternative text kept.
"""

import html
import sys
from pathlib import Path

from lxml import etree

TITLES: dict[str, str] = {}  # page id -> title, for links that show their target's title
BLOCK = {"steps": "ol", "list": "ul", "tree": "ul", "terms": "dl", "table": "table"}


def _name(node) -> str:
    return etree.QName(node).localname if isinstance(node.tag, str) else ""


def _inline(node) -> str:
    """The text a reader sees of an inline element and what follows it."""
    name = _name(node)
    if name in ("keyseq", "guiseq"):
        parts = [html.escape(node.text or "").strip()]
        for child in node:
            parts += [_inline_text(child), html.escape(child.tail or "").strip()]
        text = ("+" if name == "keyseq" else " ▸ ").join(part for part in parts if part)
        return text + html.escape(node.tail or "")
    elif name == "link" and not "".join(node.itertext()).strip():
        # An empty link shows its target: the address, or the linked page's title.
        target = node.get("href") or TITLES.get(node.get("xref", "").split("#")[0], "")
        text = html.escape(target)
    elif name == "media":
        text = "".join(_inline(child) for child in node)
    else:
        text = _inline_text(node)
    if name in ("code", "cmd", "sys", "file", "key"):
        text = f"<code>{text}</code>"
    elif name == "em":
        text = f"<em>{text}</em>"
    return text + html.escape(node.tail or "")


def _inline_text(node) -> str:
    return html.escape(node.text or "") + "".join(_inline(child) for child in node)


def _block(node, depth: int) -> str:
    name = _name(node)
    if name in ("info", "desc", "") or name == "include":
        return ""
    if name == "title":
        level = min(depth, 6)
        return f"<h{level}>{_inline_text(node)}</h{level}>\n"
    if name == "p":
        return f"<p>{_inline_text(node)}</p>\n"
    if name in ("screen", "code"):
        return f"<pre>{html.escape(''.join(node.itertext()))}</pre>\n"
    if name == "section":
        return "<section>\n" + "".join(_block(c, depth + 1) for c in node) + "</section>\n"
    if name in ("note", "if", "when", "choose", "else", "links"):
        body = "".join(_block(c, depth) for c in node)
        return f'<div class="note">\n{body}</div>\n' if name == "note" else body
    if name in BLOCK:
        tag = BLOCK[name]
        return f"<{tag}>\n" + "".join(_item(c, name, depth) for c in node) + f"</{tag}>\n"
    if name in ("tr", "td", "th", "tbody", "thead"):
        inner = "".join(_block(c, depth) for c in node) or _inline_text(node)
        return f"<{name}>{inner}</{name}>\n"
    if name == "item":
        return _item(node, "list", depth)
    return f"<p>{_inline_text(node)}</p>\n"


def _item(node, parent: str, depth: int) -> str:
    name = _name(node)
    if name in ("title", "tr", "thead", "tbody"):
        return _block(node, depth)
    if name != "item":
        return ""
    if parent == "terms":
        title = node.find("{*}title")
        body = "".join(_block(c, depth) for c in node if c is not title)
        head = _inline_text(title) if title is not None else ""
        return f"<dt>{head}</dt>\n<dd>{body}</dd>\n"
    if parent == "tree":
        own = html.escape(node.text or "").strip()
        nested = [c for c in node if _name(c) == "item"]
        inner = "".join(_item(c, "tree", depth) for c in nested)
        return f"<li>{own}" + (f"\n<ul>\n{inner}</ul>" if inner else "") + "</li>\n"
    return "<li>" + "".join(_block(c, depth) for c in node) + "</li>\n"


def page_html(path: Path) -> tuple[str, str]:
    """(title, HTML document) of one Mallard page."""
    root = etree.parse(str(path)).getroot()
    title = "".join(root.find("{*}title").itertext()).strip()
    body = "".join(_block(child, 1) for child in root)
    document = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )
    return title, document


def main(source: str, target: str, *page_ids: str) -> None:
    for path in Path(source).glob("*.page"):
        root = etree.parse(str(path)).getroot()
        TITLES[path.stem] = "".join(root.find("{*}title").itertext()).strip()
    for page_id in page_ids:
        title, document = page_html(Path(source) / f"{page_id}.page")
        (Path(target) / f"{page_id}.html").write_text(document, encoding="utf-8")
        print(f"{page_id}\t{title}")


if __name__ == "__main__":
    main(*sys.argv[1:])
