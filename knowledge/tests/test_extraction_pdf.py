"""PDF text layers that pypdf reads with their words run together, and page furniture."""

from pathlib import Path

import pytest

from knowledge.extraction import PDF, ExtractionError, Limits, extract
from knowledge.extraction.pdf import _pdf_blocks, _without_page_furniture
from knowledge.extraction.pdf_layout import PAGE_BREAK, layout_lines, unspaced

from . import poison

# Four pages of the Debian FAQ's PDF (Debian package debian-faq 11.1, dblatex with CID
# fonts: the spaces between words are only offsets in the text runs). GPL-2+, see
# demo/dev_debian_faq/LICENSE-debian-faq.txt.
DEBIAN_FAQ_PDF = Path(__file__).parent / "data" / "debian-faq-4-pages.pdf"


def test_a_pdf_whose_runs_have_no_spaces_is_read_by_glyph_positions():
    result = extract(data=DEBIAN_FAQ_PDF.read_bytes(), content_type=PDF)
    assert "The project name is pronounced Deb’-ee-en, with a short e in Deb" in result.text
    assert "Theprojectname" not in result.text
    headings = [b.text for b in result.blocks if b.level]
    # a title that wraps over two lines is one heading
    assert (
        "1.6 How does the Debian project fit in or compare with the Free Software Foundation’s "
        "GNU project?"
    ) in headings
    assert "2.4 How do I install Debian from CD-ROMs?" in headings
    # the running headers ("CHAPTER 2. GETTING AND INSTALLING …") are not text
    assert "CHAPTER" not in result.text
    # a paragraph that goes on over a page break is one block
    assert any(
        b.text.startswith("package maintenance system; the Debian package maintenance system")
        for b in result.blocks
    )


def test_a_pdf_with_spaced_runs_keeps_pypdfs_reading():
    lines = [("Refunds take five business days.", 10.0, 700.0)]
    assert not unspaced(lines)
    assert unspaced([("Refundstakefivebusinessdaysafterwereceiveit.", 10.0, 700.0)])
    # a manual whose prose runs together between spaced code and tables
    mixed = [("Weseethatthefilesaresettoinstallunder /usr/local.", 10.0, 700.0)] + [
        ("$ dh_make -f ../foo.tar.gz and more spaced words here", 10.0, 690.0)
    ] * 6
    assert unspaced(mixed)
    assert extract(data=poison.text_pdf(pages=2), content_type=PDF).text == (
        "Refunds take five business days.\n\nRefunds take five business days."
    )


def test_the_layout_reader_keeps_the_character_cap():
    data = poison.text_pdf(pages=4, line="x" * 100)
    with pytest.raises(ExtractionError, match="more than 250 characters of text"):
        layout_lines(data, Limits(max_chars=250))


def test_the_layout_reader_stops_at_the_deadline():
    """pdfminer is slower than pypdf: a run-together file checks the deadline each page."""
    limits = Limits.within(seconds=0.0, max_chars=1_000_000, max_pages=100)
    with pytest.raises(ExtractionError, match="time limit per document"):
        layout_lines(DEBIAN_FAQ_PDF.read_bytes(), limits)


def test_a_malformed_run_together_pdf_is_an_extraction_error_not_a_crash():
    data = DEBIAN_FAQ_PDF.read_bytes()
    cut = data[: len(data) // 2]  # the text layer of the first pages, the rest missing
    with pytest.raises(ExtractionError, match="The PDF cannot be read"):
        extract(data=cut, content_type=PDF)


def _page(*texts: str) -> list[tuple[str, float, float]]:
    return [(t, 10.0, 700.0 - 12 * i) for i, t in enumerate(texts)] + [PAGE_BREAK]


def test_page_numbers_running_headers_and_contents_lines_are_dropped():
    lines = [
        *_page(
            "Contents",
            "1 Returns . . . . . . . . . . 1",
            "2 Refunds",
            ". . . . . . . . . .",  # leaders a layout put on lines of their own
            ".",
            "3",
            "3.1 Abroad",
            "ii",
        ),
        *_page("Acme Guide", "Returns are free within 30 days.", "More text here.", "1"),
        *_page("Acme Guide", "Refunds take five days.", "Even more text.", "Page 2 of 3"),
        *_page("Acme Guide", "Shipping is free over $50.", "The end.", "3"),
    ]
    kept = [t for t, _, _ in _without_page_furniture(lines) if t]
    assert kept == [
        "Contents",
        "Returns are free within 30 days.",
        "More text here.",
        "Refunds take five days.",
        "Even more text.",
        "Shipping is free over $50.",
        "The end.",
    ]


def test_a_page_of_nothing_but_a_repeated_line_keeps_it():
    lines = _page("Refunds take five business days.") * 4
    assert len([t for t, _, _ in _without_page_furniture(lines) if t]) == 4


def test_a_wrapped_title_is_one_heading_and_a_numbered_one_starts_anew():
    lines = [
        ("1.5 What is the difference between this and", 14.0, 700.0),
        ("other products?", 14.0, 684.0),
        ("1.6 Who makes it?", 14.0, 660.0),
        ("Acme does, in Norway.", 10.0, 640.0),
        ("Body text is set in the body size, and most of the text is body text.", 10.0, 628.0),
    ]
    result = _pdf_blocks(lines, Limits())
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "1.5 What is the difference between this and other products?"),
        (1, "1.6 Who makes it?"),
        (
            0,
            "Acme does, in Norway. Body text is set in the body size, and most of the text is "
            "body text.",
        ),
    ]
