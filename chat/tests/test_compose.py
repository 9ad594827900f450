"""Extractive composition: one contiguous verbatim window around the best sentence, lists
kept whole, the card showing the passage around the quote; follow-up detection."""

import re
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest

from chat.orchestrator import extractive
from chat.orchestrator.extractive import citations, extractive_draft
from chat.orchestrator.followup import is_follow_up
from knowledge.embeddings import EMBEDDING_DIMENSIONS
from knowledge.sentences import passage_sentences
from verification import compose, quote_is_verbatim

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
    heading_path: list[str] = field(default_factory=lambda: ["FAQ", "Can I delete the app?"])
    span: tuple[int, int] = (0, 10)
    url: str = ""
    continuation: str = ""
    sentence_vectors: bytes = b""


# Written for these tests, shaped like an FAQ answer (no eval set holds it: the held-out
# corpora must stay unseen by the code they judge).
DELETE = (
    "That depends on where the app came from.\n\n"
    "If you installed it on purpose, you can remove it without losing anything. "
    "On a Mac, drag it from the Applications folder to the Trash.\n\n"
    "If the app was installed by another program, you can also remove it, but that "
    "program will no longer sync. You should use that program's own removal tool rather "
    "than deleting the app directly.\n\n"
    "If the app came with your laptop, removing it is not recommended. If you "
    "remove it, whatever shortcuts were built on it will no longer run, and some of them "
    "might be important to you. Resetting the whole laptop would then be required."
)


def test_the_quote_is_one_contiguous_window_from_the_best_sentence_on():
    win = compose.compose(
        "how do I remove the app I installed on purpose", DELETE, embed=bag_of_words
    )
    assert win.quote.startswith("If you installed it on purpose")
    # The sentence after the best one completes it: the old two-best-sentences pick left it
    # out or joined scattered sentences with "…".
    assert "Applications folder to the Trash" in win.quote
    assert "…" not in win.quote
    assert win.quote in compose.squash(DELETE)
    assert compose.MIN_WORDS <= len(win.quote.split()) <= compose.MAX_WORDS


def test_a_sentence_introducing_a_list_starts_the_quote_and_the_list_stays_whole():
    text = (
        "Settings live in a Python module that Django imports at startup, and most problems "
        "with them show up as import errors the moment a management command or the "
        "development server starts, long before any request is handled, which is why the "
        "message names the environment variable rather than the module you wrote, and why "
        "reading the traceback from the top rarely helps as much as checking three things, "
        "each of which takes a minute at most and none of which needs a debugger, a second "
        "terminal or any change to the code you are trying to run."
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
        "is it not recommended to reset the whole laptop", DELETE, embed=bag_of_words
    )
    assert win.quote.endswith("Resetting the whole laptop would then be required.")
    assert len(win.quote.split()) >= compose.MIN_WORDS


# A chunk boundary inside the entry: the chunk ends on the sentence that matches the question,
# and the rest of the section (what the search returns as the passage's continuation) holds
# the how.
CHUNK_END = DELETE.index(" On a Mac")


# Under a heading that asks no question the quote is anchored at the best sentence: an FAQ
# entry's answer is quoted from its start (`test_an_faq_entry_is_quoted_from_its_start…`).
TOPIC = ["Mac notes", "Cleaning up a laptop"]


def test_a_quote_runs_on_into_the_rest_of_its_section_instead_of_reaching_back():
    passage = FakePassage(DELETE[:CHUNK_END], continuation=DELETE[CHUNK_END:], heading_path=TOPIC)
    draft = extractive_draft(
        query="how do I remove the app I installed on purpose",
        passages=[passage],
        embed=bag_of_words,
    )
    quote = re.findall(r"“(.+?)”", draft.text, re.S)[0]
    assert quote.startswith("If you installed it on purpose")  # not reached back
    assert "Applications folder to the Trash" in quote  # from the continuation
    assert quote_is_verbatim(quote, passage.text + passage.continuation) == []
    card = citations(draft)[0]["quote"]  # the section around the quote, continuation included
    assert card in compose.squash(passage.text + passage.continuation)
    assert card not in compose.squash(passage.text)


def test_a_chunk_without_its_continuation_reaches_back_instead():
    passage = FakePassage(DELETE[:CHUNK_END])
    draft = extractive_draft(
        query="how do I remove the app I installed on purpose",
        passages=[passage],
        embed=bag_of_words,
    )
    assert draft.text.startswith("“That depends on where the app came from.")


def test_the_best_sentence_is_never_one_of_the_continuation():
    # the continuation matches the question far better, but it is context, not the passage
    win = compose.compose(
        "laptop shortcuts built on it resetting the whole laptop",
        DELETE[:CHUNK_END],
        embed=bag_of_words,
        continuation=DELETE[CHUNK_END:],
    )
    assert win.start < CHUNK_END
    assert win.quote.startswith(("That depends", "If you installed"))


def test_a_run_on_unit_is_cut_at_max_words_and_marked():
    text = " ".join(["word"] * 300) + "."
    win = compose.compose("word", text, embed=bag_of_words)
    assert win.quote == " ".join(["word"] * compose.MAX_WORDS) + " …"
    assert quote_is_verbatim(win.quote, text) == []


def test_the_reply_has_no_opener_and_every_quote_is_verbatim_and_cited():
    passage = FakePassage(DELETE)
    draft = extractive_draft(
        query="can I uninstall the app", passages=[passage], embed=bag_of_words
    )
    assert draft.text.startswith("“")
    assert "help center says" not in draft.text
    quotes = re.findall(r"“(.+?)”\s*\[(\d)\]", draft.text, re.S)
    assert quotes
    assert all(quote_is_verbatim(q, DELETE) == [] for q, _ in quotes)
    assert [n for _, n in quotes] == ["1"]


def test_an_faq_entry_is_quoted_from_its_start_though_the_question_shares_no_word_with_it():
    autoincrement = (
        "Short answer: A column declared INTEGER PRIMARY KEY will autoincrement.\n\n"
        "Longer answer: If you declare a column of a table to be INTEGER PRIMARY KEY, then "
        "whenever you insert a NULL into that column of the table, the NULL is automatically "
        "converted into an integer which is one greater than the largest value of that column "
        "over all other rows in the table, or 1 if the table is empty.\n\n"
        "There is a function named sqlite3_last_insert_rowid() which will return the integer "
        "key for the most recent insert operation. Note that the integer key is one greater "
        "than the largest key that was in the table just prior to the insert."
    )
    query = "how do i get an id column that counts up by itself when i insert rows"
    entry = FakePassage(
        autoincrement, heading_path=["FAQ", "How do I create an AUTOINCREMENT field?"]
    )
    draft = extractive_draft(query=query, passages=[entry], embed=bag_of_words)
    assert draft.text.startswith("“Short answer: A column declared INTEGER PRIMARY KEY")
    # the same text under a heading that asks nothing is quoted from its best sentence
    topic = FakePassage(autoincrement, heading_path=["FAQ", "Keys"])
    draft = extractive_draft(query=query, passages=[topic], embed=bag_of_words)
    assert not draft.text.startswith("“Short answer")


def test_the_card_shows_the_passage_around_the_quote_never_the_quote_alone():
    draft = extractive_draft(
        query="another program own removal tool",
        passages=[FakePassage(DELETE, heading_path=TOPIC)],
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
        query="can I delete the app", passages=[first, same_section], embed=bag_of_words
    )
    assert len(draft.passages) == 1


def test_a_follow_up_is_answered_for_its_own_words():
    win = compose.compose("and if it came with the laptop?", DELETE, embed=bag_of_words)
    assert "came with your laptop, removing it is not recommended" in win.quote


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("and how do I undo that?", True),
        ("what about members?", True),
        ("Express?", True),
        ("how long does it take to arrive", True),  # "it": needs an antecedent
        ("then can I cancel the order", True),
        ("is turning off synchronous safe though?", True),  # a contrast with the last turn
        ("i really do want to overwrite what's on the server, how", True),
        ("How and when do refunds arrive?", False),
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


def _sections(*evidence: float) -> list[FakePassage]:
    """Passages of three different FAQ sections about refunds, with the given evidence."""
    texts = [
        "Refunds reach your card within five business days of the return arriving.",
        "Refunds for gift purchases go to the gift card the order was paid with.",
        "Refunds of shipping costs are made only when the item arrived damaged.",
    ]
    return [
        FakePassage(
            text, evidence=ev, chunk_id=n, document_id=n, heading_path=["FAQ", f"Section {n}"]
        )
        for n, (text, ev) in enumerate(zip(texts, evidence, strict=True), start=1)
    ]


def test_a_third_section_nearly_as_strong_as_the_first_is_quoted_too():
    draft = extractive_draft(
        query="when do refunds arrive", passages=_sections(0.9, 0.85, 0.75), embed=bag_of_words
    )
    assert [p.chunk_id for p in draft.passages] == [1, 2, 3]
    assert re.findall(r"\[(\d)\]", draft.text) == ["1", "2", "3"]


def test_a_third_section_ranked_below_the_third_ratio_is_left_out():
    weak_third = _sections(0.9, 0.85, 0.45)  # its rank well under 0.8 of the first's
    draft = extractive_draft(
        query="when do refunds arrive", passages=weak_third, embed=bag_of_words
    )
    assert [p.chunk_id for p in draft.passages] == [1, 2]
    hedged = extractive_draft(
        query="when do refunds arrive",
        passages=_sections(0.9, 0.85, 0.85),
        embed=bag_of_words,
        max_quotes=1,
    )
    assert [p.chunk_id for p in hedged.passages] == [1]


def test_three_parts_of_one_entry_are_quoted_in_the_entrys_order():
    parts = [
        f"Part {n} of the refund entry says step {n} comes now, and only then." for n in range(3)
    ]
    entry = [
        FakePassage(parts[n], evidence=ev, chunk_id=n + 1, span=(100 * n, 100 * n + 60))
        for n, ev in [(2, 0.9), (0, 0.88), (1, 0.86)]  # ranked: the last part first
    ]
    draft = extractive_draft(query="refund entry step", passages=entry, embed=bag_of_words)
    assert [p.chunk_id for p in draft.passages] == [1, 2, 3]
    assert draft.text.index("Part 0") < draft.text.index("Part 1") < draft.text.index("Part 2")


# An entry whose lead does not answer on its own: the best sentence comes after some filler.
PRONOUNCED_LEAD = "That depends on who you ask, and on where they grew up."
PRONOUNCED_BEST = "Most people say Django is pronounced JANG-oh."
PRONOUNCED = " ".join(
    [
        PRONOUNCED_LEAD,
        *(f"Some say it one way, others another way, case {n}." for n in range(5)),
        PRONOUNCED_BEST,
        *(f"Recordings exist, and listeners disagree, sample {n}." for n in range(8)),
    ]
)


def test_a_heading_that_asks_the_question_anchors_the_quote_at_its_entrys_lead():
    lead, best, text = PRONOUNCED_LEAD, PRONOUNCED_BEST, PRONOUNCED
    question = FakePassage(text, heading_path=["FAQ: General", "How is Django pronounced?"])
    statement = FakePassage(text, heading_path=["FAQ: General", "Recordings"])
    asked = "how is django pronounced"
    under_question = extractive_draft(query=asked, passages=[question], embed=bag_of_words)
    elsewhere = extractive_draft(query=asked, passages=[statement], embed=bag_of_words)
    assert under_question.text.startswith(f"“{lead}")
    assert best in under_question.text
    assert elsewhere.text.startswith(f"“{best}")


def test_a_heading_that_means_the_question_in_other_words_anchors_the_quote_at_its_lead():
    """Customers rarely use the heading's words: the heading's embedding decides too."""
    lead, best, text = PRONOUNCED_LEAD, PRONOUNCED_BEST, PRONOUNCED
    heading = "Saying the framework's name"
    asked = "how is django pronounced"

    def embed(texts: list[str]) -> list[np.ndarray]:
        # The heading and the question mean the same (cosine 1) without sharing a word.
        return bag_of_words([asked if t == heading else t for t in texts])

    passage = FakePassage(text, heading_path=["FAQ: General", heading])
    assert compose.heading_similarity(asked, [heading]) == [0.0]
    assert extractive_draft(query=asked, passages=[passage], embed=embed).text.startswith(
        f"“{lead}"
    )
    unrelated = FakePassage(text, heading_path=["FAQ: General", "Recordings"])
    assert extractive_draft(query=asked, passages=[unrelated], embed=embed).text.startswith(
        f"“{best}"
    )


# An entry whose fact sits about eighty words past its lead, with more of the entry after it.
TOASTER_LEAD = "Python can run on a toaster, with some care."
TOASTER_FACT = "The toaster needs at least 64 megabytes of memory for the interpreter."
TOASTER = " ".join(
    [
        TOASTER_LEAD,
        *(f"Older boards were slower, and builds took hours, board {n}." for n in range(8)),
        TOASTER_FACT,
        *(f"Cooling matters too, fans help, and so does airflow {n}." for n in range(6)),
    ]
)


def test_an_entry_under_a_heading_that_asks_the_question_is_quoted_further():
    """The entry is the answer: its first quote takes every sentence that fits in
    LEAD_MAX_WORDS, where a quote of another section stops at MIN_WORDS."""
    asked = "can python run on a toaster"
    entry = FakePassage(TOASTER, heading_path=["FAQ", "Can Python run on a toaster?"])
    draft = extractive_draft(query=asked, passages=[entry], embed=bag_of_words)
    quote = draft.text.split("” [1]")[0]
    assert quote.startswith(f"“{TOASTER_LEAD}")
    assert TOASTER_FACT in quote
    filler = len(f"Cooling matters too, fans help, and so does airflow {0}.".split())
    assert compose.LEAD_MAX_WORDS - filler < len(quote.split()) <= compose.LEAD_MAX_WORDS
    assert quote_is_verbatim(quote.strip("“”"), TOASTER) == []

    elsewhere = FakePassage(TOASTER, heading_path=["FAQ", "Hardware notes"])
    other = extractive_draft(query=asked, passages=[elsewhere], embed=bag_of_words).text
    assert len(other.split("” [1]")[0].split()) <= compose.MAX_WORDS
    assert TOASTER_FACT not in other


# An entry whose answer is its last sentence, a little past 100 words: the two readings of a
# standard first, then which one the product follows.
READINGS = " ".join(
    [
        "Perhaps you mean the statement from the standard about unique columns.",
        *(
            f"Reading {n} says a row may repeat a value when one part is missing, case {n}."
            for n in range(6)
        ),
        "That statement is ambiguous, having two readings.",
        "The product follows reading one, as do most other engines.",
    ]
)


def test_an_entrys_quote_takes_every_sentence_that_fits_in_its_words():
    """An entry's answer ends where the entry does: its quote does not stop at a word count
    below LEAD_MAX_WORDS while the next sentence fits."""
    asked = "my unique column lets several rows repeat, isnt that against the standard"
    entry = FakePassage(READINGS, heading_path=["FAQ", "Is a repeated unique value a bug?"])
    quote = extractive_draft(query=asked, passages=[entry], embed=bag_of_words).text
    assert 100 < len(READINGS.split()) <= compose.LEAD_MAX_WORDS
    assert quote == f"“{READINGS}” [1]"


def test_a_heading_sharing_two_of_the_questions_words_in_five_anchors_the_quote_at_its_lead():
    """A Dice overlap of 0.4 is enough (a customer's question is wordier than a heading)."""
    lead, best, text = PRONOUNCED_LEAD, PRONOUNCED_BEST, PRONOUNCED
    asked = "my coworkers pronounce django differently at the office, which way is correct"
    heading = "How is Django pronounced, and who is right?"
    assert compose.heading_similarity(asked, [heading]) == [pytest.approx(0.4)]
    passage = FakePassage(text, heading_path=["FAQ: General", heading])
    reply = extractive_draft(query=asked, passages=[passage], embed=bag_of_words).text
    assert reply.startswith(f"“{lead}")
    assert best in reply


def test_a_footnote_mark_after_a_full_stop_leaves_the_passage_its_sentences():
    """A source's "…supported. [6]" once made the whole passage one unit: quoted from its
    start whatever was asked, and cut mid-sentence at MAX_WORDS."""
    text = (
        "Debian boots by running init. Traditional init is also supported. [6]\n\n"
        + " ".join(f"Targets replace runlevels in case {n}." for n in range(12))
        + "\n\nTo stop a service from starting at boot, run systemctl disable.\n\n"
        + " ".join(f"Unit files live in the system directory {n}." for n in range(12))
    )
    units = compose.passage_units(text)
    assert len(units) > 20
    assert all(text[u.start : u.end] == u.text for u in units)
    asked = "how do i stop a service from starting at boot"
    passage = FakePassage(text, heading_path=["FAQ", "Notes"])
    reply = extractive_draft(query=asked, passages=[passage], embed=bag_of_words).text
    assert reply.startswith("“To stop a service from starting at boot, run systemctl disable.")
    assert not reply.endswith("…” [1]")


def test_a_best_sentence_that_goes_on_from_the_one_before_is_quoted_with_it():
    """ "to return you to the branch…" finishes "Finally, run git bisect reset" (a command
    splits the sentence): the quote starts at the sentence it continues."""
    before = " ".join(f"Keep testing the commit it gives you, step {n}." for n in range(6))
    command = "Finally, run git bisect reset"
    rest = "to return you to the branch you were on before bisecting started."
    after = " ".join(f"The suggested version is only a hint, note {n}." for n in range(8))
    text = f"{before}\n\n{command}\n\n{rest} {after}"
    win = compose.compose("how do i return to the branch i was on before", text, embed=bag_of_words)
    assert win.quote.startswith(command)
    assert rest in win.quote


# --------------------------------------------------------------------------- long entries

# A long FAQ entry as extraction writes it: paragraphs and code blocks separated by blank
# lines, code lines kept one per line. The answer is the first sentence of the third
# paragraph; the sentence scoring best repeats the question's words further on.
STALE = (
    "The session acts as though each transaction were serializable, whatever the database "
    "isolation level is. In practice it does not change data it has already loaded within "
    "the scope of a transaction, which surprises people who watch another process commit.\n\n"
    "If the term isolation level is unfamiliar, read about it first: in short, once a "
    "transaction selects rows it keeps getting the same data back for them, and only a lower "
    "level such as read committed lets a changed value show.\n\n"
    "The usual fix is to call session.commit() and start a new transaction on next access. "
    "Applications that keep transactions short rarely notice anything, because every "
    "request starts with a fresh view of the data. After that the session reloads rows "
    "another process committed and shows the committed values.\n\n"
    "You can also tell the session to expire what it holds, or run a query with populate "
    "existing, which overwrites the objects it already loaded as it reads each row."
)


def test_a_long_entrys_fact_in_its_third_paragraph_is_quoted_from_that_paragraphs_start():
    win = compose.compose(
        "session doesnt show rows another process committed", STALE, embed=bag_of_words
    )
    assert "session.commit()" in win.quote
    assert win.quote.startswith("The usual fix is to call session.commit()")
    assert win.quote in compose.squash(STALE)


def test_a_paragraph_start_too_far_before_the_best_sentence_is_not_reached_for():
    before = " ".join(f"Background sentence number {n} says little of use here." for n in range(9))
    after = " ".join(f"Afterwards sentence {n} adds a detail nobody asked for." for n in range(8))
    text = f"{before} The pool recycles connections older than pool_recycle seconds. {after}"
    win = compose.compose("how old can pooled connections get", text, embed=bag_of_words)
    assert win.quote.startswith("The pool recycles connections")
    near = f"Background sentence number 8 says little of use here. {text[len(before) + 1 :]}"
    assert (
        compose.compose("how old can pooled connections get", near, embed=bag_of_words).quote[:20]
        == "Background sentence "
    )  # within reach, the paragraph's start leads


FOREIGN_KEY = (
    "The ORM does not load a relationship when its foreign key attribute changes. Set the "
    "relationship itself instead, and the foreign key follows:\n\n"
    "foo = session.get(Foo, 7)\n"
    "o.foo = foo\n"
    "session.commit()\n\n"
    "Setting the attribute directly is legal, but it does not expire the relationship:\n\n"
    "o.foo_id = 7\n"
    "assert o.foo is None  # o.foo_id = 7 is only pending\n\n"
    "After the commit every attribute is expired and the next access loads the new object."
)


def test_a_code_line_repeating_the_question_does_not_anchor_the_quote_over_the_prose():
    win = compose.compose("i set o.foo_id = 7 but o.foo is None", FOREIGN_KEY, embed=bag_of_words)
    assert not win.quote.startswith("o.foo_id = 7")
    assert not win.quote.startswith("assert o.foo is None")
    units = compose.passage_units(FOREIGN_KEY)
    assert not units[win.first].code


def test_a_code_line_scores_below_the_same_words_in_prose():
    query = "refresh the user name from the database"
    prose = "Reload first.\n\nsession.refresh(user) reloads the user name from the database."
    code = "Reload first:\n\nsession.refresh(user)\nreloads the user name from the database."
    prose_units, code_units = compose.passage_units(prose), compose.passage_units(code)
    assert [u.code for u in prose_units] == [False, False]
    assert [u.code for u in code_units] == [False, True, True]
    prose_score = compose.unit_scores(query, prose_units, embed=bag_of_words)[1]
    code_alone = compose.unit_scores(query, [code_units[2]], embed=bag_of_words)[0]
    plain = compose.unit_scores(
        query, [compose.Unit(code_units[2].text, 0, 1)], embed=bag_of_words
    )[0]
    assert code_alone == pytest.approx(plain - compose.CODE_PENALTY)
    assert code_alone <= plain - 0.1  # a code line anchors a quote only well ahead of prose
    assert prose_score > code_alone


def test_code_lines_are_recognised_by_their_block_and_prose_is_not():
    units = compose.passage_units(FOREIGN_KEY)
    code = [u.text for u in units if u.code]
    assert code == [
        "foo = session.get(Foo, 7)",
        "o.foo = foo",
        "session.commit()",
        "o.foo_id = 7",
        "assert o.foo is None  # o.foo_id = 7 is only pending",
    ]
    assert len({u.block for u in units if u.code}) == 2


def test_a_quote_does_not_stop_inside_a_code_block_or_on_a_sentence_announcing_one():
    win = compose.compose(
        "how do i set the relationship so the foreign key follows",
        FOREIGN_KEY,
        embed=bag_of_words,
        min_words=12,
        max_words=40,
    )
    assert "Set the relationship itself instead, and the foreign key follows:" in win.quote
    assert win.quote.endswith("follows:\nfoo = session.get(Foo, 7)\no.foo = foo\nsession.commit()")
    # without room for the whole block the quote stops before it instead of inside it
    tight = compose.compose(
        "how do i set the relationship so the foreign key follows",
        FOREIGN_KEY,
        embed=bag_of_words,
        min_words=12,
        max_words=24,
    )
    assert "o.foo = foo" not in tight.quote or tight.quote.endswith("session.commit()")


INDENTED = (
    "Pass a default that is built on every call instead of once, when the function is "
    "defined:\n\n"
    "def append_to(element, to=None):\n"
    "    if to is None:\n"
    "        to = []\n"
    "    to.append(element)\n"
    "    return to\n\n"
    "A new list is made each time the function is called without a list. The same goes "
    "for dicts and sets."
)


def test_a_quoted_code_block_keeps_its_lines_and_their_indentation():
    win = compose.compose(
        "how do i stop the default list being shared between calls",
        INDENTED,
        embed=bag_of_words,
        min_words=30,
        max_words=60,
    )
    assert (
        "when the function is defined:\n"
        "def append_to(element, to=None):\n"
        "    if to is None:\n"
        "        to = []\n"
        "    to.append(element)\n"
        "    return to\n"
        "A new list is made each time"
    ) in win.quote
    assert quote_is_verbatim(win.quote, INDENTED) == []


def test_the_card_lays_out_code_around_the_quote_as_the_quote_does():
    units = compose.passage_units(INDENTED)
    last = len(units) - 1  # "The same goes for dicts and sets."
    anchor_last = [0.0] * last + [1.0]
    win = compose.window(INDENTED, units, anchor_last, min_words=5, max_words=12)
    assert "def" not in win.quote
    card = compose.surrounding(INDENTED, win)
    assert "def append_to(element, to=None):\n    if to is None:\n        to = []" in card
    assert compose.squash(win.quote) in compose.squash(card)


def test_a_prose_quote_runs_its_paragraphs_on_one_line():
    units = compose.passage_units(DELETE)
    anchor_first = [1.0] + [0.0] * (len(units) - 1)
    win = compose.window(DELETE, units, anchor_first, min_words=200, max_words=300)
    assert (win.first, win.last) == (0, len(units) - 1)
    assert "\n" not in win.quote
    assert "to the Trash. If the app was installed by another program" in win.quote
    assert win.quote == compose.squash(DELETE[win.start : win.end])


STRAY_MARK = (
    "You can check the status of any service by the command\n\n"
    "service package status\n\n"
    ". To start or stop a service, run\n\n"
    "service package start\n\n"
    "and\n\n"
    "service package stop"
)


def test_a_quote_never_opens_on_a_stray_mark_left_by_a_code_block_inside_a_sentence():
    units = compose.passage_units(STRAY_MARK)
    assert any(u.text == "." for u in units)  # the rest of the interrupted sentence
    win = compose.compose(
        "how do i start or stop a service",
        STRAY_MARK,
        embed=bag_of_words,
        min_words=8,
        max_words=20,
    )
    assert win.quote.startswith("To start or stop a service, run")
    assert quote_is_verbatim(win.quote, STRAY_MARK) == []


LEAD_UP = (
    "Workers hold on to messages they have received but not yet acknowledged, and they "
    "keep them until the connection to the broker closes for whatever reason at all. "
    "Messages that are not acknowledged are delivered again to another worker once the "
    "connection of the worker that held them closes, so a task can run twice when a worker "
    "is killed while it runs one."
)


def test_a_quote_drops_its_lead_up_rather_than_end_in_the_middle_of_the_best_sentence():
    units = compose.passage_units(LEAD_UP)
    assert [u.block for u in units] == [0, 0]
    scores = [0.1, 0.9]  # the second sentence answers; the paragraph's first leads up to it
    win = compose.window(LEAD_UP, units, scores, min_words=25, max_words=60)
    assert win.quote.startswith("Messages that are not acknowledged")
    assert win.quote.endswith("while it runs one.")


RUNS_ON = (
    "The service is enabled when its package is installed. If you do not want it started at "
    "boot, you can run the command\n\n"
    "systemctl disable service.service\n\n"
    "using the name of the unit file. Nothing else changes on the system then."
)


def test_a_sentence_the_next_block_finishes_is_quoted_with_that_block():
    units = compose.passage_units(RUNS_ON)
    assert [u.block for u in units] == [0, 0, 1, 2, 2]
    scores = [0.2, 0.9, 0.1]  # "…you can run the command" answers best
    win = compose.window(RUNS_ON, units, scores, min_words=10, max_words=60)
    assert "run the command systemctl disable service.service using the name" in win.quote
    assert win.quote.endswith("of the unit file.")


def test_a_finished_sentence_or_a_code_line_does_not_pull_in_the_next_block():
    text = (
        "Run the installer now. It takes a minute.\n\n"
        "Restart afterwards to finish the upgrade of the system."
    )
    units = compose.passage_units(text)
    win = compose.window(text, units, [0.9, 0.1, 0.1], min_words=6, max_words=60)
    assert win.quote == "Run the installer now. It takes a minute."


def test_a_quote_never_ends_on_the_sentence_it_was_chosen_for_while_the_next_one_fits():
    """A second quote's 25 words can be the matching sentence alone; the answer follows it."""
    text = (
        "Say you modify a branch with git reset --hard, and then realize that the branch was "
        "the only reference you had to that point in history. Fortunately, Git also keeps a "
        "log, called a reflog, of all the previous values of each branch."
    )
    units = compose.passage_units(text)
    win = compose.window(text, units, [0.9, 0.4], min_words=20, max_words=60)
    assert win.quote.endswith("called a reflog, of all the previous values of each branch.")
    tight = compose.window(text, units, [0.9, 0.4], min_words=20, max_words=30)
    assert tight.quote.endswith("to that point in history.")  # the next one does not fit


def test_a_one_sentence_entry_is_quoted_whole_with_nothing_to_complete():
    text = "No, only single-column primary keys are supported."
    units = compose.passage_units(text)
    assert [(u.block, u.code) for u in units] == [(0, False)]
    win = compose.compose("composite primary key support", text, embed=bag_of_words)
    assert win.quote == text
    assert (win.first, win.last) == (0, 0)
    assert compose.surrounding(text, win) == ""


def _chunks_of(text: str, cut: int, *, overlap: int = 0) -> tuple[FakePassage, FakePassage]:
    """Two chunks of one long entry, as the chunker makes them (the second may overlap)."""
    heading = ["FAQ: Sessions", "My session does not see committed changes"]
    first = FakePassage(
        text[:cut], evidence=0.9, chunk_id=1, heading_path=heading, span=(1000, 1000 + cut)
    )
    start = cut - overlap
    second = FakePassage(
        text[start:],
        evidence=0.95,  # the later part matched the search better
        chunk_id=2,
        heading_path=heading,
        span=(1000 + start, 1000 + len(text)),
    )
    return first, second


def test_another_part_of_a_long_entry_is_quoted_second_in_the_entrys_order():
    cut = STALE.index("The usual fix")
    first, second = _chunks_of(STALE, cut)
    draft = extractive_draft(
        query="session doesnt show rows another process committed",
        passages=[second, first],  # the search found the later part first
        embed=bag_of_words,
    )
    assert [p.chunk_id for p in draft.passages] == [1, 2]
    assert "session.commit()" in draft.text
    quotes = re.findall(r"“(.+?)”\s*\[(\d)\]", draft.text, re.S)
    assert [n for _, n in quotes] == ["1", "2"]
    assert all(quote_is_verbatim(q, STALE) == [] for q, _ in quotes)


def test_overlapping_chunks_of_one_entry_never_quote_the_same_words_twice():
    cut = STALE.index("The usual fix")
    first, second = _chunks_of(STALE, cut + 120, overlap=240)
    draft = extractive_draft(
        query="session doesnt show rows another process committed",
        passages=[first, second],
        embed=bag_of_words,
    )
    quotes = re.findall(r"“(.+?)”", draft.text, re.S)
    sentences = [s for q in quotes for s in re.split(r"(?<=[.:])\s+", q)]
    assert len(sentences) == len(set(sentences))


def test_every_sentence_is_embedded_at_most_once_per_turn_across_overlapping_chunks():
    from chat.orchestrator.base import TurnEmbedder

    seen: list[str] = []

    def counting(texts: list[str]) -> list[np.ndarray]:
        seen.extend(texts)
        return bag_of_words(texts)

    cut = STALE.index("The usual fix")
    first, second = _chunks_of(STALE, cut + 120, overlap=240)
    embedder = TurnEmbedder(embed=counting, shared=None)
    query = "session doesnt show rows another process committed"
    extractive_draft(query=query, passages=[first, second], embed=embedder)
    assert seen
    assert len(seen) == len(set(seen))
    assert embedder.computed == len(seen)


def test_the_first_passages_are_embedded_in_one_model_call_and_the_rest_never():
    from chat.orchestrator.base import TurnEmbedder

    calls: list[list[str]] = []

    def counting(texts: list[str]) -> list[np.ndarray]:
        calls.append(list(texts))
        return bag_of_words(texts)

    stable = FakePassage(DELETE, evidence=0.9, chunk_id=1)
    other = FakePassage(
        STALE, evidence=0.85, chunk_id=2, document_id=2, heading_path=["FAQ", "Stale data"]
    )
    fillers = [
        FakePassage(
            f"Filler section {n} talks about shipping rates.",
            evidence=0.3 - 0.02 * n,
            chunk_id=10 + n,
            document_id=10 + n,
            heading_path=["FAQ", f"Shipping {n}"],
        )
        for n in range(extractive.RANKED_BY_SENTENCE - 2)
    ]
    far = FakePassage(
        FOREIGN_KEY, evidence=0.1, chunk_id=3, document_id=3, heading_path=["FAQ", "Keys"]
    )
    embedder = TurnEmbedder(embed=counting, shared=None)
    draft = extractive_draft(
        query="can I delete the app", passages=[stable, other, *fillers, far], embed=embedder
    )
    assert draft.passages[0] is stable
    assert len(calls) == 1  # the question, the headings and the first passages' sentences
    embedded = set(calls[0])
    assert {u.text for u in compose.passage_units(DELETE)} <= embedded
    assert {f.text for f in fillers} <= embedded  # ranked by their best sentence too
    assert not embedded & {u.text for u in compose.passage_units(FOREIGN_KEY)}  # ranked past


SERVERS = (
    'A "server" is any machine that communicates directly to a printer. A "client" is any '
    "machine that sends print jobs to a server for final printing.\n\n"
    "By default, CUPS uses the Internet Printing Protocol (IPP) to send jobs from a client to "
    "a server. When printing to legacy print servers you may also use the Line Printer Daemon "
    "(LPD) protocol when printing to older UNIX-based servers or Server Message Block (SMB) "
    "when printing to Windows servers. Clients can automatically discover shared printers."
)


@pytest.mark.parametrize(
    "question",
    [
        "in cups speak whats the difference between a server and a client",
        "what's a client?",
        "what does client mean here",
    ],
)
def test_a_question_asking_what_something_is_is_quoted_from_the_sentence_defining_it(question):
    win = compose.compose(question, SERVERS, embed=bag_of_words)
    assert win.quote.startswith('A "server" is any machine')


@pytest.mark.parametrize(
    ("question", "bonus"),
    [
        ("whats a client exactly?", True),
        ("what does client mean", True),
        ("which protocol does a client use to send jobs to a server", False),
        # "what's" that asks for no definition
        ("we print from a client to a server, what's likely to go wrong", False),
        ("what is the best way to send jobs from a client", False),
    ],
)
def test_only_a_question_asking_what_something_is_lifts_the_sentence_defining_it(
    question, bonus, monkeypatch
):
    units = compose.passage_units(SERVERS)
    scores = compose.unit_scores(question, units, embed=bag_of_words)
    monkeypatch.setattr(compose, "DEFINITION_BONUS", 0.0)
    plain = compose.unit_scores(question, units, embed=bag_of_words)
    lifted = [i for i, (a, b) in enumerate(zip(scores, plain, strict=True)) if a != b]
    # only 'A "client" is any machine…' (a sentence defining a word of the question)
    assert lifted == ([1] if bonus else [])
    assert units[1].text.startswith('A "client" is')


def test_a_passage_whose_sentence_says_what_was_asked_outranks_one_sharing_only_its_heading(
    monkeypatch,
):
    asked = "is there a read only mode so i can view a file without changing it"
    heading_only = FakePassage(
        "Jeez, demanding, aren't we? Okay, look here: the manual is online as well.",
        evidence=0.40,
        chunk_id=1,
        heading_path=["FAQ", "I want to read the manual without changing my install"],
    )
    answering = FakePassage(
        "-v, --view: Don't allow the contents of the file to be altered: read-only mode. "
        "-w, --nowrap: Do not hard-wrap long lines.",
        evidence=0.42,
        chunk_id=2,
        document_id=2,
        heading_path=["Manual", "Command-line Options"],
    )
    passages = [answering, heading_only]
    draft = extractive_draft(query=asked, passages=passages, embed=bag_of_words, max_quotes=1)
    assert draft.passages == [answering]
    assert "read-only mode" in draft.text
    monkeypatch.setattr(extractive, "SENTENCE_WEIGHT", 0.0)  # evidence and heading alone
    draft = extractive_draft(query=asked, passages=passages, embed=bag_of_words, max_quotes=1)
    assert draft.passages == [heading_only]


def test_only_the_first_passages_are_ranked_by_their_best_sentence(monkeypatch):
    monkeypatch.setattr(extractive, "RANKED_BY_SENTENCE", 1)
    asked = "is there a read only mode so i can view a file without changing it"
    first = FakePassage(
        "Okay, look here: the manual is online as well.",
        evidence=0.50,
        chunk_id=1,
        heading_path=["FAQ", "Manual"],
    )
    second = FakePassage(
        "-v, --view: Don't allow the contents of the file to be altered: read-only mode.",
        evidence=0.45,
        chunk_id=2,
        document_id=2,
        heading_path=["Manual", "Options"],
    )
    draft = extractive_draft(
        query=asked, passages=[first, second], embed=bag_of_words, max_quotes=1
    )
    assert draft.passages == [first]  # the second was never scored by its sentences


def words_384(texts: list[str]) -> list[np.ndarray]:
    """`bag_of_words` in the stored vectors' 384 dimensions."""
    return [np.pad(v, (0, EMBEDDING_DIMENSIONS - DIM)) for v in bag_of_words(texts)]


def stored(text: str, **fields) -> FakePassage:
    """A passage with its sentences' vectors stored, as indexing stores them."""
    blob = np.asarray(words_384(passage_sentences(text)), dtype=np.float16).tobytes()
    return FakePassage(text, sentence_vectors=blob, **fields)


def test_sentences_stored_when_the_passage_was_indexed_are_not_embedded_again():
    from chat.orchestrator.base import TurnEmbedder

    calls: list[str] = []

    def counting(texts: list[str]) -> list[np.ndarray]:
        calls.extend(texts)
        return words_384(texts)

    sentences = passage_sentences(DELETE)
    blob = np.asarray(words_384(sentences), dtype=np.float16).tobytes()
    asked = "can I delete the app that came with my laptop"
    stored = extractive_draft(
        query=asked,
        passages=[FakePassage(DELETE, sentence_vectors=blob)],
        embed=TurnEmbedder(counting, shared=None),
    )
    assert calls  # the question and the heading
    assert not set(calls) & set(sentences)
    fresh = extractive_draft(query=asked, passages=[FakePassage(DELETE)], embed=words_384)
    assert stored.text == fresh.text


def test_a_second_section_close_in_evidence_but_not_answering_is_left_out():
    asked = "when do refunds reach my card"
    answering = FakePassage(
        "Refunds reach your card within five business days of the return arriving.",
        evidence=0.80,
        chunk_id=1,
        heading_path=["FAQ", "Refund timing"],
    )
    topical = FakePassage(
        "Our stores are open from nine to five on weekdays and closed on public holidays.",
        evidence=0.62,  # 0.78 of the first's: close enough on evidence alone
        chunk_id=2,
        document_id=2,
        heading_path=["FAQ", "Opening hours"],
    )
    draft = extractive_draft(query=asked, passages=[answering, topical], embed=bag_of_words)
    assert draft.passages == [answering]


def _topical(n: int, *, evidence: float, store: bool) -> list[FakePassage]:
    """Passages on the question's topic whose sentences do not answer it."""
    make = stored if store else FakePassage
    return [
        make(
            f"Section {i} of the manual covers printing labels on a roll printer.",
            evidence=evidence,
            chunk_id=100 + i,
            document_id=100 + i,
            heading_path=["Manual", f"Labels {i}"],
        )
        for i in range(n)
    ]


ROTATE = "Set orientation-requested=6 to print the page upside down, turned 180 degrees."


@pytest.mark.parametrize("store", [True, False])
def test_a_passage_far_down_the_search_is_quoted_first_when_its_stored_sentence_answers(store):
    asked = "can the printer print the page upside down, turned 180 degrees"
    far = (stored if store else FakePassage)(
        ROTATE, evidence=0.45, chunk_id=7, document_id=7, heading_path=["Options", "Layout"]
    )
    draft = extractive_draft(
        query=asked,
        passages=[*_topical(11, evidence=0.5, store=store), far],
        embed=words_384,
        max_quotes=1,
    )
    if store:  # every passage with stored sentences is ranked by them
        assert draft.passages == [far]
    else:  # a turn embeds the sentences of the first few only: the 12th is never scored
        assert draft.passages != [far]


def test_headings_past_the_first_passages_are_embedded_only_for_a_quoted_passage():
    from chat.orchestrator.base import TurnEmbedder

    calls: list[list[str]] = []

    def counting(texts: list[str]) -> list[np.ndarray]:
        calls.append(list(texts))
        return words_384(texts)

    asked = "can the printer print the page upside down, turned 180 degrees"
    far = stored(
        ROTATE, evidence=0.45, chunk_id=7, document_id=7, heading_path=["Options", "Layout"]
    )
    passages = [*_topical(11, evidence=0.5, store=True), far]
    extractive_draft(
        query=asked, passages=passages, embed=TurnEmbedder(counting, shared=None), max_quotes=1
    )
    first_call = set(calls[0])
    assert {f"Labels {i}" for i in range(extractive.HEADINGS_EMBEDDED)} <= first_call
    assert not {f"Labels {i}" for i in range(extractive.HEADINGS_EMBEDDED, 11)} & first_call
    assert not any(f"Labels {i}" in c for c in calls[1:] for i in range(11))
