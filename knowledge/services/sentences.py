"""Sentence vectors for passages indexed before they were stored (`knowledge.sentences`)."""

from __future__ import annotations

from django.db import transaction

from knowledge.embeddings import BATCH_SIZE
from knowledge.models import Chunk
from knowledge.sentences import sentence_vectors_embed


def chunks_sentence_vectors_fill(*, limit: int = 2000, tenant_id: int | None = None) -> int:
    """Embed and store the sentence vectors of up to `limit` live passages (of one tenant, or
    all) that have none; return how many were stored. Safe to run twice or at once: a
    passage's vectors are written only while it still has none. Scheduled hourly, and
    `manage.py reindex_outdated` runs it (after an upgrade)."""
    stored = 0
    after = 0
    while stored < limit:
        rows = Chunk.objects.filter(is_live=True, sentence_vectors=b"", id__gt=after)
        if tenant_id is not None:
            rows = rows.filter(tenant_id=tenant_id)
        batch = list(rows.order_by("id").values_list("id", "text")[: min(BATCH_SIZE, limit)])
        if not batch:
            break
        after = batch[-1][0]
        blobs = sentence_vectors_embed([text for _, text in batch])
        with transaction.atomic():
            for (chunk_id, _), blob in zip(batch, blobs, strict=True):
                if blob:
                    stored += Chunk.objects.filter(id=chunk_id, sentence_vectors=b"").update(
                        sentence_vectors=blob
                    )
    return stored
