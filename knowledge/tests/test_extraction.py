import pytest

from demo.pdf import pdf_bytes
from knowledge.extraction import (
    HTML,
    MARKDOWN,
    PDF,
    PLAIN,
    ExtractionError,
    detect_content_type,
    extract,
)


def test_pdf_headings_are_recognised_by_font_size(warranty_pdf):
    result = extract(data=warranty_pdf, content_type=PDF)
    headings = [(b.level, b.text) for b in result.blocks if b.level]
    assert headings[0] == (1, "Acme Outdoor Gear Limited Warranty")
    assert (2, "How to file a warranty claim") in headings
    body = " ".join(b.text for b in result.blocks if not b.level)
    assert "covered for 2 years from the purchase date" in body
    assert "W-20931" in body


def test_pdf_without_text_layer_is_an_extraction_error(blank_pdf):
    with pytest.raises(ExtractionError, match="no extractable text"):
        extract(data=blank_pdf, content_type=PDF)


def test_html_drops_navigation_scripts_and_page_chrome(shipping_html):
    result = extract(data=shipping_html, content_type=HTML)
    assert "dataLayer" not in result.text
    assert "Tents" not in result.text  # navigation menu
    assert "Cookie settings" not in result.text  # footer
    assert "join Summit Club" not in result.text  # aria-hidden banner
    assert "Related articles" not in result.text  # aside
    headings = [(b.level, b.text) for b in result.blocks if b.level]
    assert headings[:2] == [(1, "Shipping and delivery"), (2, "Processing times")]
    assert "Overnight | next business day" in result.text


def test_markdown_keeps_heading_levels_and_strips_markup():
    md = b"# Title\n\nIntro with **bold** and [a link](https://x.example).\n\n## Part\n\n- one\n"
    result = extract(data=md, content_type=MARKDOWN)
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Title"),
        (0, "Intro with bold and a link."),
        (2, "Part"),
        (0, "one"),
    ]


def test_block_spans_index_the_extracted_text():
    result = extract(data=b"Intro\n=====\n\nFirst para.\n\nSECOND\nmore text", content_type=PLAIN)
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "Intro"),
        (0, "First para."),
        (2, "SECOND"),
        (0, "more text"),
    ]
    for block in result.blocks:
        assert result.text[block.start : block.end] == block.text


@pytest.mark.parametrize(
    ("filename", "declared", "head", "expected"),
    [
        ("guide.pdf", "application/pdf", b"%PDF-1.7 ...", PDF),
        ("guide.pdf", "application/pdf", b"<html>not a pdf", None),
        ("page.HTM", "text/html", b"<html>", HTML),
        ("notes.md", "application/octet-stream", b"# x", MARKDOWN),
        ("notes.txt", "text/plain", b"plain", PLAIN),
        ("report.docx", "application/vnd.openxmlformats", b"PK\x03\x04", None),
        ("image.png", "image/png", b"\x89PNG", None),
        ("notes.txt", "image/png", b"plain", None),
        ("binary.txt", "text/plain", b"ab\x00cd", None),
    ],
)
def test_content_type_detection(filename, declared, head, expected):
    assert detect_content_type(filename=filename, declared=declared, head=head) == expected


def test_pdf_generator_round_trips_long_text():
    text = "Refunds go back to the original payment method in 5-10 business days. " * 40
    result = extract(data=pdf_bytes([("h1", "Refunds"), ("p", text)]), content_type=PDF)
    assert result.blocks[0].text == "Refunds"
    assert result.text.count("5-10 business days") == 40
