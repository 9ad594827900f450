from dataclasses import dataclass

import pytest

from knowledge.selectors import Audience, search_passages
from knowledge.selectors.distinct import passages_distinct

from .factories import ChunkFactory, DocumentFactory

SECTION = (
    "To clone an entry, select it and choose Clone Entry from the Entries menu. The copy keeps "
    "the username and password of the original, and its title ends with a Clone suffix that "
    "you can edit. History is not copied unless you tick Include history."
)


@dataclass(frozen=True)
class _P:
    document_id: int
    span: tuple[int, int]
    text: str


def test_a_copy_of_a_better_passage_in_another_document_is_dropped_and_the_order_kept():
    first = _P(1, (0, 300), SECTION)
    other = _P(1, (900, 1200), "Press Ctrl+L to lock the database at once.")
    copy = _P(2, (40, 340), "Cloning. " + SECTION.replace("Entries menu", "Entries  menu"))
    last = _P(2, (2000, 2100), "Auto-Type types your username and password into a window.")
    assert passages_distinct([first, other, copy, last]) == [first, other, last]


def test_a_copy_cut_at_another_place_is_still_a_repeat():
    whole = _P(1, (0, 400), SECTION + " Cloned entries are independent of the original.")
    part = _P(2, (0, 200), SECTION.split(". The copy")[0] + ". The copy keeps the username.")
    assert passages_distinct([part, whole]) == [part]


def test_passages_that_share_one_sentence_both_stay():
    a = _P(1, (0, 300), SECTION)
    b = _P(
        2,
        (0, 300),
        "History is not copied unless you tick Include history. Attachments "
        "are copied with the entry, and so are custom attributes and their protection flag.",
    )
    assert passages_distinct([a, b]) == [a, b]


def test_overlapping_neighbours_of_one_document_are_not_repeats_of_each_other():
    a = _P(7, (0, 300), SECTION)
    b = _P(7, (250, 520), SECTION)  # the chunker's edge overlap: spans overlap
    far = _P(7, (5000, 5300), SECTION)  # the same section again further down the page
    assert passages_distinct([a, b, far]) == [a, b]


@pytest.mark.parametrize("texts", [["", ""], ["", "one two"], ["ok", "ok"], ["!!", "??"]])
def test_passages_too_short_to_compare_never_fail(texts):
    passages = [_P(i, (0, 10), text) for i, text in enumerate(texts)]
    kept = passages_distinct(passages)
    assert kept[0] == passages[0]
    assert len(kept) <= len(passages)


def test_a_search_returns_a_section_two_documents_share_once(tenant):
    guide = DocumentFactory(tenant=tenant, title="Getting Started Guide")
    manual = DocumentFactory(tenant=tenant, title="User Guide")
    ChunkFactory(document=guide, text="Cloning entries. " + SECTION)
    ChunkFactory(document=manual, text="Cloning entries. " + SECTION)
    backup = ChunkFactory(
        document=manual,
        text="Clone your database file to another disk for a backup copy of every entry.",
    )
    result = search_passages(
        tenant=tenant, query="how do I clone an entry", audience=Audience.customer(), limit=2
    )
    texts = [p.text for p in result.passages]
    assert len(texts) == 2
    assert texts.count("Cloning entries. " + SECTION) == 1
    assert backup.pk in [p.chunk_id for p in result.passages]


def test_a_search_whose_best_passages_are_all_copies_still_fills_its_places(tenant):
    for i in range(10):
        doc = DocumentFactory(tenant=tenant, title=f"Release {i} manual")
        ChunkFactory(document=doc, text="Cloning entries. " + SECTION)
    others = [
        ChunkFactory(document=DocumentFactory(tenant=tenant, title=title), text=text)
        for title, text in [
            ("Backups", "Clone your database file to another disk for a backup of every entry."),
            ("Templates", "A cloned entry can serve as a template for entries of one kind."),
            ("Sharing", "Entries cloned into a shared group are synchronised with the share."),
        ]
    ]
    result = search_passages(
        tenant=tenant, query="how do I clone an entry", audience=Audience.customer(), limit=4
    )
    texts = [p.text for p in result.passages]
    assert texts.count("Cloning entries. " + SECTION) == 1
    assert {c.pk for c in others} <= {p.chunk_id for p in result.passages}


def test_passages_that_replace_repeats_are_never_another_tenants(tenant, other_tenant):
    for i in range(10):
        doc = DocumentFactory(tenant=tenant, title=f"Release {i} manual")
        ChunkFactory(document=doc, text="Cloning entries. " + SECTION)
    theirs = [
        ChunkFactory(
            document=DocumentFactory(tenant=other_tenant, title=f"Clone tips {i}"),
            text=f"Clone an entry, tip {i}: the cloned entry keeps its password.",
        )
        for i in range(5)
    ]
    restricted = ChunkFactory(
        document=DocumentFactory(tenant=tenant, title="Clone desk notes", audience="agents"),
        text="Agents clone an entry for a customer from the console.",
    )
    result = search_passages(
        tenant=tenant, query="how do I clone an entry", audience=Audience.customer(), limit=8
    )
    ids = {p.chunk_id for p in result.passages}
    assert len(result.passages) == 1
    assert ids.isdisjoint({c.pk for c in theirs} | {restricted.pk})
