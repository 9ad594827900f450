"""Extraction benchmark: time to extract + chunk 800 KB and 10 MiB uploads, and hostile files.

Writes bench/out/extraction.md with three tables:

1. extraction + chunking of short paragraphs (plain text, HTML, Markdown) at 800 KB and
   10 MiB, for the current code and (`--before REV`, default the commit before the linear
   rewrite) the code at REV loaded from git; the old code's 10 MiB runs take minutes, so they
   are only measured with `--before-10mib`;
2. hostile uploads (decompression-bomb PDF, 20,000 nested divs, deeply nested PDF arrays, a
   PDF over the page cap): outcome and time;
3. the local embedding model's throughput on the 10 MiB document's chunks and what that means
   for the django-q2 task timeout (a run that nears it continues in a new task); `--full`
   also indexes it end to end through `services.document_index` on the bench database.

    python -m bench.extraction [--before REV] [--before-10mib] [--full]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import types
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out" / "extraction.md"
BEFORE_REF = "0d26549"  # main before extraction became linear
SIZES = {"800 KB": 800 * 1000, "10 MiB": 10 * 1024 * 1024}
SAMPLE_PASSAGES = 256
SHORT = ""  # "Case <n>." paragraphs: the most blocks per byte, the slow case


def _current():
    from knowledge import extraction

    return extraction


def _before(ref: str):
    """The extraction module at git `ref`, imported under another name (None if unavailable)."""
    try:
        source = subprocess.run(  # noqa: S603 - fixed argv
            ["git", "show", f"{ref}:knowledge/extraction.py"],  # noqa: S607
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    if importlib.util.find_spec("bs4") is None:  # the old HTML path needs BeautifulSoup
        stub = types.ModuleType("bs4")
        stub.BeautifulSoup = stub.NavigableString = stub.Tag = None
        sys.modules["bs4"] = stub
    path = Path(tempfile.mkdtemp()) / "extraction_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("extraction_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    module.HAS_BS4 = sys.modules["bs4"].BeautifulSoup is not None
    return module


def _time(fn) -> tuple[float, object]:
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # the outcome is part of the report
        result = exc
    return time.perf_counter() - started, result


def measure_linear(before, *, before_10mib: bool) -> list[str]:
    from knowledge.chunking import chunk_document
    from knowledge.tests.poison import paragraphs

    current = _current()
    kinds = {"plain": current.PLAIN, "HTML": current.HTML, "Markdown": current.MARKDOWN}
    lines = [
        "| input | size | blocks | chunks | before: extract | after: extract | after: chunk |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for kind, content_type in kinds.items():
        for label, size in SIZES.items():
            data = paragraphs(size, html=kind == "HTML", sentence=SHORT)
            after_s, extracted = _time(
                partial(current.extract, data=data, content_type=content_type)
            )
            chunk_s, chunks = _time(partial(chunk_document, extracted))
            before_cell = "not run"
            runnable = before is not None and (kind != "HTML" or before.HAS_BS4)
            if runnable and (size < 1024 * 1024 or before_10mib):
                before_s, _ = _time(partial(before.extract, data=data, content_type=content_type))
                before_cell = f"{before_s:.2f} s"
            lines.append(
                f"| {kind} | {label} ({len(data):,} B) | {len(extracted.blocks):,} | "
                f"{len(chunks):,} | {before_cell} | {after_s:.2f} s | {chunk_s:.2f} s |"
            )
            print(lines[-1], flush=True)
    return lines


def measure_poison() -> list[str]:
    from knowledge.tests import poison

    current = _current()
    limits = current.Limits.within(seconds=120, max_chars=12_000_000, max_pages=1000)
    cases = [
        ("PDF inflating to 80 MB (FlateDecode)", poison.decompression_bomb_pdf(), current.PDF),
        ("HTML, 20,000 nested divs", poison.nested_divs_html(20_000), current.HTML),
        (
            "PDF, content stream with 50,000 nested arrays",
            poison.pdf_with_content(b"BT " + b"[" * 50_000 + b"(x)" + b"]" * 50_000 + b" TJ ET"),
            current.PDF,
        ),
        ("PDF, 1,001 pages (cap 1,000)", poison.text_pdf(pages=1001), current.PDF),
    ]
    lines = ["| upload | bytes | outcome | seconds |", "|---|---:|---|---:|"]
    for label, data, content_type in cases:
        seconds, outcome = _time(
            partial(current.extract, data=data, content_type=content_type, limits=limits)
        )
        text = (
            f"{type(outcome).__name__}: {outcome}"
            if isinstance(outcome, Exception)
            else f"extracted {len(outcome.text):,} characters"
        )
        lines.append(f"| {label} | {len(data):,} | {text} | {seconds:.2f} |")
        print(lines[-1], flush=True)
    return lines


def measure_embedding(*, full: bool) -> list[str]:
    from django.conf import settings

    from knowledge.chunking import chunk_document
    from knowledge.embeddings import embed_texts
    from knowledge.sentences import sentence_vectors_embed
    from knowledge.services import indexing
    from knowledge.tests.poison import paragraphs

    current = _current()
    data = paragraphs(SIZES["10 MiB"])
    drafts = chunk_document(current.extract(data=data, content_type=current.PLAIN))
    inputs = [indexing._embedding_input("Refunds", d) for d in drafts]
    embed_texts(inputs[:32])  # load and warm up, as a long-running worker has it
    sample = inputs[:SAMPLE_PASSAGES]
    texts = [d.text for d in drafts[:SAMPLE_PASSAGES]]

    def embed_as_indexing_does() -> None:  # the passages, then their sentences
        embed_texts(sample)
        sentence_vectors_embed(texts)

    seconds, _ = _time(embed_as_indexing_does)
    rate = len(sample) / seconds
    timeout = settings.Q_CLUSTER["timeout"]
    budget = 0.75 * timeout
    projected = len(drafts) / rate
    lines = [
        "| what | value |",
        "|---|---:|",
        f"| chunks of the 10 MiB plain-text document | {len(drafts):,} |",
        f"| embedding throughput ({settings.KNOWLEDGE_EMBEDDINGS_BACKEND}, "
        f"{len(sample)} passages and their sentences) | {rate:.1f} passages/s |",
        f"| projected embedding time for the document | {projected:.0f} s |",
        f"| django-q2 task timeout / a run continues in a new task after | {timeout} s / "
        f"{budget:.0f} s |",
        f"| projected task runs to index it | {-(-projected // budget):.0f} |",
    ]
    if full:
        lines.append(f"| end to end through services.document_index | {_index_full(data)} |")
    return lines


def _index_full(data: bytes) -> str:
    from django.core.files.base import ContentFile
    from django_q.brokers import get_broker
    from django_q.conf import Conf

    from knowledge import services
    from knowledge.models import Document
    from supportbot.models import Tenant
    from supportbot.services import Actor

    Conf.CLUSTER_NAME = "supportbot-bench"  # the upload enqueues here, not on the dev queue
    tenant, _ = Tenant.objects.get_or_create(slug="bench-extraction", defaults={"name": "x"})
    Document.objects.filter(tenant=tenant).delete()
    document = services.document_upload(
        tenant=tenant, file=ContentFile(data, name="big.txt"), actor=Actor.system("bench")
    )
    started, runs = time.perf_counter(), 0
    while not document.is_final and runs < 20:  # each run is one task, as the worker runs it
        get_broker().delete_queue()  # the continuation is run inline here
        document = services.document_index(document_id=document.pk, version=document.version)
        runs += 1
    get_broker().delete_queue()
    seconds = time.perf_counter() - started
    return f"{document.status} after {runs} task run(s), {seconds:.0f} s {document.error}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE_REF, help="git revision to compare with")
    parser.add_argument("--before-10mib", action="store_true", help="also time old code at 10 MiB")
    parser.add_argument("--full", action="store_true", help="index the 10 MiB file end to end")
    args = parser.parse_args(argv)
    if args.full:
        from bench.knowledge_search import bench_database_url, django_setup

        django_setup(bench_database_url())
    else:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
    before = _before(args.before)
    report = [
        "# Extraction benchmark",
        "",
        f"`python -m bench.extraction` on {os.cpu_count()} CPUs; before = `{args.before}`.",
        "",
        "## Extraction + chunking (paragraphs of `Case <n>.`, about 13 bytes each)",
        "",
        *measure_linear(before, before_10mib=args.before_10mib),
        "",
        "## Hostile uploads (limits: 120 s, 12,000,000 characters, 1,000 pages)",
        "",
        *measure_poison(),
        "",
        "## Embedding the 10 MiB document",
        "",
        *measure_embedding(full=args.full),
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(report) + "\n")
    print(f"\nwrote {OUT}")


if __name__ == "__main__":
    main()
