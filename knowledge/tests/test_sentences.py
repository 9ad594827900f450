"""Sentence vectors stored at indexing: what is stored, how it is read, and the fill of
passages indexed without them (twice, at once, with the embedder down)."""

import threading
from unittest import mock

import numpy as np
import pytest
from django.db import connection

from knowledge import services
from knowledge.embeddings import embed_texts
from knowledge.models import Chunk
from knowledge.selectors import Audience, search_passages
from knowledge.sentences import (
    passage_sentences,
    sentence_vectors_embed,
    sentence_vectors_read,
)

from .conftest import upload_and_index
from .factories import ChunkFactory, DocumentFactory

GUIDE = (
    b"# Returns\n\nYou can return most items within 30 days of delivery. Refunds reach your "
    b"card within five business days. Gift cards cannot be returned.\n\n"
    b"# Shipping\n\nOrders ship within one business day. Express delivery costs $12."
)


def test_indexing_stores_one_vector_per_sentence_of_each_passage(tenant):
    document = upload_and_index(tenant, "guide.md", GUIDE)
    chunks = list(Chunk.objects.filter(document=document, is_live=True))
    assert chunks
    for chunk in chunks:
        stored = sentence_vectors_read(chunk.text, chunk.sentence_vectors)
        sentences = passage_sentences(chunk.text)
        assert list(stored) == sentences
        fresh = embed_texts(sentences)
        for sentence, vector in zip(sentences, fresh, strict=True):
            assert np.allclose(stored[sentence], vector, atol=2e-3)  # float16


def test_vectors_that_do_not_fit_the_passages_sentences_are_not_read():
    text = "Refunds reach your card within five days. Gift cards cannot be returned."
    (blob,) = sentence_vectors_embed([text])
    assert len(sentence_vectors_read(text, blob)) == 2
    assert sentence_vectors_read(text + " Express delivery costs $12.", blob) == {}
    assert sentence_vectors_read(text, b"") == {}
    assert sentence_vectors_read(text, blob[:-3]) == {}  # a torn blob
    assert sentence_vectors_read(text, None) == {}


def test_a_search_reads_the_vectors_only_when_asked(tenant):
    upload_and_index(tenant, "guide.md", GUIDE)
    query = "how long do i have to return something"
    plain = search_passages(tenant=tenant, query=query, audience=Audience.customer())
    assert plain.passages
    assert all(p.sentence_vectors == b"" for p in plain.passages)
    read = search_passages(
        tenant=tenant, query=query, audience=Audience.customer(), sentence_vectors=True
    )
    assert [p.chunk_id for p in read.passages] == [p.chunk_id for p in plain.passages]
    assert all(sentence_vectors_read(p.text, p.sentence_vectors) for p in read.passages)


def _unfilled(tenant, n: int) -> list[Chunk]:
    document = DocumentFactory(tenant=tenant)
    return [
        ChunkFactory(
            document=document,
            ordinal=i,
            text=f"Passage {i} says parcels ship on weekday {i}. It has two sentences.",
        )
        for i in range(n)
    ]


def test_the_fill_stores_vectors_of_passages_indexed_without_them_once(tenant, other_tenant):
    mine, theirs = _unfilled(tenant, 3), _unfilled(other_tenant, 2)
    assert services.chunks_sentence_vectors_fill(tenant_id=tenant.pk) == 3
    for chunk in mine:
        chunk.refresh_from_db()
        assert len(sentence_vectors_read(chunk.text, chunk.sentence_vectors)) == 2
    assert all(not Chunk.objects.get(pk=c.pk).sentence_vectors for c in theirs)
    assert services.chunks_sentence_vectors_fill(tenant_id=tenant.pk) == 0  # nothing left
    assert services.chunks_sentence_vectors_fill(limit=1) == 1  # bounded per run
    assert services.chunks_sentence_vectors_fill() == 1


@pytest.mark.django_db(transaction=True)
def test_two_fills_at_once_store_each_passage_once(tenant):
    chunks = _unfilled(tenant, 40)
    counts: list[int] = []
    errors: list[BaseException] = []

    def fill() -> None:
        try:
            counts.append(services.chunks_sentence_vectors_fill(tenant_id=tenant.pk))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=fill) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert sum(counts) == len(chunks)  # every passage written by exactly one of them
    assert not Chunk.objects.filter(tenant=tenant, sentence_vectors=b"").exists()


def test_a_fill_with_the_embedder_down_stores_nothing_and_the_next_one_does(tenant):
    chunks = _unfilled(tenant, 3)
    down = mock.patch("knowledge.sentences.embed_texts", side_effect=RuntimeError("down"))
    with down, pytest.raises(RuntimeError):
        services.chunks_sentence_vectors_fill(tenant_id=tenant.pk)
    assert Chunk.objects.filter(pk__in=[c.pk for c in chunks], sentence_vectors=b"").count() == 3
    assert services.chunks_sentence_vectors_fill(tenant_id=tenant.pk) == 3
