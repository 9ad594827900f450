"""PDF text by glyph positions (pdfminer.six), for text layers whose words run together.

pypdf reads the words of a text run in order, and finds the spaces between them in the
run's spacing offsets only when it knows the font's space width. PDFs that typeset with
CID fonts (`/Type0`, `Identity-H`: XeLaTeX, LuaLaTeX, dblatex, many office exports) give
it none, and the Debian FAQ's PDF read as "Thisdocumentgivesfrequentlyaskedquestions…".
pdfminer lays the glyphs out and puts a space where the gap between two of them is wider
than a fraction of a glyph. It runs only on a file pypdf has already read under the
resource limits (`pdf.py`): every stream it decodes decoded within them.
"""

from __future__ import annotations

import io
import re
from collections import Counter

from pdfminer.high_level import extract_pages
from pdfminer.layout import LAParams, LTChar, LTTextContainer, LTTextLine

from knowledge.extraction.base import Limits

# A text layer runs its words together when a tenth of its letters sit in "words" this long:
# in spaced prose they hold 1-3% (URLs, paths, identifiers); Debian's dblatex manuals, whose
# code and tables are spaced and prose is not, 19-76%.
LONG_WORD = 20
UNSPACED_SHARE = 0.1
# What ends a text box (a paragraph, unless it goes on mid-sentence) and a page.
BOX_BREAK = ("", 0.0, 0.0)
PAGE_BREAK = ("", -1.0, 0.0)
_TOKEN = re.compile(r"\S+")


def unspaced(lines: list[tuple[str, float, float]]) -> bool:
    """Does UNSPACED_SHARE of the text's characters sit in words of LONG_WORD or more?"""
    total = long = 0
    for text, _, _ in lines:
        for token in _TOKEN.findall(text):
            total += len(token)
            if len(token) >= LONG_WORD:
                long += len(token)
    return total > 0 and long >= UNSPACED_SHARE * total


def layout_lines(data: bytes, limits: Limits) -> list[tuple[str, float, float]]:
    """Text lines of every page as (text, font size, y position), laid out by pdfminer;
    BOX_BREAK ends a text box, PAGE_BREAK a page."""
    lines: list[tuple[str, float, float]] = []
    chars = 0
    for page in extract_pages(io.BytesIO(data), laparams=LAParams()):
        limits.check_time()
        for box in page:
            if not isinstance(box, LTTextContainer):
                continue
            for line in box:
                if not isinstance(line, LTTextLine):
                    continue
                text = line.get_text().strip()
                if not text:
                    continue
                sizes = Counter(round(c.size, 1) for c in line if isinstance(c, LTChar))
                size = sizes.most_common(1)[0][0] if sizes else 0.0
                lines.append((text, size, line.y0))
                chars += len(text)
            lines.append(BOX_BREAK)
        limits.check_chars(chars, what="PDF")
        lines.append(PAGE_BREAK)
    return lines
