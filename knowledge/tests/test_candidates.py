import pytest

from knowledge.selectors import Audience, fulltext_candidates

from .factories import ChunkFactory, DocumentFactory


def _ids(ranked) -> list[int]:
    return [i for i, _ in ranked]


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
    assert _ids(ranked) == [heading.pk, body.pk]


@pytest.mark.parametrize(
    "query",
    [
        r"C:\temp\o'neil it's",
        "a & b | !c <-> d:* (e)",
        "'''' \\\\ ''",
        "keepassxc-cli --pw-stdin",
        "naïve café ™ 日本語",
        "the and of",  # stop words only: nothing to rank
    ],
)
def test_odd_questions_rank_without_errors(tenant, query):
    doc = DocumentFactory(tenant=tenant, title="Odd")
    ChunkFactory(document=doc, text=f"{query} appears here: keepassxc-cli open --pw-stdin.")
    ranked = fulltext_candidates(tenant=tenant, query=query, audience=Audience.customer())
    assert all(score > 0 for _, score in ranked)
