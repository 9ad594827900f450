"""Knowledge benchmark: search latency at 100k chunks and indexing throughput.

Runs against its own database (`supportbot_bench` on the embedded PostgreSQL, or
BENCH_DATABASE_URL) so development data is untouched; the 100k-chunk corpus is built once and
reused (`--rebuild` to start over). Writes bench/out/knowledge_search.md.

Corpus: 1 large tenant (50,000 chunks) and 25 small tenants (2,000 each). Chunk text is
synthetic help-center prose. The first small tenant's 2,000 chunks carry real MiniLM
embeddings of their text; embedding all 100k texts on a shared 2-core machine would take
hours, so every other row gets one of those real vectors plus Gaussian noise (cosine ~0.85 to
it), normalized: neighbourhood structure like real embeddings, unlike uniform random vectors
(on which HNSW recall is meaningless). Queries are real MiniLM embeddings of questions.

    python -m bench.knowledge_search [--rebuild] [--queries 30]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import psycopg

BIG_ROWS = 50_000
SMALL_TENANTS = 25
SMALL_ROWS = 2_000
REAL_TENANT_ROWS = 2_000
DOC_CHUNKS = 100
TOP = 20
OUT = Path(__file__).resolve().parent / "out" / "knowledge_search.md"

QUESTIONS = [
    "how long do I have to return my tent",
    "refund not showing on my card after two weeks",
    "is shipping free over 50 dollars",
    "my stove igniter stopped working is it under warranty",
    "where is my order A-1042",
    "can I exchange boots for a bigger size",
    "do you ship to canada",
    "how do I reset my password",
    "can I pay with klarna",
    "package says delivered but not here",
    "opened items store credit",
    "how much to repair a tent pole TR-2210",
    "cancel my order placed an hour ago",
    "gift card expiry",
    "change shipping address after ordering",
    "two-step verification backup codes",
    "return label fee deducted from refund",
    "damaged in transit photos",
    "price dropped after I bought it",
    "hazardous items fuel canisters shipping",
]

PRODUCTS = [
    "tent",
    "sleeping bag",
    "backpack",
    "hiking boots",
    "rain jacket",
    "stove",
    "headlamp",
    "trekking poles",
    "water filter",
    "camp chair",
    "down vest",
    "kayak paddle",
]
TOPICS = [
    ("Returns", "You can return the {p} within {n} days of delivery if it is unused."),
    ("Refunds", "Refunds for the {p} go back to the original payment method in {n} business days."),
    ("Shipping", "Standard shipping for the {p} takes {n} business days from our warehouse."),
    ("Warranty", "The {p} is covered against defects for {n} months from the purchase date."),
    ("Orders", "Order {code} with the {p} can be changed within {n} minutes of checkout."),
    ("Repairs", "Repairing the {p} costs ${n} and takes about {n} days at the repair shop."),
    ("Account", "Sign in to see the {p} you bought; reset links expire after {n} minutes."),
    ("Payments", "Pay for the {p} in {n} installments or with a gift card."),
]


def synthetic_text(rng: random.Random) -> tuple[str, str]:
    topic, template = rng.choice(TOPICS)
    sentences = []
    for _ in range(rng.randint(4, 8)):
        t2, tmpl = rng.choice(TOPICS) if rng.random() < 0.3 else (topic, template)
        sentences.append(
            tmpl.format(
                p=rng.choice(PRODUCTS), n=rng.randint(2, 90), code=f"A-{rng.randint(1000, 9999)}"
            )
        )
    return topic, " ".join(sentences)


def pct(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else 0


# --------------------------------------------------------------------------- setup


def bench_database_url() -> str:
    url = os.environ.get("BENCH_DATABASE_URL")
    if url:
        return url
    from supportbot import devservices

    devservices.postgres_start()
    info = devservices._pg_info()
    admin = info.get_uri(database="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname='supportbot_bench'"
        ).fetchone():
            conn.execute('CREATE DATABASE "supportbot_bench"')
    return info.get_uri(database="supportbot_bench")


def django_setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportbot.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_corpus(rebuild: bool) -> None:
    from django.db import connection

    from knowledge.embeddings import embed_texts
    from knowledge.models import Chunk
    from supportbot.models import Tenant

    if not rebuild and Chunk.objects.filter(tenant__slug__startswith="bench-").count() >= (
        BIG_ROWS + SMALL_TENANTS * SMALL_ROWS
    ):
        print("corpus present; reusing it (--rebuild to start over)")
        return
    print("building corpus ...", flush=True)
    started = time.perf_counter()
    import numpy as np
    from pgvector.psycopg import register_vector

    real = None
    if Chunk.objects.filter(tenant__slug="bench-s00").count() == REAL_TENANT_ROWS:
        real = np.array(
            [
                list(v)
                for v in Chunk.objects.filter(tenant__slug="bench-s00")
                .order_by("id")
                .values_list("embedding", flat=True)
            ],
            dtype=np.float32,
        )
        print("  reusing the real embeddings of bench-s00")
    Tenant.objects.filter(slug__startswith="bench-").exclude(slug="bench-indexing").delete()
    plan = [(f"bench-s{i:02d}", SMALL_ROWS) for i in range(SMALL_TENANTS)]
    plan.insert(1, ("bench-big", BIG_ROWS))
    rng = random.Random(42)
    np_rng = np.random.default_rng(42)
    raw = connection.cursor().connection  # psycopg connection under Django
    register_vector(raw)
    with connection.cursor() as cursor:
        for name in ["knowledge_chunk_hnsw", "knowledge_chunk_fts", "knowledge_chunk_trgm"]:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")
    for slug, rows in plan:
        tenant = Tenant.objects.create(slug=slug, name=slug)
        texts = [synthetic_text(rng) for _ in range(rows)]
        if slug == "bench-s00":
            if real is None:
                t = time.perf_counter()
                real = np.array(embed_texts([f"{topic}\n{text}" for topic, text in texts]))
                print(f"  embedded {rows} real chunks in {time.perf_counter() - t:.0f}s")
            vectors = real
        else:
            base = real[np_rng.integers(0, len(real), size=rows)]
            vectors = base + np_rng.normal(scale=0.033, size=(rows, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO knowledge_document (tenant_id, title, audience, segments, version,"
                " live_version, status, error, chunks_done, chunks_total, attempts, created_at,"
                " updated_at) SELECT %s, 'Synthetic ' || g, 'public', '{}', 1, 1, 'ready', '',"
                " %s, %s, 1, now(), now() FROM generate_series(1, %s) g RETURNING id",
                [tenant.pk, DOC_CHUNKS, DOC_CHUNKS, rows // DOC_CHUNKS],
            )
            doc_ids = [r[0] for r in cursor.fetchall()]
        with (
            raw.cursor() as cur,
            cur.copy(
                "COPY knowledge_chunk (tenant_id, document_id, version, ordinal, text,"
                " heading_path, context, span_start, span_end, embedding, audience, segments,"
                " is_live)"
                " FROM STDIN WITH (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(
                [
                    "int8",
                    "int8",
                    "int4",
                    "int4",
                    "text",
                    "varchar[]",
                    "varchar",
                    "int4",
                    "int4",
                    "vector",
                    "varchar",
                    "varchar[]",
                    "bool",
                ]
            )
            for i, ((topic, text), vector) in enumerate(zip(texts, vectors, strict=True)):
                copy.write_row(
                    [
                        tenant.pk,
                        doc_ids[i // DOC_CHUNKS],
                        1,
                        i % DOC_CHUNKS,
                        text,
                        [topic],
                        f"Synthetic > {topic}",
                        0,
                        len(text),
                        vector,
                        "public",
                        [],
                        True,
                    ]
                )
        raw.commit()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        t = time.perf_counter()
        cursor.execute(
            "CREATE INDEX knowledge_chunk_hnsw ON knowledge_chunk USING hnsw"
            " (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE is_live"
        )
        print(f"  HNSW index built in {time.perf_counter() - t:.0f}s")
        cursor.execute(
            "CREATE INDEX knowledge_chunk_fts ON knowledge_chunk USING gin (search_vector)"
            " WHERE is_live"
        )
        cursor.execute(
            "CREATE INDEX knowledge_chunk_trgm ON knowledge_chunk USING gin"
            " (text gin_trgm_ops) WHERE is_live"
        )
        cursor.execute("VACUUM ANALYZE knowledge_chunk")
    print(f"corpus built in {time.perf_counter() - started:.0f}s")


# --------------------------------------------------------------------------- measurements


def time_calls(fn, items, repeat: int = 1) -> tuple[list[float], list]:
    latencies, results = [], []
    for _ in range(repeat):
        for item in items:
            t = time.perf_counter()
            results.append(fn(item))
            latencies.append((time.perf_counter() - t) * 1000)
    return latencies, results


def planner_default(tenant, embedding) -> list[int]:
    """What the planner does alone: no plan choice, default ef_search, no iterative scan."""
    from django.db import connection

    from knowledge.selectors import _vector_literal

    with connection.cursor() as cursor:
        cursor.execute("RESET hnsw.ef_search")
        cursor.execute("RESET hnsw.iterative_scan")
        cursor.execute(
            "SELECT id FROM knowledge_chunk c WHERE c.tenant_id = %s AND c.is_live"
            " AND c.audience = 'public' ORDER BY c.embedding <=> %s::vector LIMIT %s",
            [tenant.pk, _vector_literal(embedding), TOP],
        )
        return [r[0] for r in cursor.fetchall()]


def explain_uses_hnsw(tenant, embedding) -> bool:
    from django.db import connection

    from knowledge.selectors import _vector_literal

    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN SELECT id FROM knowledge_chunk c WHERE c.tenant_id = %s AND c.is_live"
            " AND c.audience = 'public' ORDER BY c.embedding <=> %s::vector LIMIT %s",
            [tenant.pk, _vector_literal(embedding), TOP],
        )
        return "knowledge_chunk_hnsw" in "\n".join(r[0] for r in cursor.fetchall())


def measure_search(queries: int) -> list[str]:
    from django.conf import settings

    from knowledge.embeddings import embed_query
    from knowledge.selectors import (
        Audience,
        fulltext_candidates,
        search_passages,
        vector_candidates,
    )
    from supportbot.models import Tenant

    lines = []
    questions = (QUESTIONS * ((queries // len(QUESTIONS)) + 1))[:queries]
    embeddings = {q: embed_query(q) for q in questions}
    customer = Audience.customer()
    big, small, real = (Tenant.objects.get(slug=s) for s in ("bench-big", "bench-s07", "bench-s00"))
    lines.append(
        f"Exact-scan threshold (KNOWLEDGE_EXACT_SCAN_MAX_ROWS): "
        f"{settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS} rows.\n"
    )
    lines.append("### Vector candidates (top 20), SQL only\n")
    lines.append("| tenant (rows) | plan | p50 ms | p95 ms | rows returned | recall@20 vs exact |")
    lines.append("|---|---|---:|---:|---:|---:|")
    for tenant, rows in [(small, SMALL_ROWS), (big, BIG_ROWS)]:
        exact_lat, exact_res = time_calls(
            lambda q, t=tenant: vector_candidates(
                tenant=t, embedding=embeddings[q], audience=customer, limit=TOP, plan="exact"
            ),
            questions,
        )
        truth = [{i for i, _ in r[0]} for r in exact_res]
        variants = [("exact (B-tree on tenant, exact sort)", exact_lat, exact_res)]
        hnsw_lat, hnsw_res = time_calls(
            lambda q, t=tenant: vector_candidates(
                tenant=t, embedding=embeddings[q], audience=customer, limit=TOP, plan="hnsw"
            ),
            questions,
        )
        variants.append(("HNSW + iterative scan (ef_search 100)", hnsw_lat, hnsw_res))
        auto_lat, auto_res = time_calls(
            lambda q, t=tenant: vector_candidates(
                tenant=t, embedding=embeddings[q], audience=customer, limit=TOP
            ),
            questions,
        )
        variants.append((f"auto -> {auto_res[0][1]}", auto_lat, auto_res))
        planner_lat, planner_res = time_calls(
            lambda q, t=tenant: ([(i, 0.0) for i in planner_default(t, embeddings[q])], "planner"),
            questions,
        )
        uses = "HNSW" if explain_uses_hnsw(tenant, embeddings[questions[0]]) else "no HNSW"
        variants.append(
            (f"planner alone ({uses}, ef_search 40, no iterative)", planner_lat, planner_res)
        )
        for label, lat, res in variants:
            got = [{i for i, _ in r[0]} for r in res]
            recall = statistics.mean(
                len(g & t) / max(1, len(t)) for g, t in zip(got, truth, strict=True)
            )
            returned = statistics.mean(len(g) for g in got)
            lines.append(
                f"| {tenant.slug} ({rows}) | {label} | {statistics.median(lat):.1f} | "
                f"{pct(lat, 95):.1f} | {returned:.0f} | {recall:.3f} |"
            )
    lines.append("\n### Full-text candidates and whole hybrid search\n")
    lines.append("| tenant | step | p50 ms | p95 ms |")
    lines.append("|---|---|---:|---:|")
    for tenant in (real, big):
        ft_lat, _ = time_calls(
            lambda q, t=tenant: fulltext_candidates(tenant=t, query=q, audience=customer),
            questions,
        )
        lines.append(
            f"| {tenant.slug} | full text (GIN, websearch_to_tsquery) | "
            f"{statistics.median(ft_lat):.1f} | {pct(ft_lat, 95):.1f} |"
        )
        _, results = time_calls(
            lambda q, t=tenant: search_passages(tenant=t, query=q, audience=customer), questions
        )
        search = [r.timings_ms["total"] - r.timings_ms["embed"] for r in results]
        lines.append(
            f"| {tenant.slug} | hybrid search_passages, excluding query embedding | "
            f"{statistics.median(search):.1f} | {pct(search, 95):.1f} |"
        )
    from knowledge.embeddings import embed_texts

    embed_lat, _ = time_calls(lambda q: embed_texts([q + " (uncached)"]), questions)
    lines.append(
        f"| - | query embedding (MiniLM, uncached) | {statistics.median(embed_lat):.1f} "
        f"| {pct(embed_lat, 95):.1f} |"
    )
    return lines


def measure_indexing(documents: int = 6) -> list[str]:
    """Index synthetic Markdown documents through the service the worker runs, then encode the
    very same chunk inputs with the raw model, in the same process."""
    from django.core.files.base import ContentFile
    from django_q.brokers import get_broker
    from django_q.conf import Conf

    from knowledge import services
    from knowledge.embeddings import local_model
    from knowledge.models import Chunk, Document
    from supportbot.models import Tenant
    from supportbot.services import Actor

    Conf.CLUSTER_NAME = "supportbot-bench"  # uploads enqueue here, not on the dev queue
    rng = random.Random(5)
    tenant, _ = Tenant.objects.get_or_create(slug="bench-indexing", defaults={"name": "idx"})
    Document.objects.filter(tenant=tenant).delete()
    # Load and warm up outside the timing, as a long-running worker process has it.
    local_model().encode(["warm up"] * 32, batch_size=32, show_progress_bar=False)
    uploaded = []
    for d in range(documents):
        parts = [f"# Synthetic guide {d}\n"]
        for s in range(8):
            topic, _ = synthetic_text(rng)
            parts.append(f"## {topic} section {s}\n")
            parts.extend(synthetic_text(rng)[1] + "\n" for _ in range(4))
        uploaded.append(
            services.document_upload(
                tenant=tenant,
                file=ContentFile("\n".join(parts).encode(), name=f"g{d}.md"),
                actor=Actor.system("bench"),
            )
        )
    get_broker().delete_queue()  # indexed inline below, as the worker would
    started = time.perf_counter()
    for document in uploaded:
        services.document_index(document_id=document.pk, version=1)
    pipeline_s = time.perf_counter() - started
    chunks = list(Chunk.objects.filter(tenant=tenant).select_related("document"))
    inputs = [
        services._embedding_input(c.document.title, _Draft(c.text, c.heading_path)) for c in chunks
    ]
    started = time.perf_counter()
    local_model().encode(inputs, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    raw_s = time.perf_counter() - started
    n = len(chunks)
    return [
        "| what | chunks | seconds | chunks/s |",
        "|---|---:|---:|---:|",
        f"| pipeline: extract + chunk + embed + store (services.document_index) | {n} | "
        f"{pipeline_s:.1f} | {n / pipeline_s:.1f} |",
        f"| raw model.encode on the same chunk inputs (batch 32) | {n} | {raw_s:.1f} | "
        f"{n / raw_s:.1f} |",
        f"\nPipeline throughput is {100 * raw_s / pipeline_s:.0f}% of the raw encoder's.",
    ]


class _Draft:
    def __init__(self, text, heading_path):
        self.text, self.heading_path = text, heading_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args(argv)
    django_setup(bench_database_url())
    build_corpus(args.rebuild)
    from knowledge.models import Chunk

    total = Chunk.objects.filter(is_live=True).count()
    report = [
        "# Knowledge search benchmark\n",
        f"{total} live chunks; 1 tenant of {BIG_ROWS}, {SMALL_TENANTS} of {SMALL_ROWS} "
        f"(bench-s00 with real MiniLM vectors, the rest real vectors plus noise); "
        f"{args.queries} real query embeddings; CPU count {os.cpu_count()}.\n",
        "## Search latency\n",
        *measure_search(args.queries),
        "\n## Indexing throughput\n",
        *measure_indexing(),
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(report) + "\n")
    print("\n".join(report))
    print(f"\nwrote {OUT}")


if __name__ == "__main__":
    sys.exit(main())
