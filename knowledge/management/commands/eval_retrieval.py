import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from knowledge.evaluation import Question, embedding_latencies, evaluate, percentile
from knowledge.models import Document
from supportbot.errors import NotFound
from supportbot.selectors import tenant_get


class Command(BaseCommand):
    help = (
        "Evaluate retrieval on a labelled question set (JSON: tenant, questions[q, document, "
        "heading, segments?]): recall@1/@5, MRR, p50/p95 latency for full text, vector, hybrid."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", help="Tenant slug (default: the file's 'tenant').")
        parser.add_argument("--show-misses", action="store_true")

    def handle(self, *args, **options):
        spec = json.loads(options["file"].read_text())
        try:
            tenant = tenant_get(slug=options["tenant"] or spec["tenant"])
        except NotFound as exc:
            raise CommandError(exc.detail) from exc
        not_ready = Document.objects.filter(tenant=tenant).exclude(status=Document.Status.READY)
        if not Document.objects.filter(tenant=tenant).exists() or not_ready.exists():
            names = ", ".join(f"{d.title} ({d.status})" for d in not_ready) or "no documents"
            raise CommandError(
                f"Not every document of {tenant.slug} is ready: {names}. "
                "Run `manage.py qcluster` (or `make run`) until indexing finishes."
            )
        questions = [Question.from_dict(item) for item in spec["questions"]]
        reports = evaluate(tenant=tenant, questions=questions)
        self.stdout.write(f"{len(questions)} questions, tenant {tenant.slug}\n")
        self.stdout.write(
            f"{'mode':<10} {'recall@1':>9} {'recall@5':>9} {'MRR':>6} {'p50 ms':>8} {'p95 ms':>8}"
        )
        for r in reports:
            self.stdout.write(
                f"{r.mode:<10} {r.recall_at(1):>9.3f} {r.recall_at(5):>9.3f} {r.mrr:>6.3f} "
                f"{r.latency(50):>8.1f} {r.latency(95):>8.1f}"
            )
        embeds = embedding_latencies([q.q for q in questions])
        self.stdout.write(
            "\nLatency is search time after the query embedding; one uncached query embedding "
            f"took p50 {percentile(embeds, 50):.1f} ms, p95 {percentile(embeds, 95):.1f} ms."
        )
        if options["show_misses"]:
            for r in reports:
                for miss in r.misses:
                    self.stdout.write(f"  miss@5 [{r.mode}] {miss}")
