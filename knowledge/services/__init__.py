"""Writes of the knowledge app, one concern per module: document writes (`documents`),
indexing a version (`indexing`) and per-tenant vector indexes (`vector_index`)."""

from knowledge.services.documents import (
    INDEX_TASK,
    MAX_ATTEMPTS,
    audience_narrowest,
    document_delete,
    document_reextract,
    document_reindex,
    document_replace_file,
    document_update,
    document_upload,
    knowledge_revision_bump,
)
from knowledge.services.indexing import (
    document_index,
    documents_reextract_outdated,
    documents_sweep_stuck,
    terms_add,
)
from knowledge.services.sentences import chunks_sentence_vectors_fill
from knowledge.services.vector_index import (
    VECTOR_INDEX_TASK,
    tenant_vector_index_ensure,
    tenant_vector_indexes_sweep,
)

__all__ = [
    "chunks_sentence_vectors_fill",
    "INDEX_TASK",
    "MAX_ATTEMPTS",
    "VECTOR_INDEX_TASK",
    "audience_narrowest",
    "document_delete",
    "document_index",
    "document_reextract",
    "document_reindex",
    "document_replace_file",
    "document_update",
    "document_upload",
    "documents_reextract_outdated",
    "documents_sweep_stuck",
    "knowledge_revision_bump",
    "tenant_vector_index_ensure",
    "tenant_vector_indexes_sweep",
    "terms_add",
]
