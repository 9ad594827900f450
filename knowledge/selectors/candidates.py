"""The candidate lists of a hybrid search, each one CTE of a single SQL statement: full text,
vector (exact scan or HNSW, with per-tenant partial indexes) and trigram; fused with weighted
Reciprocal Rank Fusion."""

from __future__ import annotations

import re
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.db import connections, transaction

from knowledge.selectors.filters import Audience, filter_sql
from supportbot import replicas
from supportbot.models import Tenant

RRF_K = 60
CANDIDATES = 30
TRIGRAM_THRESHOLD = 0.5  # pg_trgm word similarity of a query word to a vocabulary word
TRIGRAM_MAX_CANDIDATES = 12  # query words checked against full text
TRIGRAM_MAX_WORDS = 6  # of those, words full text cannot match that are looked up
TRIGRAM_TERMS_PER_WORD = 3
# Full text ranks at most this many matches (all terms, then headings first); fulltext_sql.
FULLTEXT_RANK_POOL = 500
# HNSW candidate list: recall@20 vs exact on the 50,000-chunk bench tenant with its own
# partial index was 0.71 at 40, 0.86 at 100, 0.93 at 200, 0.98 at 400 (p95 ~4 ms; strict and
# relaxed order alike).
HNSW_EF_SEARCH = 400
_CODE_RE = re.compile(r"\b[A-Za-z]{0,6}-?\d[\w-]*\b")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]{4,}")

VectorPlan = Literal["auto", "exact", "hnsw"]


# --------------------------------------------------------------------------- candidate lists
#
# Each list is one CTE; a search runs the lists it needs as a single statement (one round
# trip, one SET LOCAL before it when HNSW or trigram settings are needed).


@dataclass(frozen=True)
class ListSql:
    name: str  # "fulltext" | "vector" | "trigram"
    ctes: str  # "name AS (...)" fragments ending with the CTE called `name`
    params: list
    ascending: bool = False  # vector scores are distances


def fulltext_sql(*, where: str, params: list, query: str, limit: int) -> ListSql:
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
    return ListSql("fulltext", ctes, [query, query, *params, *params, *params])


def vector_sql(*, where: str, params: list, embedding: list[float], limit: int, plan: str):
    """Cosine neighbours: an exact sort over the tenant's rows, or an HNSW scan.

    With plan "hnsw" the planner takes the tenant's own partial index when it exists (the
    tenant id in `where` proves its predicate), else the shared index; either way iterative
    scan keeps filling the list when the audience filter drops rows.
    """
    vector = vector_literal(embedding)
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
        return ListSql("vector", ctes, [vector, *params], ascending=True)
    ctes = f"""
        vector AS MATERIALIZED (
            SELECT c.id, c.embedding <=> %s::vector AS score FROM knowledge_chunk c
            WHERE {where} ORDER BY c.embedding <=> %s::vector LIMIT {int(limit)}
        )"""  # noqa: S608
    return ListSql("vector", ctes, [vector, *params, vector], ascending=True)


def trigram_sql(*, tenant: Tenant, where: str, params: list, words: list[str], limit: int):
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
    return ListSql("trigram", ctes, [words, tenant.pk, *near_params, *params])


def lists_run(lists: list[ListSql], *, settings_local: dict[str, str]) -> dict:
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


def settings_for(lists: list[ListSql], plan: str | None) -> dict[str, str]:
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
    where, params = filter_sql(tenant=tenant, audience=audience)
    item = fulltext_sql(where=where, params=params, query=query, limit=limit)
    return lists_run([item], settings_local={})["fulltext"]


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


_plans_lock = threading.Lock()
# (tenant id, threshold) -> (plan, monotonic time it expires); see vector_plan_choose.
_plans: dict[tuple[int, int], tuple[str, float]] = {}
_PLANS_MAX = 10_000


def vector_plan_choose(*, tenant: Tenant) -> str:
    """Choose "exact" for a tenant with at most KNOWLEDGE_EXACT_SCAN_MAX_ROWS live chunks, else
    "hnsw".

    The planner alone picks a slow filtered HNSW path for small tenants (see DESIGN.md); an
    exact sort over a few thousand rows (B-tree on tenant) is fast and has perfect recall.
    The choice is kept per tenant for KNOWLEDGE_VECTOR_PLAN_TTL_S (counting up to the
    threshold's rows on every search cost a query per turn); an index run of this process
    forgets it at once (`vector_plan_forget`), other processes within the lifetime. A stale
    plan is slower or, past the threshold, of HNSW's recall, never another tenant's rows.
    """
    cap = settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS
    key, now = (tenant.pk, cap), time.monotonic()
    with _plans_lock:
        hit = _plans.get(key)
    if hit is not None and hit[1] > now:
        return hit[0]
    plan = "exact" if tenant_live_chunk_count(tenant=tenant, cap=cap + 1) <= cap else "hnsw"
    with _plans_lock:
        if len(_plans) >= _PLANS_MAX:
            _plans.clear()
        _plans[key] = (plan, now + settings.KNOWLEDGE_VECTOR_PLAN_TTL_S)
    return plan


def vector_plan_forget(*, tenant_id: int) -> None:
    """Forget the tenant's kept vector plan (its live chunks changed in this process)."""
    with _plans_lock:
        for key in [k for k in _plans if k[0] == tenant_id]:
            del _plans[key]


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
    where, params = filter_sql(tenant=tenant, audience=audience)
    item = vector_sql(where=where, params=params, embedding=embedding, limit=limit, plan=plan)
    return lists_run([item], settings_local=settings_for([item], plan))["vector"], plan


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
    where, params = filter_sql(tenant=tenant, audience=audience)
    item = trigram_sql(tenant=tenant, where=where, params=params, words=terms, limit=limit)
    return lists_run([item], settings_local=settings_for([item], None))["trigram"]


def vector_literal(embedding: list[float]) -> str:
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
