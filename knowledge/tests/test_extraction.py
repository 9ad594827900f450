import time

import pytest

from demo.pdf import pdf_bytes
from knowledge.extraction import (
    HTML,
    MARKDOWN,
    PDF,
    PLAIN,
    ExtractionError,
    Limits,
    detect_content_type,
    extract,
)
from knowledge.extraction.pdf import _pdf_blocks

from . import poison


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


def test_restructuredtext_titles_over_and_underlined_with_any_mark_are_headings():
    rst = (
        b"=========\nUser FAQ\n=========\n\nInstalling\n----------\n\nRun the installer.\n\n"
        b"On Windows\n~~~~~~~~~~\nUse the MSI package.\n\nA line, then a rule:\n\n-----\n\nEnd.\n"
    )
    result = extract(data=rst, content_type=PLAIN)
    assert [(b.level, b.text) for b in result.blocks] == [
        (1, "User FAQ"),
        (2, "Installing"),
        (0, "Run the installer."),
        (2, "On Windows"),
        (0, "Use the MSI package."),
        (0, "A line, then a rule:"),
        (0, "End."),  # the rule is decoration (plain text 2)
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
        ("faq.xhtml", "application/xhtml+xml", b"<?xml version='1.0'?><html>", HTML),
        ("guide.rst", "text/x-rst", b"Title\n=====", PLAIN),
        ("guide.rst", "application/octet-stream", b"Title\n=====", PLAIN),
    ],
)
def test_content_type_detection(filename, declared, head, expected):
    assert detect_content_type(filename=filename, declared=declared, head=head) == expected


def test_pdf_generator_round_trips_long_text():
    text = "Refunds go back to the original payment method in 5-10 business days. " * 40
    result = extract(data=pdf_bytes([("h1", "Refunds"), ("p", text)]), content_type=PDF)
    assert result.blocks[0].text == "Refunds"
    assert result.text.count("5-10 business days") == 40


# --------------------------------------------------------------------------- hostile files


def test_decompression_bomb_pdf_is_an_extraction_error_naming_the_limit():
    bomb = poison.decompression_bomb_pdf(80 * 1024 * 1024)
    assert len(bomb) < 200_000
    with pytest.raises(ExtractionError, match="expands beyond the safe limits") as exc:
        extract(data=bomb, content_type=PDF)
    assert "32 MiB" in str(exc.value)


def test_pdf_stream_under_the_limit_still_extracts():
    result = extract(data=poison.decompression_bomb_pdf(1024 * 1024), content_type=PDF)
    assert result.text == "Hello"


def test_pdf_over_the_page_cap_is_an_extraction_error():
    data = poison.text_pdf(pages=3)
    assert extract(data=data, content_type=PDF, limits=Limits(max_pages=3)).text
    with pytest.raises(ExtractionError, match="has 3 pages; the limit per document is 2"):
        extract(data=data, content_type=PDF, limits=Limits(max_pages=2))


def test_pdf_over_the_character_cap_is_an_extraction_error():
    data = poison.text_pdf(pages=4, line="x" * 100)
    with pytest.raises(ExtractionError, match="more than 250 characters of text"):
        extract(data=data, content_type=PDF, limits=Limits(max_chars=250))


def test_pdf_with_deeply_nested_arrays_is_an_extraction_error():
    content = b"BT /F1 12 Tf 72 720 Td " + b"[" * 50_000 + b"(x)" + b"]" * 50_000 + b" TJ ET"
    with pytest.raises(ExtractionError, match="The PDF cannot be read"):
        extract(data=poison.pdf_with_content(content), content_type=PDF)


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.4\nnot a pdf at all", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF"],
)
def test_malformed_pdf_is_an_extraction_error(data):
    with pytest.raises(ExtractionError, match="The PDF cannot be read"):
        extract(data=data, content_type=PDF)


@pytest.mark.parametrize("content_type", [PLAIN, MARKDOWN, HTML])
def test_text_over_the_character_cap_is_an_extraction_error(content_type):
    data = poison.paragraphs(5_000, html=content_type == HTML)
    assert extract(data=data, content_type=content_type, limits=Limits(max_chars=10_000)).text
    with pytest.raises(ExtractionError, match="more than 1,000 characters of text"):
        extract(data=data, content_type=content_type, limits=Limits(max_chars=1_000))


def test_20000_nested_divs_are_an_extraction_error_not_a_recursion_error():
    with pytest.raises(ExtractionError, match="too deeply nested") as exc:
        extract(data=poison.nested_divs_html(20_000), content_type=HTML)
    assert "255 levels" in str(exc.value)


def test_html_nested_within_the_depth_cap_keeps_the_deepest_text():
    result = extract(data=poison.nested_divs_html(200), content_type=HTML)
    assert [b.text for b in result.blocks] == ["Deep text at the bottom."]


def test_many_elements_in_one_row_of_nested_tables_extract_once_each():
    cells = "".join(f"<td>cell {i}</td>" for i in range(3))
    html = f"<table><tr><td><table><tr>{cells}</tr></table></td><td>last</td></tr></table>"
    result = extract(data=html.encode(), content_type=HTML)
    assert [b.text for b in result.blocks] == ["cell 0 cell 1 cell 2 | last"]


@pytest.mark.parametrize("content_type", [PLAIN, MARKDOWN, HTML, PDF])
def test_passed_deadline_stops_extraction_with_the_time_limit_in_the_error(content_type):
    if content_type == PDF:
        data = poison.text_pdf(pages=2)
    else:
        data = poison.paragraphs(2_000, html=content_type == HTML)
    expired = Limits(deadline=time.monotonic() - 1, seconds=120)
    with pytest.raises(ExtractionError, match="stopped after 120 s, the time limit per document"):
        extract(data=data, content_type=content_type, limits=expired)


def test_nul_and_control_characters_never_reach_the_text():
    data = b"Refunds\x00 take \x07five\x1b days.\n\nSecond \x0bparagraph."
    result = extract(data=data, content_type=PLAIN)
    assert result.text == "Refunds take five days.\n\nSecond paragraph."
    assert [result.text[b.start : b.end] for b in result.blocks] == [b.text for b in result.blocks]


@pytest.mark.slow
def test_ten_mib_of_small_paragraphs_extracts_every_paragraph():
    data = poison.paragraphs(10 * 1024 * 1024)
    result = extract(data=data, content_type=PLAIN)
    assert len(result.blocks) == data.count(b"\n\n") + 1
    last = result.blocks[-1]
    assert result.text[last.start : last.end] == data.rsplit(b"\n\n", 1)[1].decode()


def test_pdf_text_runs_close_up_before_punctuation_but_not_before_a_dot_file():
    """A PDF's runs are joined with spaces by us: "," or "." as a run of its own belongs to
    the word before it, a file name that starts with "." does not."""
    lines = [
        ("Add it to the file named", 10.0, 700.0),
        (".gitconfig", 10.0, 700.0),
        ("in your home directory", 10.0, 700.0),
        (",", 10.0, 700.0),
        ("then run git add", 10.0, 686.0),
        ("./configure", 10.0, 686.0),
        (".", 10.0, 686.0),
    ]
    result = _pdf_blocks(lines, Limits())
    assert [b.text for b in result.blocks] == [
        "Add it to the file named .gitconfig in your home directory, then run git add ./configure."
    ]
