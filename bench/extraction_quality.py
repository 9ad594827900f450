"""Compare HTML extractors on real documentation pages: ours against maintained ones.

    .venv/bin/python -m bench.extraction_quality ours
    /path/to/other/venv/bin/python bench/extraction_quality.py trafilatura   # or readability,
                                                                             # selectolax

Per page set (the development Django FAQ and the demo help center's HTML page; the held-out
Python FAQ for page chrome and code only, never its labels):
- key facts: share of the development set's labelled key facts (any-of) that the extracted
  text of their document holds (what an answer could quote at all);
- headings: share of the content's h1-h4 texts (inside a section; permalink marks removed)
  found as lines of their own;
- code: share of <pre> blocks whose text (whitespace collapsed) is in the output;
- chrome: occurrences of navigation and footer strings documentation generators add.

Only lxml is needed besides the extractor measured; `ours` imports knowledge.extraction.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parents[1]
SETS = {
    "dev-faq": ROOT / "demo" / "dev_faq",
    "python-faq (chrome, code, headings only)": ROOT / "demo" / "python_faq",
    "demo (html page)": ROOT / "demo" / "helpcenter",
}
CHROME = [
    "Quick search",
    "Table of Contents",
    "Previous topic",
    "Next topic",
    "This Page",
    "Show Source",
    "Report a Bug",
    "¶",
    "© Copyright",
    "Navigation",
    "previous |",
    "Django 3.2.25 documentation",
    "Theme Auto Light Dark",
    "Cookie settings",
]
_Q = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"})


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").translate(_Q)
    return re.sub(r"\s+", " ", text).strip().casefold()


def extract_ours(html: bytes) -> str:
    sys.path.insert(0, str(ROOT))
    from knowledge.extraction import HTML, extract

    return extract(data=html, content_type=HTML).text


def extract_trafilatura(html: bytes) -> str:
    import trafilatura

    return (
        trafilatura.extract(
            html.decode("utf-8", "replace"),
            include_tables=True,
            include_formatting=False,
            favor_recall=True,
        )
        or ""
    )


def extract_readability(html: bytes) -> str:
    from readability import Document

    summary = Document(html.decode("utf-8", "replace")).summary(html_partial=True)
    tree = etree.fromstring(summary, etree.HTMLParser())
    return "\n".join(t for t in tree.itertext()) if tree is not None else ""


def extract_selectolax(html: bytes) -> str:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html.decode("utf-8", "replace"))
    for selector in ("script", "style", "nav", "header", "footer", "[role=navigation]"):
        for node in tree.css(selector):
            node.decompose()
    body = tree.body
    return body.text(separator="\n") if body is not None else ""


EXTRACTORS = {
    "ours": extract_ours,
    "trafilatura": extract_trafilatura,
    "readability": extract_readability,
    "selectolax": extract_selectolax,
}


def _pages(folder: Path) -> list[tuple[str, Path]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return [
        (d["title"], folder / d["file"])
        for d in manifest["documents"]
        if d["file"].endswith((".html", ".htm"))
    ]


def _raw_parts(path: Path) -> tuple[list[str], list[str]]:
    tree = etree.fromstring(path.read_bytes(), etree.HTMLParser())
    for link in tree.iterfind(".//a[@class='headerlink']"):
        link.getparent().remove(link)
    # Headings of the content: inside a section (Sphinx: <section> or div.section).
    headings = [
        normalize("".join(h.itertext()))
        for h in tree.iter("h1", "h2", "h3", "h4")
        if normalize("".join(h.itertext()))
        and any(
            a.tag == "section" or "section" in (a.get("class") or "").split()
            for a in h.iterancestors()
        )
    ]
    code = [normalize("".join(p.itertext())) for p in tree.iter("pre")]
    return headings, [c for c in code if c]


def _facts(folder: Path) -> list[tuple[str, list[str]]]:
    path = folder / "eval_answers.json"
    if folder.name != "dev_faq" or not path.exists():
        return []
    out = []
    for case in json.loads(path.read_text())["cases"]:
        labels = case["turns"][-1] if "turns" in case else case
        if labels.get("key_facts"):
            out.append((labels["document"], labels["key_facts"]))
    return out


def measure(name: str) -> dict:
    extractor = EXTRACTORS[name]
    report = {}
    for label, folder in SETS.items():
        texts, headings_hit, headings_all, code_hit, code_all, chrome = {}, 0, 0, 0, 0, 0
        for title, path in _pages(folder):
            text = extractor(path.read_bytes())
            texts[title] = normalize(text)
            lines = {normalize(line) for line in text.splitlines()}
            headings, code = _raw_parts(path)
            headings_all += len(headings)
            headings_hit += sum(1 for h in headings if h in lines)
            code_all += len(code)
            code_hit += sum(1 for c in code if c in texts[title])
            chrome += sum(text.count(s) for s in CHROME)
        facts = _facts(folder)
        found = sum(
            1 for doc, any_of in facts if any(normalize(f) in texts.get(doc, "") for f in any_of)
        )
        report[label] = {
            "key facts": f"{found}/{len(facts)}" if facts else "-",
            "headings": f"{headings_hit}/{headings_all}",
            "code blocks": f"{code_hit}/{code_all}",
            "chrome strings": chrome,
        }
    return report


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "ours"
    print(json.dumps({which: measure(which)}, indent=1, ensure_ascii=False))
