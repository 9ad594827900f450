import pytest

from knowledge.selectors import Audience, fulltext_candidates

from .factories import ChunkFactory, DocumentFactory


def test_a_word_in_the_heading_counts_more_than_once_in_the_body(tenant):
    body = ChunkFactory(
        document=DocumentFactory(tenant=tenant, title="Menus"),
        text="You can clone an entry from its menu.",
    )
    heading = ChunkFactory(
        document=DocumentFactory(tenant=tenant, title="Clone"),
        text="You can clone an entry from its menu.",
    )
    ranked = fulltext_candidates(tenant=tenant, query="clone entry", audience=Audience.customer())
    assert [i for i, _ in ranked] == [heading.pk, body.pk]


@pytest.mark.parametrize(
    ("query", "found"),
    [
        (r"C:\temp\o'neil it's", True),
        ("a & b | !c <-> d:* (e)", True),
        ("'''' \\\\ ''", False),  # no word at all
        ("keepassxc-cli --pw-stdin", True),
        ("naïve café ™ 日本語", True),
        ("the and of", False),  # stop words only: nothing to rank
    ],
)
def test_odd_questions_rank_without_errors(tenant, query, found):
    doc = DocumentFactory(tenant=tenant, title="Odd")
    chunk = ChunkFactory(document=doc, text=f"{query} appears here: keepassxc-cli open --pw-stdin.")
    ranked = fulltext_candidates(tenant=tenant, query=query, audience=Audience.customer())
    assert [i for i, _ in ranked] == ([chunk.pk] if found else [])
    assert all(score > 0 for _, score in ranked)
