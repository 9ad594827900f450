"""Extractive composition: one contiguous verbatim window around the best sentence, lists
kept whole, the card showing the passage around the quote; follow-up detection."""

import re
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

from conversations.orchestrator import compose
from conversations.orchestrator.extractive import citations, extractive_draft
from conversations.orchestrator.followup import is_follow_up
from verification import quote_is_verbatim

DIM = 256


def bag_of_words(texts: list[str]) -> list[np.ndarray]:
    """A deterministic stand-in for MiniLM: hashed word counts, unit length."""
    vectors = []
    for text in texts:
        v = np.zeros(DIM, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            v[zlib.crc32(word.encode()) % DIM] += 1.0
        norm = float(np.linalg.norm(v))
        vectors.append(v / norm if norm else v)
    return vectors


@dataclass(frozen=True)
class FakePassage:
    text: str
    evidence: float = 0.9
    score: float = 0.1
    chunk_id: int = 1
    document_id: int = 1
    document_version: int = 1
    title: str = "FAQ"
    heading_path: list[str] = field(default_factory=lambda: ["FAQ", "Can I delete Python?"])
    span: tuple[int, int] = (0, 10)
    url: str = ""


DELETE = (
    "That depends on where Python came from.\n\n"
    "If someone installed it deliberately, you can remove it without hurting anything. "
    "On Windows, use the Add/Remove Programs icon in the Control Panel.\n\n"
    "If Python was installed by a third-party application, you can also remove it, but that "
    "application will no longer work. You should use that application's uninstaller rather "
    "than removing Python directly.\n\n"
    "If Python came with your operating system, removing it is not recommended. If you "
    "remove it, whatever tools were written in Python will no longer run, and some of them "
    "might be important to you. Reinstalling the whole system would then be required."
)


def test_the_quote_is_one_contiguous_window_from_the_best_sentence_on():
    win = compose.compose(
        "how do I remove Python I installed deliberately", DELETE, embed=bag_of_words
    )
    assert win.quote.startswith("If someone installed it deliberately")
    # The sentence after the best one completes it: the old two-best-sentences pick left it
    # out or joined scattered sentences with "…".
    assert "Add/Remove Programs icon" in win.quote
    assert "…" not in win.quote
    assert win.quote in compose.squash(DELETE)
    assert compose.MIN_WORDS <= len(win.quote.split()) <= compose.MAX_WORDS


def test_a_sentence_introducing_a_list_starts_the_quote_and_the_list_stays_whole():
    text = (
        "Settings live in a Python module that Django imports at startup, and most problems "
        "with them show up as import errors the moment a management command or the "
        "development server starts, long before any request is handled, which is why the "
        "message names the environment variable rather than the module you wrote, and why "
        "reading the traceback from the top rarely helps as much as checking three things."
        "\n\nMake sure that:\n\n"
        "The environment variable DJANGO_SETTINGS_MODULE is set to a fully-qualified module.\n\n"
        "Said module is on sys.path.\n\nThe module doesn't contain syntax errors."
    )
    win = compose.compose(
        "error importing DJANGO_SETTINGS_MODULE environment variable", text, embed=bag_of_words
    )
    assert win.quote.startswith("Make sure that:")
    assert win.quote.endswith("The module doesn't contain syntax errors.")


def test_the_window_reaches_back_when_the_best_sentence_ends_the_passage():
    win = compose.compose(
        "is it not recommended to reinstall the whole system", DELETE, embed=bag_of_words
    )
    assert win.quote.endswith("Reinstalling the whole system would then be required.")
    assert len(win.quote.split()) >= compose.MIN_WORDS


def test_a_run_on_unit_is_cut_at_max_words():
    text = " ".join(["word"] * 300) + "."
    win = compose.compose("word", text, embed=bag_of_words)
    assert len(win.quote.split()) == compose.MAX_WORDS
    assert win.quote in compose.squash(text)


def test_the_reply_has_no_opener_and_every_quote_is_verbatim_and_cited():
    passage = FakePassage(DELETE)
    draft = extractive_draft(query="can I uninstall python", passages=[passage], embed=bag_of_words)
    assert draft.text.startswith("“")
    assert "help center says" not in draft.text
    quotes = re.findall(r"“(.+?)”\s*\[(\d)\]", draft.text, re.S)
    assert quotes
    assert all(quote_is_verbatim(q, DELETE) == [] for q, _ in quotes)
    assert [n for _, n in quotes] == ["1"]


def test_the_card_shows_the_passage_around_the_quote_never_the_quote_alone():
    draft = extractive_draft(
        query="third-party application uninstaller",
        passages=[FakePassage(DELETE)],
        embed=bag_of_words,
    )
    quote = re.findall(r"“(.+?)”", draft.text, re.S)[0]
    card = citations(draft)[0]["quote"]
    assert quote in card
    assert card != quote
    assert len(card) <= compose.CARD_CHARS


def test_a_passage_quoted_whole_leaves_the_card_to_name_the_source():
    short = "Yes. Only single-column primary keys are supported."
    draft = extractive_draft(
        query="multiple column primary keys", passages=[FakePassage(short)], embed=bag_of_words
    )
    assert draft.text == f"“{short}” [1]"
    assert citations(draft)[0]["quote"] == ""


def test_a_second_passage_of_the_same_section_is_not_quoted_twice():
    first = FakePassage(DELETE, evidence=0.9, chunk_id=1)
    same_section = FakePassage(DELETE[200:], evidence=0.89, chunk_id=2)
    draft = extractive_draft(
        query="can I delete python", passages=[first, same_section], embed=bag_of_words
    )
    assert len(draft.passages) == 1


def test_a_follow_up_is_answered_for_its_own_words():
    win = compose.compose("and if it came with the operating system?", DELETE, embed=bag_of_words)
    assert "operating system, removing it is not recommended" in win.quote


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("and how do I undo that?", True),
        ("what about members?", True),
        ("Express?", True),
        ("how long does it take to arrive", True),  # "it": needs an antecedent
        ("then can I cancel the order", True),
        ("How long do refunds take for opened items?", False),
        ("Which browsers does the Django admin support?", False),
    ],
)
def test_follow_ups_are_recognised_by_their_form(text, expected):
    assert is_follow_up(text) is expected


def test_the_passage_under_the_heading_that_asks_the_question_is_quoted_first():
    stable = FakePassage(
        "Yes, it's quite stable. Companies like Disqus and Instagram have used it for years.",
        evidence=0.80,
        chunk_id=1,
        heading_path=["FAQ: General", "Is Django stable?"],
    )
    scale = FakePassage(
        "Yes. Django uses a shared-nothing architecture, so you can add hardware at any level.",
        evidence=0.82,
        chunk_id=2,
        heading_path=["FAQ: General", "Does Django scale?"],
    )
    draft = extractive_draft(query="is django stable", passages=[scale, stable], embed=bag_of_words)
    assert draft.passages[0] is stable
    assert draft.text.startswith("“Yes, it's quite stable.")


def test_a_heading_that_asks_the_question_anchors_the_quote_at_its_entrys_lead():
    lead = "That depends on who you ask, and on where they grew up."
    filler = " ".join(f"Some say it one way, others another way, case {n}." for n in range(5))
    best = "Most people say Django is pronounced JANG-oh."
    after = " ".join(f"Recordings exist, and listeners disagree, sample {n}." for n in range(8))
    text = f"{lead} {filler} {best} {after}"
    question = FakePassage(text, heading_path=["FAQ: General", "How is Django pronounced?"])
    statement = FakePassage(text, heading_path=["FAQ: General", "Recordings"])
    asked = "how is django pronounced"
    under_question = extractive_draft(query=asked, passages=[question], embed=bag_of_words)
    elsewhere = extractive_draft(query=asked, passages=[statement], embed=bag_of_words)
    assert under_question.text.startswith(f"“{lead}")
    assert best in under_question.text
    assert elsewhere.text.startswith(f"“{best}")
