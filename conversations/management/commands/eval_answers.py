"""Run a labelled question set through the real orchestrator and print the score table."""

import asyncio
import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from conversations import evaluation, services
from knowledge.models import Document
from knowledge.services import document_index
from supportbot.models import Tenant


def load_cases(path: Path) -> tuple[str, list[evaluation.Case]]:
    data = json.loads(path.read_text())
    cases = []
    source = data.get("in_scope_from")
    if source:
        retrieval = json.loads((path.parent / source).read_text())
        cases += [
            evaluation.Case(
                question=q["q"], expect="answer", document=q["document"], heading=q.get("heading")
            )
            for q in retrieval["questions"]
        ]
    for raw in data.get("cases", []):
        cases.append(
            evaluation.Case(
                question=raw["q"],
                expect=raw["expect"],
                document=raw.get("document"),
                must_contain=raw.get("must_contain", []),
                must_not_contain=raw.get("must_not_contain", []),
                category=raw.get("category", "in_scope" if raw["expect"] == "answer" else "out"),
            )
        )
    return data["tenant"], cases


class Command(BaseCommand):
    help = "Evaluate answers: correct sources, declines, unsupported claims, TTFT."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--limit", type=int, default=0)
        parser.add_argument("--show", action="store_true", help="print every wrong case")
        parser.add_argument(
            "--use-cache",
            action="store_true",
            help="let cached answers serve (default: measure the whole pipeline every time)",
        )

    def handle(self, *args, file: str, limit: int, show: bool, use_cache: bool, **options):
        path = Path(file)
        if not path.exists():
            raise CommandError(f"No such file: {file}")
        slug, cases = load_cases(path)
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant {slug!r}; run `manage.py seed_demo` first.")
        for document in Document.objects.filter(tenant=tenant).exclude(status="ready"):
            document_index(document_id=document.pk, version=document.version)
        if limit:
            cases = cases[:limit]
        # A verified Summit Club member: the set has members' questions about member-only
        # documents (a non-member correctly never sees those).
        customer = services.customer_get_or_create_verified(
            tenant=tenant, external_id="eval-runner", name="Evaluation"
        )
        customer.segments = ["summit-club"]
        customer.save(update_fields=["segments"])
        self.stdout.write(f"Running {len(cases)} questions for {slug!r}")
        started = time.monotonic()
        with override_settings(ANSWER_CACHE_ENABLED=use_cache):
            results, mode = asyncio.run(
                evaluation.run_all(tenant=tenant, cases=cases, customer=customer)
            )
        self.stdout.write(f"Answer path: {mode}")
        summary = evaluation.summarize(results)
        elapsed = time.monotonic() - started

        def frac(pair):
            ok, n = pair
            return f"{ok}/{n} ({ok / n:.0%})" if n else "-"

        def ms(v):
            return f"{v:.0f} ms" if v is not None else "-"

        rows = [
            ("in-scope answered with the right source", frac(summary["in_scope_correct"])),
            ("  of which hedged (weak evidence, asks back)", str(summary["in_scope_hedged"])),
            ("out-of-scope refused or handed off", frac(summary["out_of_scope_declined"])),
            ("tricky (numbers, dates, exceptions) correct", frac(summary["tricky_correct"])),
            ("unsupported claims delivered", str(summary["unsupported_delivered"])),
            (
                "TTFT p50 / p95 (answers)",
                f"{ms(summary['ttft_p50_ms'])} / {ms(summary['ttft_p95_ms'])}",
            ),
            ("reply kinds", ", ".join(f"{k}={v}" for k, v in sorted(summary["kinds"].items()))),
            ("wall time", f"{elapsed:.1f} s"),
        ]
        width = max(len(r[0]) for r in rows)
        self.stdout.write("| metric | value |\n|---|---|")
        for name, value in rows:
            self.stdout.write(f"| {name.ljust(width)} | {value} |")
        if show:
            for r in results:
                if not r.correct or r.unsupported:
                    self.stdout.write(
                        f"- [{r.case.expect}] {r.case.question!r}: {r.reason} "
                        f"{'UNSUPPORTED ' + str(r.unsupported) if r.unsupported else ''}\n"
                        f"    -> {r.text[:200]!r}"
                    )
