"""Reads of the knowledge app: hybrid passage search, citations, documents. Always per tenant.

Search runs three candidate lists inside SQL with the tenant and audience filters in each
WHERE clause (never applied afterwards), as one statement: full text (`websearch_to_tsquery`,
all-terms matches first, then OR-ed terms, `ts_rank_cd` over a bounded pool), vector (cosine;
exact scan over the tenant's rows when they are few, HNSW with iterative scan when they are
many, through the tenant's own partial index once it is built) and trigram (misspelled words
and codes, looked up in the tenant's vocabulary). The lists are fused with weighted Reciprocal
Rank Fusion (k=60).
"""

from __future__ import annotations

import re
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Literal

from django.conf import settings
from django.db import connections, transaction
from django.db.models import QuerySet
from django.urls import reverse

from knowledge.embeddings import embed_query
from knowledge.models import Chunk, Document, DocumentVersion, TenantKnowledge
from supportbot import replicas
from supportbot.errors import NotFound
from supportbot.models import Tenant

RRF_K = 60
CANDIDATES = 30
MAX_QUERY_CHARS = 1000
# Evidence: cosine similarity mapped linearly from [LOW, HIGH] onto [0, 1], blended with the
# share of the query's words the passage contains. Calibrated on the demo evaluation set.
COSINE_LOW, COSINE_HIGH = 0.15, 0.60
EVIDENCE_COSINE_WEIGHT = 0.7
STRONG_EVIDENCE, WEAK_EVIDENCE = 0.55, 0.3
TRIGRAM_THRESHOLD = 0.5  # pg_trgm word similarity of a query word to a vocabulary word
TRIGRAM_MAX_CANDIDATES = 12  # query words checked against full text
TRIGRAM_MAX_WORDS = 6  # of those, words full text cannot match that are looked up
TRIGRAM_TERMS_PER_WORD = 3
# Full text ranks at most this many matches (all terms, then headings first); _fulltext_sql.
FULLTEXT_RANK_POOL = 500
# HNSW candidate list: recall@20 vs exact on the 50,000-chunk bench tenant with its own
# partial index was 0.71 at 40, 0.86 at 100, 0.93 at 200, 0.98 at 400 (p95 ~4 ms; strict and
# relaxed order alike).
HNSW_EF_SEARCH = 400
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
    """The WHERE clause every candidate query shares: tenant, searchable, audience.

    The tenant id is compared as bigint so that it can be part of an index condition of the
    per-tenant full-text index (btree_gin) and match a tenant's partial HNSW index.
    """
    sql = "c.tenant_id = %s::bigint AND c.is_live"
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
#
# Each list is one CTE; a search runs the lists it needs as a single statement (one round
# trip, one SET LOCAL before it when HNSW or trigram settings are needed).


@dataclass(frozen=True)
class _ListSql:
    name: str  # "fulltext" | "vector" | "trigram"
    ctes: str  # "name AS (...)" fragments ending with the CTE called `name`
    params: list
    ascending: bool = False  # vector scores are distances


def _fulltext_sql(*, where: str, params: list, query: str, limit: int) -> _ListSql:
    """Rows matching all query terms first, then rows with a term in their title or headings
    (`context`, weight A, which `ts_rank_cd` counts 2.5 times a body match; its own GIN
    index), then rows matching any; at most FULLTEXT_RANK_POOL of them are ranked by
    `ts_rank_cd` (all terms, phrases kept).

    On a large tenant an OR of common words matches half its rows, and ranking them all cost
    ~150 ms (bench); the pool bounds that work. Below the pool size every match is ranked.
    """
    pool = FULLTEXT_RANK_POOL
    ctes = f"""
        ft_q AS (
            SELECT websearch_to_tsquery('english', %s) AS qa,
                   replace(websearch_to_tsquery('english', %s)::text, ' & ', ' | ')::tsquery AS qo
        ),
        ft_pool AS (
            (SELECT c.id, c.search_vector FROM knowledge_chunk c, ft_q
             WHERE {where} AND c.search_vector @@ ft_q.qa LIMIT {pool})
            UNION ALL
            (SELECT c.id, c.search_vector FROM knowledge_chunk c, ft_q
             WHERE {where} AND to_tsvector('english', c.context) @@ ft_q.qo
             AND NOT c.search_vector @@ ft_q.qa LIMIT {pool})
            UNION ALL
            (SELECT c.id, c.search_vector FROM knowledge_chunk c, ft_q
             WHERE {where} AND c.search_vector @@ ft_q.qo AND NOT c.search_vector @@ ft_q.qa
             AND NOT to_tsvector('english', c.context) @@ ft_q.qo LIMIT {pool})
            LIMIT {pool}
        ),
        fulltext AS (
            SELECT p.id, ts_rank_cd(p.search_vector, ft_q.qo) AS score FROM ft_pool p, ft_q
            ORDER BY score DESC, p.id LIMIT {int(limit)}
        )"""  # noqa: S608 - `where` is built from constants; values are parameters
    return _ListSql("fulltext", ctes, [query, query, *params, *params, *params])


def _vector_sql(*, where: str, params: list, embedding: list[float], limit: int, plan: str):
    """Cosine neighbours: an exact sort over the tenant's rows, or an HNSW scan.

    With plan "hnsw" the planner takes the tenant's own partial index when it exists (the
    tenant id in `where` proves its predicate), else the shared index; either way iterative
    scan keeps filling the list when the audience filter drops rows.
    """
    vector = _vector_literal(embedding)
    if plan == "exact":
        # Sorting outside the subquery (OFFSET 0 keeps it from being pulled up) keeps the
        # ORDER BY from matching the HNSW index, and computes each distance once.
        ctes = f"""
        vector AS (
            SELECT s.id, s.score FROM (
                SELECT c.id, c.embedding <=> %s::vector AS score FROM knowledge_chunk c
                WHERE {where} OFFSET 0
            ) s ORDER BY s.score, s.id LIMIT {int(limit)}
        )"""  # noqa: S608
        return _ListSql("vector", ctes, [vector, *params], ascending=True)
    ctes = f"""
        vector AS MATERIALIZED (
            SELECT c.id, c.embedding <=> %s::vector AS score FROM knowledge_chunk c
            WHERE {where} ORDER BY c.embedding <=> %s::vector LIMIT {int(limit)}
        )"""  # noqa: S608
    return _ListSql("vector", ctes, [vector, *params, vector], ascending=True)


def _trigram_sql(*, tenant: Tenant, where: str, params: list, words: list[str], limit: int):
    """Chunks containing a word of the tenant's vocabulary similar to a query word that full
    text cannot match (a misspelling, a code written differently: TR2210 for TR-2210).

    Trigram similarity runs against the vocabulary (`knowledge_term`, thousands of short
    words, GIN-indexed per tenant), never against chunk text: matching `word <% text` over
    every chunk cost 0.4 s on a 2,000-chunk tenant and seconds on 50,000 (bench). The chunks
    are then found through the full-text index; score = sum over query words of the best
    similarity of a vocabulary word the chunk contains.
    """
    pool = FULLTEXT_RANK_POOL
    words = words[:TRIGRAM_MAX_CANDIDATES]
    # One lookup per word with the word as a constant: the planner then estimates the trigram
    # match from the column statistics and takes the GIN index (a lateral join with the word
    # as a parameter scanned the tenant's whole vocabulary: 3.6 ms a word at 2,800 words).
    # Each lookup only runs when full text cannot match the word (the one-time filter).
    lookup = (
        "(SELECT %s::text AS word, k.word AS term, word_similarity(%s, k.word) AS sim"
        " FROM knowledge_term k WHERE k.tenant_id = %s::bigint AND %s <%% k.word"
        " AND EXISTS (SELECT 1 FROM tg_words w WHERE w.word = %s)"
        " ORDER BY sim DESC, k.word LIMIT %s)"
    )
    near = " UNION ALL ".join([lookup] * len(words))
    per_word = TRIGRAM_TERMS_PER_WORD
    near_params = [p for w in words for p in (w, w, tenant.pk, w, w, per_word)]
    ctes = f"""
        tg_words AS (
            SELECT t.w AS word FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, n)
            WHERE numnode(plainto_tsquery('english', t.w)) > 0 AND NOT EXISTS (
                SELECT 1 FROM knowledge_chunk c WHERE c.tenant_id = %s::bigint AND c.is_live
                AND c.search_vector @@ plainto_tsquery('english', t.w))
            ORDER BY t.n LIMIT {TRIGRAM_MAX_WORDS}
        ),
        tg_near AS ({near}),
        tg_fix AS (
            SELECT n.word, n.sim, plainto_tsquery('english', n.term) AS tq FROM tg_near n
            WHERE numnode(plainto_tsquery('english', n.term)) > 0
        ),
        tg_pool AS (
            SELECT c.id, c.search_vector FROM knowledge_chunk c
            WHERE {where} AND c.search_vector @@ (
                SELECT string_agg('(' || f.tq::text || ')', ' | ')::tsquery FROM tg_fix f)
            LIMIT {pool}
        ),
        trigram AS (
            SELECT p.id, (
                SELECT sum(b.best) FROM (
                    SELECT max(f.sim) AS best FROM tg_fix f WHERE p.search_vector @@ f.tq
                    GROUP BY f.word) b
            ) AS score
            FROM tg_pool p ORDER BY score DESC, p.id LIMIT {int(limit)}
        )"""  # noqa: S608
    return _ListSql("trigram", ctes, [words, tenant.pk, *near_params, *params])


def _lists_run(lists: list[_ListSql], *, settings_local: dict[str, str]) -> dict:
    """Run the candidate lists as one statement; return {name: [(chunk_id, score), ...]}.

    `settings_local` are set with SET LOCAL semantics (one statement, in the same
    transaction), so they never leak into other queries on a pooled connection.
    """
    ctes = ",".join(item.ctes for item in lists)
    selects = " UNION ALL ".join(
        f"SELECT '{item.name}' AS list, id, score FROM {item.name}"  # noqa: S608
        for item in lists
    )
    sql = f"WITH {ctes} {selects}"  # noqa: S608 - fragments are constants
    params = [p for item in lists for p in item.params]
    out: dict[str, list[tuple[int, float]]] = {item.name: [] for item in lists}
    # A transaction only when there is something to SET LOCAL (it costs a round trip).
    alias = replicas.read_alias()
    scope = transaction.atomic(using=alias) if settings_local else nullcontext()
    with scope, connections[alias].cursor() as cursor:
        if settings_local:
            calls = ", ".join("set_config(%s, %s, true)" for _ in settings_local)
            cursor.execute(
                f"SELECT {calls}",  # noqa: S608
                [v for pair in settings_local.items() for v in pair],
            )
        cursor.execute(sql, params)
        for name, chunk_id, score in cursor.fetchall():
            out[name].append((chunk_id, float(score or 0.0)))
    for item in lists:
        sign = 1 if item.ascending else -1
        out[item.name].sort(key=lambda row, s=sign: (s * row[1], row[0]))
    return out


def _settings_for(lists: list[_ListSql], plan: str | None) -> dict[str, str]:
    gucs: dict[str, str] = {}
    if plan == "hnsw" and any(item.name == "vector" for item in lists):
        gucs["hnsw.ef_search"] = str(HNSW_EF_SEARCH)
        gucs["hnsw.iterative_scan"] = "relaxed_order"
    if any(item.name == "trigram" for item in lists):
        gucs["pg_trgm.word_similarity_threshold"] = str(TRIGRAM_THRESHOLD)
    return gucs


def fulltext_candidates(
    *, tenant: Tenant, query: str, audience: Audience, limit: int = CANDIDATES
) -> list[tuple[int, float]]:
    """Chunk ids ranked by `ts_rank_cd` for any of the query's terms (phrases kept)."""
    where, params = _filter_sql(tenant=tenant, audience=audience)
    item = _fulltext_sql(where=where, params=params, query=query, limit=limit)
    return _lists_run([item], settings_local={})["fulltext"]


def tenant_vector_index_name(*, tenant_id: int) -> str:
    """The name of a large tenant's partial HNSW index (see services.tenant_vector_index_ensure)."""
    return f"knowledge_chunk_hnsw_t{int(tenant_id)}"


def tenant_vector_state(*, tenant_id: int, cap: int) -> tuple[int, str | None]:
    """The tenant's live chunk count (counting stops at `cap`) and the state of its partial
    HNSW index: "valid", "invalid" (a build failed or is running) or None (no index)."""
    with connections[replicas.read_alias()].cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM knowledge_chunk"
            "        WHERE tenant_id = %s::bigint AND is_live LIMIT %s) t),"
            " (SELECT CASE WHEN i.indisvalid AND i.indisready THEN 'valid' ELSE 'invalid' END"
            "  FROM pg_index i WHERE i.indexrelid = to_regclass(%s))",
            [tenant_id, cap, tenant_vector_index_name(tenant_id=tenant_id)],
        )
        count, state = cursor.fetchone()
    return count, state


def tenant_live_chunk_count(*, tenant: Tenant, cap: int) -> int:
    """Count the tenant's searchable chunks, stopping at `cap` (a bounded index-only scan)."""
    return tenant_vector_state(tenant_id=tenant.pk, cap=cap)[0]


def vector_plan_choose(*, tenant: Tenant) -> str:
    """Choose "exact" for a tenant with at most KNOWLEDGE_EXACT_SCAN_MAX_ROWS live chunks, else
    "hnsw".

    The planner alone picks a slow filtered HNSW path for small tenants (see DESIGN.md); an
    exact sort over a few thousand rows (B-tree on tenant) is fast and has perfect recall.
    """
    cap = settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS
    return "exact" if tenant_live_chunk_count(tenant=tenant, cap=cap + 1) <= cap else "hnsw"


def vector_candidates(
    *,
    tenant: Tenant,
    embedding: list[float],
    audience: Audience,
    limit: int = CANDIDATES,
    plan: VectorPlan = "auto",
) -> tuple[list[tuple[int, float]], str]:
    """Chunk ids by cosine distance, and the plan used ("exact" or "hnsw")."""
    if plan == "auto":
        plan = vector_plan_choose(tenant=tenant)
    where, params = _filter_sql(tenant=tenant, audience=audience)
    item = _vector_sql(where=where, params=params, embedding=embedding, limit=limit, plan=plan)
    return _lists_run([item], settings_local=_settings_for([item], plan))["vector"], plan


def trigram_words(query: str) -> list[str]:
    """Query words worth a typo/code lookup: codes first, then words of 5+ letters."""
    codes = [m.group() for m in _CODE_RE.finditer(query)]
    words = [w.lower() for w in _WORD_RE.findall(query) if w not in codes]
    return list(dict.fromkeys([*codes, *words]))[:TRIGRAM_MAX_CANDIDATES]


def trigram_candidates(
    *, tenant: Tenant, terms: list[str], audience: Audience, limit: int = CANDIDATES
) -> list[tuple[int, float]]:
    """Chunk ids containing words similar to `terms` that full text does not find as such."""
    if not terms:
        return []
    where, params = _filter_sql(tenant=tenant, audience=audience)
    item = _trigram_sql(tenant=tenant, where=where, params=params, words=terms, limit=limit)
    return _lists_run([item], settings_local=_settings_for([item], None))["trigram"]


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


@replicas.stale_tolerant
def search_passages(
    *, tenant: Tenant, query: str, audience: Audience, limit: int = 8, mode: str = "hybrid"
) -> SearchResult:
    """Find the passages `audience` may see that best answer `query`.

    `mode` is "hybrid" (default), "fulltext" or "vector" (the single lists, for evaluation).
    Each passage carries an evidence strength; `strength` summarizes the best one so callers
    can refuse to answer from weak evidence. The candidate lists run as one SQL statement,
    on the read replica when one is configured (a document indexed a moment ago may be
    missing there for a moment).
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
    where, params = _filter_sql(tenant=tenant, audience=audience)
    lists: list[_ListSql] = []
    plan = None
    if mode in ("hybrid", "fulltext"):
        lists.append(_fulltext_sql(where=where, params=params, query=query, limit=CANDIDATES))
    if mode in ("hybrid", "vector"):
        plan = vector_plan_choose(tenant=tenant)
        t = lap("plan", t)
        lists.append(
            _vector_sql(
                where=where, params=params, embedding=embedding, limit=CANDIDATES, plan=plan
            )
        )
    words = trigram_words(query) if mode == "hybrid" else []
    if words:
        lists.append(
            _trigram_sql(tenant=tenant, where=where, params=params, words=words, limit=CANDIDATES)
        )
    ranked = _lists_run(lists, settings_local=_settings_for(lists, plan))
    t = lap(f"lists_{plan}" if plan else "lists", t)
    fused = rrf_fuse(
        [[i for i, _ in ranked[item.name]] for item in lists],
        weights=[LIST_WEIGHTS[item.name] for item in lists],
    )
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
    with connections[replicas.read_alias()].cursor() as cursor:
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
