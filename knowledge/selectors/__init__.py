"""Reads of the knowledge app, always per tenant, one concern per module: who may read what
(`filters`), the candidate lists of a hybrid search (`candidates`), the search itself and
citations (`search`), documents and their public pages (`documents`), the words no document
mentions (`terms`)."""

from knowledge.selectors.candidates import (
    FULLTEXT_RANK_POOL,
    HNSW_EF_SEARCH,
    fulltext_candidates,
    rrf_fuse,
    tenant_live_chunk_count,
    tenant_vector_index_name,
    tenant_vector_state,
    trigram_candidates,
    trigram_words,
    vector_candidates,
    vector_literal,
    vector_plan_choose,
    vector_plan_forget,
)
from knowledge.selectors.documents import (
    PublicPage,
    document_find_by_title,
    document_get,
    document_list,
    document_page_get,
    document_public_page,
    document_version_get,
    version_visible_to,
)
from knowledge.selectors.filters import Audience, filter_sql
from knowledge.selectors.search import (
    MAX_QUERY_CHARS,
    Passage,
    SearchResult,
    chunk_get_many,
    evidence_strength,
    knowledge_version,
    search_passages,
)
from knowledge.selectors.terms import terms_unknown

__all__ = [
    "FULLTEXT_RANK_POOL",
    "HNSW_EF_SEARCH",
    "MAX_QUERY_CHARS",
    "Audience",
    "Passage",
    "PublicPage",
    "SearchResult",
    "chunk_get_many",
    "document_find_by_title",
    "document_get",
    "document_list",
    "document_page_get",
    "document_public_page",
    "document_version_get",
    "evidence_strength",
    "filter_sql",
    "fulltext_candidates",
    "knowledge_version",
    "rrf_fuse",
    "search_passages",
    "tenant_live_chunk_count",
    "tenant_vector_index_name",
    "tenant_vector_state",
    "terms_unknown",
    "trigram_candidates",
    "trigram_words",
    "vector_candidates",
    "vector_literal",
    "vector_plan_choose",
    "vector_plan_forget",
    "version_visible_to",
]
