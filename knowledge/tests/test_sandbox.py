"""Extraction in a child process under memory, CPU and time limits, with the poison corpus."""

from pathlib import Path

import pytest

from knowledge.extraction import HTML, MARKDOWN, PDF, PLAIN, ExtractionError, Limits, extract
from knowledge.extraction.sandbox import SandboxError, extract_run

from . import poison

HELPCENTER = Path(__file__).resolve().parents[2] / "demo" / "helpcenter"
MIB = 1024 * 1024


def _limits(**overrides) -> Limits:
    fields = {"seconds": 20.0, "max_chars": 12_000_000, "max_pages": 1000, "max_bytes": 10 * MIB}
    return Limits.within(**(fields | overrides))


def _peak_rss() -> int:
    """This process's peak resident memory (VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("warranty.pdf", PDF),
        ("shipping-and-delivery.html", HTML),
        ("refunds.md", MARKDOWN),
        ("payments-and-billing.txt", PLAIN),
    ],
)
def test_the_child_extracts_what_the_worker_would(name, content_type):
    data = (HELPCENTER / name).read_bytes()
    run = extract_run(data=data, content_type=content_type, limits=_limits())
    here = extract(data=data, content_type=content_type, limits=_limits())
    assert run.extracted.text == here.text
    assert run.extracted.blocks == here.blocks
    assert 0 < run.peak_bytes < _limits().memory_bytes


# Every bomb of the corpus: (file, content type, limits, what the document's error says).
POISON = {
    "pdf-font-bomb": (
        lambda: poison.font_bomb_pdf(),
        PDF,
        {},
        "(decompressed data too large)",
    ),
    "pdf-font-bomb-base85": (
        lambda: poison.font_bomb_pdf(ascii85=True),
        PDF,
        {},
        "(decompressed data too large)",
    ),
    "pdf-content-bomb": (poison.decompression_bomb_pdf, PDF, {}, "decompressed data too large"),
    "pdf-image-bomb": (poison.image_bomb_pdf, PDF, {}, "100,000 x 100,000 pixels"),
    "html-nested": (lambda: poison.nested_divs_html(20_000), HTML, {}, "too deeply nested"),
    "html-memory-bomb": (
        lambda: poison.tiny_elements_html(4 * MIB),
        HTML,
        {"memory_bytes": 256 * MIB},
        "memory limit (256 MiB per document)",
    ),
    "markdown-slow": (
        lambda: poison.slow_markdown(2 * MIB),
        MARKDOWN,
        {"seconds": 2.0},
        "it took longer than 2 s",
    ),
    "text-single-line": (
        lambda: poison.single_line_text(MIB),
        PLAIN,
        {},
        "a line longer than 200,000 characters",
    ),
    "text-oversized": (
        lambda: poison.paragraphs(11 * MIB),
        PLAIN,
        {},
        "documents of at most 10,485,760 bytes are read",
    ),
}


@pytest.mark.parametrize("bomb", POISON)
def test_every_bomb_fails_in_the_child_with_its_reason_and_bounded_memory(bomb):
    make, content_type, overrides, reason = POISON[bomb]
    limits = _limits(**overrides)
    data = make()
    before = _peak_rss()
    with pytest.raises(ExtractionError) as failure:
        extract_run(data=data, content_type=content_type, limits=limits)
    assert reason in str(failure.value)
    # What the child held stayed under its limit, and none of it was held here.
    if isinstance(failure.value, SandboxError):
        assert failure.value.peak_bytes <= limits.memory_bytes
    assert _peak_rss() - before < 64 * MIB


@pytest.mark.slow
def test_a_file_that_needs_more_memory_than_allowed_ends_at_the_limit_not_in_the_worker():
    """The same file extracts with enough memory: the limit, not the file, decided."""
    data = poison.tiny_elements_html(MIB)
    with pytest.raises(SandboxError, match="memory limit") as failure:
        extract_run(data=data, content_type=HTML, limits=_limits(memory_bytes=120 * MIB))
    assert 0 < failure.value.peak_bytes <= 120 * MIB
    run = extract_run(data=data, content_type=HTML, limits=_limits())
    assert run.extracted.text.startswith("a")
    assert run.peak_bytes > 120 * MIB


def test_a_child_past_its_deadline_is_killed_and_says_so():
    """markdown-it never returns to our deadline checks on this file: the parent kills it."""
    with pytest.raises(SandboxError, match="longer than 1 s and was killed"):
        extract_run(
            data=poison.slow_markdown(4 * MIB), content_type=MARKDOWN, limits=_limits(seconds=1.0)
        )


def test_a_deadline_already_passed_starts_no_child():
    with pytest.raises(SandboxError, match="time limit per document"):
        extract_run(data=b"# Hi\n\nText.", content_type=MARKDOWN, limits=_limits(seconds=-1))
