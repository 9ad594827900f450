"""django-q2 tasks of the knowledge app: take ids, call a service, safe to run twice."""

from __future__ import annotations

from knowledge import services


def document_index_task(document_id: int, version: int) -> str:
    """Index one document version; return the document's resulting status."""
    document = services.document_index(document_id=document_id, version=version)
    return document.status if document is not None else "deleted"


def documents_sweep_task() -> list[int]:
    """Re-enqueue documents a dead worker left half-indexed (scheduled every few minutes)."""
    return services.documents_sweep_stuck()


def tenant_vector_index_task(tenant_id: int) -> str:
    """Build (or drop) a tenant's own HNSW index when it crosses the exact-scan threshold."""
    return services.tenant_vector_index_ensure(tenant_id=tenant_id)


def tenant_vector_indexes_sweep_task() -> list[int]:
    """Retry own-index builds that were lost or failed (scheduled every ten minutes)."""
    return services.tenant_vector_indexes_sweep()


def documents_reextract_outdated_task() -> list[int]:
    """Re-index documents an older extractor made (scheduled daily; safe to run twice)."""
    return services.documents_reextract_outdated()


def chunks_sentence_vectors_fill_task() -> int:
    """Store sentence vectors of passages indexed without them (scheduled hourly)."""
    return services.chunks_sentence_vectors_fill()
