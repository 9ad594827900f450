"""Reads of the knowledge app: hybrid passage search, citations, documents. Always per tenant.

Search runs three candidate lists inside SQL with the tenant and audience filters in each
WHERE clause (never applied afterwards): full text (`websearch_to_tsquery`, OR-ed terms,
`ts_rank_cd`), vector (cosine; exact scan over the tenant's rows when they are few, HNSW with
iterative scan when they are many) and trigram (codes and misspelled words). The lists are
fused with weighted Reciprocal Rank Fusion (k=60).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import Literal

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import QuerySet
from django.urls import reverse

from knowledge.embeddings import embed_query
from knowledge.models import Chunk, Document, DocumentVersion, TenantKnowledge
from supportbot.errors import NotFound
from supportbot.models import Tenant

logger = logging.getLogger(__name__)

RRF_K = 60
CANDIDATES = 30
MAX_QUERY_CHARS = 1000
# Evidence: cosine similarity mapped linearly from [LOW, HIGH] onto [0, 1], blended with the
# share of the query's words the passage contains. Calibrated on the demo evaluation set.
COSINE_LOW, COSINE_HIGH = 0.15, 0.60
EVIDENCE_COSINE_WEIGHT = 0.7
STRONG_EVIDENCE, WEAK_EVIDENCE = 0.55, 0.3
TRIGRAM_THRESHOLD = 0.5
TRIGRAM_TIMEOUT_MS = 60
# Weighted RRF: MiniLM is the strongest single list on paraphrased customer questions; the
# lexical lists add exact terms, codes and typos (weights chosen on the demo evaluation set,
# where equal weights reached recall@5 0.962 against vector-only 1.000).
LIST_WEIGHTS = {"fulltext": 0.7, "vector": 1.0, "trigram": 0.3}
_CODE_RE = re.compile(r"\b[A-Za-z]{0,6}-?\d[\w-]*\b")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]{4,}")

VectorPlan = Literal["auto", "exact", "hnsw"]


@dataclass(frozen=True)
class Audience:
    """Who is asking: a customer (with optional segments) or an agent (sees every document)."""

    kind: str = "customer"  # "customer" | "agent"
    segments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("customer", "agent"):
            raise ValueError(f"Unknown audience kind {self.kind!r}.")

    @classmethod
    def customer(cls, segments=()) -> Audience:
        return cls(kind="customer", segments=tuple(s.strip().lower() for s in segments if s))

    @classmethod
    def agent(cls) -> Audience:
        return cls(kind="agent")


@dataclass(frozen=True)
class Passage:
    chunk_id: int
    document_id: int
    document_version: int
    title: str
    heading_path: list[str]
    span: tuple[int, int]
    text: str
    score: float  # fused RRF score
    evidence: float  # 0..1 evidence strength of this passage for the query
    url: str  # public page of the source passage, "" when customers cannot read it


@dataclass(frozen=True)
class SearchResult:
    query: str
    passages: list[Passage]
    strength: str  # "strong" | "weak" | "none"
    timings_ms: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------- filters


def _filter_sql(*, tenant: Tenant, audience: Audience) -> tuple[str, list]:
    """The WHERE clause every candidate query shares: tenant, searchable, audience."""
    sql = "c.tenant_id = %s AND c.is_live"
    params: list = [tenant.pk]
    if audience.kind == "customer":
        if audience.segments:
            sql += (
                " AND (c.audience = 'public'"
                " OR (c.audience = 'segments' AND c.segments && %s::varchar[]))"
            )
            params.append(list(audience.segments))
        else:
            sql += " AND c.audience = 'public'"
    return sql, params


# --------------------------------------------------------------------------- candidate lists


def fulltext_candidates(
    *, tenant: Tenant, query: str, audience: Audience, limit: int = CANDIDATES
) -> list[tuple[int, float]]:
    """Chunk ids ranked by `ts_rank_cd` for any of the query's terms (phrases kept)."""
    where, params = _filter_sql(tenant=tenant, audience=audience)
    sql = f"""
        WITH q AS (
            SELECT replace(websearch_to_tsquery('english', %s)::text, ' & ', ' | ')::tsquery AS q
        )
        SELECT c.id, ts_rank_cd(c.search_vector, q.q) AS rank
        FROM knowledge_chunk c, q
        WHERE {where} AND c.search_vector @@ q.q
        ORDER BY rank DESC, c.id
        LIMIT %s
    """  # noqa: S608 - `where` is built from constants; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [query, *params, limit])
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def tenant_live_chunk_count(*, tenant: Tenant, cap: int) -> int:
    """Count the tenant's searchable chunks, stopping at `cap` (a bounded index-only scan)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM knowledge_chunk "
            "WHERE tenant_id = %s AND is_live LIMIT %s) t",
            [tenant.pk, cap],
        )
        return cursor.fetchone()[0]


def vector_candidates(
    *,
    tenant: Tenant,
    embedding: list[float],
    audience: Audience,
    limit: int = CANDIDATES,
    plan: VectorPlan = "auto",
) -> tuple[list[tuple[int, float]], str]:
    """Chunk ids by cosine distance, and the plan used ("exact" or "hnsw").

    The planner alone picks a slow filtered HNSW path for small tenants (see DESIGN.md), so
    the plan is chosen here: an exact distance sort over the tenant's rows (B-tree on tenant)
    when they are at most KNOWLEDGE_EXACT_SCAN_MAX_ROWS, else HNSW with iterative scan.
    """
    if plan == "auto":
        cap = settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS
        plan = "exact" if tenant_live_chunk_count(tenant=tenant, cap=cap + 1) <= cap else "hnsw"
    where, params = _filter_sql(tenant=tenant, audience=audience)
    vector = _vector_literal(embedding)
    with transaction.atomic(), connection.cursor() as cursor:
        if plan == "exact":
            # "+ 0" keeps the ORDER BY from matching the HNSW index: an exact sort.
            cursor.execute(
                f"SELECT c.id, c.embedding <=> %s::vector AS d FROM knowledge_chunk c "  # noqa: S608
                f"WHERE {where} ORDER BY (c.embedding <=> %s::vector) + 0, c.id LIMIT %s",
                [vector, *params, vector, limit],
            )
        else:
            cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(max(100, limit))])
            cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            cursor.execute(
                f"WITH nn AS MATERIALIZED ("  # noqa: S608
                f" SELECT c.id, c.embedding <=> %s::vector AS d FROM knowledge_chunk c"
                f" WHERE {where} ORDER BY c.embedding <=> %s::vector LIMIT %s"
                f") SELECT id, d FROM nn ORDER BY d, id",
                [vector, *params, vector, limit],
            )
        return [(row[0], float(row[1])) for row in cursor.fetchall()], plan


def _trigram_terms(*, tenant: Tenant, query: str) -> list[str]:
    """Query terms the tenant's full-text index cannot match: misspelled words and codes
    written differently (TR2210 for TR-2210). Trigram search covers exactly these; on a
    large tenant it can still be slow (common trigrams), so it runs under a time limit.
    """
    codes = [m.group() for m in _CODE_RE.finditer(query)]
    words = [w.lower() for w in _WORD_RE.findall(query) if w not in codes]
    candidates = list(dict.fromkeys([*codes, *words]))[:12]
    if not candidates:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, n) "
            "WHERE numnode(plainto_tsquery('english', w)) > 0 AND NOT EXISTS ("
            " SELECT 1 FROM knowledge_chunk c WHERE c.tenant_id = %s AND c.is_live"
            " AND c.search_vector @@ plainto_tsquery('english', w)) ORDER BY n",
            [candidates, tenant.pk],
        )
        return [row[0] for row in cursor.fetchall()][:6]


def trigram_candidates(
    *, tenant: Tenant, terms: list[str], audience: Audience, limit: int = CANDIDATES
) -> list[tuple[int, float]]:
    """Chunk ids containing words similar to `terms` (pg_trgm word similarity, GIN-indexed)."""
    if not terms:
        return []
    where, params = _filter_sql(tenant=tenant, audience=audience)
    matches = " OR ".join(["%s <%% c.text"] * len(terms))
    scores = " + ".join(["word_similarity(%s, c.text)"] * len(terms))
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('pg_trgm.word_similarity_threshold', %s, true),"
                " set_config('statement_timeout', %s, true)",
                [str(TRIGRAM_THRESHOLD), str(TRIGRAM_TIMEOUT_MS)],
            )
            cursor.execute(
                f"SELECT c.id, {scores} AS s FROM knowledge_chunk c "  # noqa: S608
                f"WHERE {where} AND ({matches}) ORDER BY s DESC, c.id LIMIT %s",
                [*terms, *params, *terms, limit],
            )
            return [(row[0], float(row[1])) for row in cursor.fetchall()]
    except OperationalError as exc:  # the auxiliary list gives up rather than stall a search
        if getattr(exc.__cause__, "sqlstate", None) != "57014":  # query_canceled
            raise
        logger.warning("trigram search for %s timed out after %s ms", terms, TRIGRAM_TIMEOUT_MS)
        return []


def _vector_literal(embedding: list[float]) -> str:
    """A pgvector text literal (raw cursors have no vector adapter registered)."""
    return "[" + ",".join(f"{x:.8g}" for x in embedding) + "]"


def rrf_fuse(
    ranked_lists: list[list[int]], *, weights: list[float] | None = None, k: int = RRF_K
) -> dict[int, float]:
    """Reciprocal Rank Fusion: sum of weight / (k + rank) over the lists an id appears in."""
    weights = weights or [1.0] * len(ranked_lists)
    scores: dict[int, float] = {}
    for ids, weight in zip(ranked_lists, weights, strict=True):
        for rank, chunk_id in enumerate(ids, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (k + rank)
    return scores


# --------------------------------------------------------------------------- search


def search_passages(
    *, tenant: Tenant, query: str, audience: Audience, limit: int = 8, mode: str = "hybrid"
) -> SearchResult:
    """Find the passages `audience` may see that best answer `query`.

    `mode` is "hybrid" (default), "fulltext" or "vector" (the single lists, for evaluation).
    Each passage carries an evidence strength; `strength` summarizes the best one so callers
    can refuse to answer from weak evidence.
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    query = (query or "").strip()[:MAX_QUERY_CHARS]
    if not query:
        return SearchResult(query=query, passages=[], strength="none", timings_ms={})

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        timings[name] = round((now - since) * 1000, 2)
        return now

    t = time.perf_counter()
    embedding = embed_query(query)
    t = lap("embed", t)
    lists: list[list[int]] = []
    weights: list[float] = []
    if mode in ("hybrid", "fulltext"):
        ranked = fulltext_candidates(tenant=tenant, query=query, audience=audience)
        lists.append([i for i, _ in ranked])
        weights.append(LIST_WEIGHTS["fulltext"])
        t = lap("fulltext", t)
    if mode in ("hybrid", "vector"):
        ranked, plan = vector_candidates(tenant=tenant, embedding=embedding, audience=audience)
        lists.append([i for i, _ in ranked])
        weights.append(LIST_WEIGHTS["vector"])
        t = lap(f"vector_{plan}", t)
    if mode == "hybrid":
        terms = _trigram_terms(tenant=tenant, query=query)
        ranked = trigram_candidates(tenant=tenant, terms=terms, audience=audience)
        lists.append([i for i, _ in ranked])
        weights.append(LIST_WEIGHTS["trigram"])
        t = lap("trigram", t)
    fused = rrf_fuse(lists, weights=weights)
    top = sorted(fused, key=lambda i: (-fused[i], i))[: max(1, limit)]
    passages = _passages_fetch(
        tenant=tenant, chunk_ids=top, audience=audience, query=query, embedding=embedding
    )
    passages = sorted(
        (replace(p, score=round(fused[p.chunk_id], 6)) for p in passages),
        key=lambda p: (-p.score, p.chunk_id),
    )
    lap("fetch", t)
    timings["total"] = round((time.perf_counter() - started) * 1000, 2)
    best = max((p.evidence for p in passages), default=0.0)
    strength = "strong" if best >= STRONG_EVIDENCE else "weak" if best >= WEAK_EVIDENCE else "none"
    return SearchResult(query=query, passages=passages, strength=strength, timings_ms=timings)


def _passages_fetch(
    *,
    tenant: Tenant,
    chunk_ids: list[int],
    audience: Audience | None,
    query: str = "",
    embedding: list[float] | None = None,
) -> list[Passage]:
    """Load passages by id (filters applied again); with a query, compute their evidence."""
    if not chunk_ids:
        return []
    if audience is None:
        where, params = "c.tenant_id = %s", [tenant.pk]
    else:
        where, params = _filter_sql(tenant=tenant, audience=audience)
    evidence_sql = "0.0, 0.0"
    evidence_params: list = []
    if embedding is not None:
        evidence_sql = (
            "1 - (c.embedding <=> %s::vector),"
            " (SELECT count(*) FILTER ("
            "   WHERE c.search_vector @@ to_tsquery('english', quote_literal(w))"
            " )::float / greatest(count(*), 1)"
            " FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS w)"
        )
        evidence_params = [_vector_literal(embedding), query]
    sql = f"""
        SELECT c.id, c.document_id, c.version, d.title, c.heading_path, c.span_start,
               c.span_end, c.text, c.audience, {evidence_sql}
        FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id
        WHERE c.id = ANY(%s) AND {where}
    """  # noqa: S608 - fragments are constants; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [*evidence_params, list(chunk_ids), *params])
        rows = cursor.fetchall()
    passages = []
    for cid, doc_id, version, title, path, start, end, text, aud, cosine, coverage in rows:
        evidence = 0.0
        if embedding is not None:
            scaled = (float(cosine) - COSINE_LOW) / (COSINE_HIGH - COSINE_LOW)
            scaled = min(1.0, max(0.0, scaled))
            w = EVIDENCE_COSINE_WEIGHT
            evidence = round(min(1.0, w * scaled + (1 - w) * float(coverage)), 4)
        url = ""
        if aud == Document.Audience.PUBLIC:
            page = reverse("knowledge-page-version", args=[tenant.slug, doc_id, version])
            url = f"{page}#chunk-{cid}"
        passages.append(
            Passage(
                chunk_id=cid,
                document_id=doc_id,
                document_version=version,
                title=title,
                heading_path=list(path),
                span=(start, end),
                text=text,
                score=0.0,
                evidence=evidence,
                url=url,
            )
        )
    return passages


def chunk_get_many(*, tenant: Tenant, chunk_ids: list[int]) -> list[Passage]:
    """Passages by chunk id, in the given order, for re-checking citations.

    Chunks of superseded versions are returned too (answers keep citing the version they
    used); ids of other tenants or deleted documents are left out. Score and evidence are 0.
    """
    by_id = {
        p.chunk_id: p for p in _passages_fetch(tenant=tenant, chunk_ids=chunk_ids, audience=None)
    }
    return [by_id[i] for i in chunk_ids if i in by_id]


def knowledge_version(*, tenant: Tenant) -> str:
    """A token that changes whenever any of the tenant's documents changes."""
    revision = (
        TenantKnowledge.objects.filter(tenant=tenant).values_list("revision", flat=True).first()
    )
    return f"r{revision or 0}"


# --------------------------------------------------------------------------- documents


def document_list(*, tenant: Tenant) -> QuerySet[Document]:
    return Document.objects.filter(tenant=tenant).order_by("-created_at", "-id")


def document_get(*, tenant: Tenant, document_id: int) -> Document:
    document = Document.objects.filter(tenant=tenant, pk=document_id).first()
    if document is None:
        raise NotFound("No such knowledge document.")
    return document


def document_find_by_title(*, tenant: Tenant, title: str) -> Document | None:
    return Document.objects.filter(tenant=tenant, title=title).order_by("id").first()


def document_version_get(*, tenant: Tenant, document_id: int, version: int) -> DocumentVersion:
    found = DocumentVersion.objects.filter(
        tenant=tenant, document_id=document_id, version=version
    ).first()
    if found is None:
        raise NotFound("No such document version.")
    return found


@dataclass(frozen=True)
class PublicPage:
    tenant: Tenant
    document: Document
    version: int
    chunks: list[Chunk]


def document_public_page(
    *, tenant_slug: str, document_id: int, version: int | None = None
) -> PublicPage:
    """A ready document version that every customer may read (see `document_page_get`)."""
    return document_page_get(
        tenant_slug=tenant_slug,
        document_id=document_id,
        version=version,
        audience=Audience.customer(),
    )


def version_visible_to(*, audience: Audience, version: DocumentVersion) -> bool:
    """Whether `audience` may read this version (its own audience, not the document's)."""
    if audience.kind == "agent" or version.audience == Document.Audience.PUBLIC:
        return True
    return version.audience == Document.Audience.SEGMENTS and bool(
        set(version.segments) & set(audience.segments)
    )


def document_page_get(
    *, tenant_slug: str, document_id: int, version: int | None = None, audience: Audience
) -> PublicPage:
    """A ready version's chunks (the live one when `version` is None) for a reader allowed
    to see that version; anything else is the same NotFound, so nothing is revealed."""
    not_found = NotFound("No such document.")
    tenant = Tenant.objects.filter(slug=tenant_slug, is_active=True).first()
    document = Document.objects.filter(tenant=tenant, pk=document_id).first() if tenant else None
    if document is None or document.live_version is None:
        raise not_found
    version = document.live_version if version is None else version
    source = DocumentVersion.objects.filter(
        tenant=tenant, document=document, version=version
    ).first()
    if source is None or not version_visible_to(audience=audience, version=source):
        raise not_found
    chunks = list(Chunk.objects.filter(tenant=tenant, document=document, version=version))
    if not chunks:
        raise not_found
    return PublicPage(tenant=tenant, document=document, version=version, chunks=chunks)
