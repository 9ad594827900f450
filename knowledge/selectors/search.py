"""Reads of the knowledge app: hybrid passage search, citations, documents. Always per tenant.

Search runs three candidate lists inside SQL with the tenant and audience filters in each
WHERE clause (never applied afterwards), as one statement: full text (`websearch_to_tsquery`,
all-terms matches first, then OR-ed terms, `ts_rank_cd` over a bounded pool), vector (cosine;
exact scan over the tenant's rows when they are few, HNSW with iterative scan when they are
many, through the tenant's own partial index once it is built) and trigram (misspelled words
and codes, looked up in the tenant's vocabulary). The lists are fused with weighted Reciprocal
Rank Fusion (k=60). A passage that repeats a better one (another document's copy of the same
section) is dropped (`passages_distinct`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import lru_cache

from django.db import connections
from django.urls import get_script_prefix, reverse

from knowledge.embeddings import embed_query
from knowledge.models import Document, TenantKnowledge
from knowledge.selectors.candidates import (
    CANDIDATES,
    ListSql,
    fulltext_sql,
    lists_run,
    rrf_fuse,
    settings_for,
    trigram_sql,
    trigram_words,
    vector_literal,
    vector_plan_choose,
    vector_sql,
)
from knowledge.selectors.distinct import passages_distinct
from knowledge.selectors.filters import Audience, filter_sql
from supportbot import replicas
from supportbot.models import Tenant

MAX_QUERY_CHARS = 1000
# Evidence: cosine similarity mapped linearly from [LOW, HIGH] onto [0, 1], blended with the
# share of the query's words the passage contains. Calibrated on the demo evaluation set.
COSINE_LOW, COSINE_HIGH = 0.15, 0.60
EVIDENCE_COSINE_WEIGHT = 0.7
STRONG_EVIDENCE, WEAK_EVIDENCE = 0.55, 0.3
# The search found the topic, not the answer: its third-best passage is nearly as close as its
# best, and the best only moderately close. On a single-product FAQ every passage is about the
# product, so a question the pages never answer ("run fetchmail as a systemd service", "a
# password on my sqlite database") still reaches strong evidence, spread evenly over unrelated
# entries; a question they answer usually stands out. Such a search is weak (the reply hedges).
AMBIGUOUS_RATIO, AMBIGUOUS_BELOW = 0.9, 0.7
# Strength is judged on this many passages whatever the caller's limit (the chat's eight), so
# a partner asking for one passage gets the strength the chat would act on.
JUDGED = 8
# Weighted RRF: MiniLM is the strongest single list on paraphrased customer questions; the
# lexical lists add exact terms, codes and typos (weights chosen on the demo evaluation set,
# where equal weights reached recall@5 0.962 against vector-only 1.000).
LIST_WEIGHTS = {"fulltext": 0.7, "vector": 1.0, "trigram": 0.3}


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
    # The text of its section that follows the chunk, up to the next chunk's end (what a quote
    # may run on into when the chunk ends before the answer does); "" at the section's end.
    continuation: str = ""
    # Its sentences' vectors stored at indexing (`knowledge.sentences`), read only when the
    # search was asked for them; b"" otherwise or when none are stored.
    sentence_vectors: bytes = field(default=b"", repr=False, compare=False)


@dataclass(frozen=True)
class SearchResult:
    query: str
    passages: list[Passage]
    strength: str  # "strong" | "weak" | "none"
    timings_ms: dict[str, float] = field(default_factory=dict)
    # Weak only because no passage stands out from the others (`evidence_strength`).
    ambiguous: bool = False
    # The query's embedding (normalized), for callers that score sentences against the same
    # text: they need not embed it again.
    query_vector: tuple[float, ...] = field(default=(), repr=False)


# --------------------------------------------------------------------------- search


@replicas.stale_tolerant
def search_passages(
    *,
    tenant: Tenant,
    query: str,
    audience: Audience,
    limit: int = 8,
    mode: str = "hybrid",
    sentence_vectors: bool = False,
) -> SearchResult:
    """Find the passages `audience` may see that best answer `query`.

    `mode` is "hybrid" (default), "fulltext" or "vector" (the single lists, for evaluation).
    With `sentence_vectors` each passage carries its sentences' stored vectors (what an
    extractive reply scores its sentences with).
    Each passage carries an evidence strength; `strength` summarizes the best one so callers
    can refuse to answer from weak evidence. The candidate lists run as one SQL statement,
    on the read replica when one is configured (a document indexed a moment ago may be
    missing there for a moment).
    """
    started = time.perf_counter()
    query = (query or "").strip()[:MAX_QUERY_CHARS]
    if not query:
        return SearchResult(query=query, passages=[], strength="none", timings_ms={})
    watch = _Stopwatch()
    embedding = embed_query(query)
    watch.lap("embed")
    candidates = _candidate_lists(
        tenant=tenant, audience=audience, query=query, embedding=embedding, mode=mode, watch=watch
    )
    lists, plan = candidates.lists, candidates.plan
    ranked = lists_run(lists, settings_local=settings_for(lists, plan))
    watch.lap(f"lists_{plan}" if plan else "lists")
    fused = rrf_fuse(
        [[i for i, _ in ranked[item.name]] for item in lists],
        weights=[LIST_WEIGHTS[item.name] for item in lists],
    )
    limit = max(1, limit)
    passages = _passages_distinct_fetch(
        tenant=tenant,
        ranked=sorted(fused, key=lambda i: (-fused[i], i)),
        scores=fused,
        want=max(limit, JUDGED),
        audience=audience,
        query=query,
        embedding=embedding,
        sentence_vectors=sentence_vectors,
    )
    watch.lap("fetch")
    watch.timings["total"] = round((time.perf_counter() - started) * 1000, 2)
    strength, ambiguous = evidence_strength([p.evidence for p in passages[:JUDGED]])
    return SearchResult(
        query=query,
        passages=passages[:limit],
        strength=strength,
        timings_ms=watch.timings,
        ambiguous=ambiguous,
        query_vector=tuple(embedding),
    )


@dataclass
class _Stopwatch:
    """The milliseconds of each step of a search, each measured from the end of the last."""

    timings: dict[str, float] = field(default_factory=dict)
    last: float = field(default_factory=time.perf_counter)

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round((now - self.last) * 1000, 2)
        self.last = now


@dataclass(frozen=True)
class _Candidates:
    lists: list[ListSql]  # the candidate lists `mode` asks for, in fusion order
    plan: str | None  # the vector list's plan ("exact" | "hnsw"), None without one


def _candidate_lists(
    *,
    tenant: Tenant,
    audience: Audience,
    query: str,
    embedding: list[float],
    mode: str,
    watch: _Stopwatch,
) -> _Candidates:
    """The SQL of the full-text, vector and trigram lists (as `mode` asks), each filtered."""
    where, params = filter_sql(tenant=tenant, audience=audience)
    lists: list[ListSql] = []
    plan = None
    if mode in ("hybrid", "fulltext"):
        lists.append(fulltext_sql(where=where, params=params, query=query, limit=CANDIDATES))
    if mode in ("hybrid", "vector"):
        plan = vector_plan_choose(tenant=tenant)
        watch.lap("plan")
        lists.append(
            vector_sql(where=where, params=params, embedding=embedding, limit=CANDIDATES, plan=plan)
        )
    words = trigram_words(query) if mode == "hybrid" else []
    if words:
        lists.append(
            trigram_sql(tenant=tenant, where=where, params=params, words=words, limit=CANDIDATES)
        )
    return _Candidates(lists=lists, plan=plan)


# Rounds of fetching that replace dropped repeats; a tenant without repeats needs one.
DISTINCT_ROUNDS = 3


def _passages_distinct_fetch(
    *,
    tenant: Tenant,
    ranked: list[int],
    scores: dict[int, float],
    want: int,
    audience: Audience | None,
    query: str,
    embedding: list[float] | None,
    sentence_vectors: bool = False,
) -> list[Passage]:
    """The first `want` passages of `ranked` that do not repeat a better one
    (`passages_distinct`): each round fetches as many of the next ids as repeats dropped."""
    passages: list[Passage] = []
    start = 0
    for _ in range(DISTINCT_ROUNDS):
        batch = ranked[start : start + want - len(passages)]
        if not batch:
            break
        start += len(batch)
        fetched = _passages_fetch(
            tenant=tenant,
            chunk_ids=batch,
            audience=audience,
            query=query,
            embedding=embedding,
            sentence_vectors=sentence_vectors,
        )
        fetched = sorted(
            (replace(p, score=round(scores[p.chunk_id], 6)) for p in fetched),
            key=lambda p: (-p.score, p.chunk_id),
        )
        passages = passages_distinct(passages + fetched)
        if len(passages) >= want:
            break
    return passages[:want]


def evidence_strength(evidences: list[float]) -> tuple[str, bool]:
    """Summarize the passages' evidence: ("strong" | "weak" | "none", ambiguous).

    Strong needs a best passage at `STRONG_EVIDENCE` that stands out: when the third best is
    within `AMBIGUOUS_RATIO` of a best under `AMBIGUOUS_BELOW`, the search is weak and
    `ambiguous` says why.
    """
    ranked = sorted(evidences, reverse=True)
    best = ranked[0] if ranked else 0.0
    if best < WEAK_EVIDENCE:
        return "none", False
    if best < STRONG_EVIDENCE:
        return "weak", False
    if best < AMBIGUOUS_BELOW and len(ranked) >= 3 and ranked[2] >= AMBIGUOUS_RATIO * best:
        return "weak", True
    return "strong", False


def _passages_fetch(
    *,
    tenant: Tenant,
    chunk_ids: list[int],
    audience: Audience | None,
    query: str = "",
    embedding: list[float] | None = None,
    sentence_vectors: bool = False,
) -> list[Passage]:
    """Load passages by id (filters applied again); with a query, compute their evidence;
    with `sentence_vectors`, read their sentences' vectors too."""
    if not chunk_ids:
        return []
    if audience is None:
        where, params = "c.tenant_id = %s", [tenant.pk]
    else:
        where, params = filter_sql(tenant=tenant, audience=audience)
    evidence_sql, evidence_params = _evidence_sql(query=query, embedding=embedding)
    sql = _passages_sql(
        evidence_sql=evidence_sql,
        vectors_sql="c.sentence_vectors" if sentence_vectors else "''::bytea",
        where=where,
    )
    with connections[replicas.read_alias()].cursor() as cursor:
        cursor.execute(sql, [*evidence_params, list(chunk_ids), *params])
        rows = cursor.fetchall()
    return [_passage_from_row(row, tenant=tenant, scored=embedding is not None) for row in rows]


def _evidence_sql(*, query: str, embedding: list[float] | None) -> tuple[str, list]:
    """The two evidence columns (cosine, share of the query's words) and their parameters;
    zeros without an embedding."""
    if embedding is None:
        return "0.0, 0.0", []
    # The question's lexemes (stemmed once, as the chunk's were) found among the chunk's
    # (its array built once, not once per word):
    # compared as they are, since stemming a stem again can change it ("database" ->
    # "databas" -> "databa"), which left every such word uncovered.
    evidence_sql = (
        "1 - (c.embedding <=> %s::vector),"
        " (SELECT count(*) FILTER (WHERE w = ANY(lexemes))::float / greatest(count(*), 1)"
        " FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS w,"
        " tsvector_to_array(c.search_vector) AS lexemes)"
    )
    return evidence_sql, [vector_literal(embedding), query]


def _passages_sql(*, evidence_sql: str, vectors_sql: str, where: str) -> str:
    # The next chunk of the same section: its text past this chunk's end (chunks overlap by a
    # few sentences; when they do not, a block break stands for the whitespace between them,
    # which is a sentence or block break: reading it from the version's text would detoast
    # the whole document, measured at twice the fetch time).
    return f"""
        SELECT c.id, c.document_id, c.version, d.title, c.heading_path, c.span_start,
               c.span_end, c.text, c.audience, {evidence_sql}, {vectors_sql},
               CASE WHEN n.span_start >= c.span_end THEN E'\\n\\n' || n.text
                    WHEN n.span_end > c.span_end THEN substr(n.text, c.span_end - n.span_start + 1)
                    ELSE '' END
        FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id
        LEFT JOIN knowledge_chunk n ON n.document_id = c.document_id
            AND n.version = c.version AND n.ordinal = c.ordinal + 1
            AND n.heading_path = c.heading_path
        WHERE c.id = ANY(%s) AND {where}
    """  # noqa: S608 - fragments are constants; values are parameters


def _passage_from_row(row: tuple, *, tenant: Tenant, scored: bool) -> Passage:
    """A fetched row as a Passage (score 0; evidence only when the query was `scored`)."""
    cid, doc_id, version, title, path, start, end, text, aud, cosine, coverage = row[:11]
    vectors, more = row[11:]
    evidence = 0.0
    if scored:
        scaled = (float(cosine) - COSINE_LOW) / (COSINE_HIGH - COSINE_LOW)
        scaled = min(1.0, max(0.0, scaled))
        w = EVIDENCE_COSINE_WEIGHT
        evidence = round(min(1.0, w * scaled + (1 - w) * float(coverage)), 4)
    url = ""
    if aud == Document.Audience.PUBLIC:
        page = _page_url(get_script_prefix(), tenant.slug, doc_id, version)
        url = f"{page}#chunk-{cid}"
    return Passage(
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
        continuation=more or "",
        sentence_vectors=bytes(vectors or b""),
    )


@lru_cache(maxsize=4096)
def _page_url(prefix: str, slug: str, document_id: int, version: int) -> str:
    """The public page of a document version (`reverse` costs ~40 µs; a search builds 24)."""
    return reverse("knowledge-page-version", args=[slug, document_id, version])


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
