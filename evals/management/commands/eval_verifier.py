"""Calibrate the answer verifier: acceptance of faithful and of unfaithful paraphrases."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from supportbot.errors import ApplicationError
from verification.calibration import Report, calibrate, triples_load


def _pct(pair: tuple[int, int]) -> str:
    ok, n = pair
    return f"{ok}/{n} ({ok / n:.0%})" if n else "-"


class Command(BaseCommand):
    help = (
        "Verifier calibration on a JSONL file of {passage, faithful, unfaithful, kind, split}: "
        "faithful accepted (want >= 90%), changed facts accepted per kind (want <= 3%)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--split", help="only this split (dev, held-out)")
        parser.add_argument("--show", action="store_true", help="print every wrong verdict")
        parser.add_argument("--json", dest="json_out", help="write every verdict here")

    def handle(self, *args, file: str, split: str | None, show: bool, json_out, **options):
        path = Path(file)
        if not path.exists():
            raise CommandError(f"No such file: {file}")
        try:
            triples = triples_load(path)
        except ApplicationError as exc:
            raise CommandError(exc.detail) from exc
        if split:
            triples = [t for t in triples if t.split == split]
            if not triples:
                raise CommandError(f"No triples in split {split!r}.")
        report = calibrate(triples)
        self._table(report)
        if show:
            for o in report.outcomes:
                t = o.triple
                if not o.faithful_accepted:
                    self.stdout.write(
                        f"- {t.id} faithful REJECTED: {t.faithful!r} {o.faithful_reasons}"
                    )
                if o.unfaithful_accepted:
                    self.stdout.write(f"- {t.id} {t.kind} change ACCEPTED: {t.unfaithful!r}")
        if json_out:
            rows = [
                {
                    **vars(o.triple),
                    "faithful_accepted": o.faithful_accepted,
                    "unfaithful_accepted": o.unfaithful_accepted,
                    "faithful_reasons": o.faithful_reasons,
                    "unfaithful_reasons": o.unfaithful_reasons,
                }
                for o in report.outcomes
            ]
            Path(json_out).write_text(json.dumps(rows, indent=1, ensure_ascii=False))

    def _table(self, report: Report) -> None:
        splits = report.by("split")
        columns = [("all", report.outcomes)] + ([] if len(splits) < 2 else list(splits.items()))
        self.stdout.write("| | " + " | ".join(name for name, _ in columns) + " |")
        self.stdout.write("|---" * (len(columns) + 1) + "|")

        def row(label: str, pick) -> None:
            self.stdout.write(
                f"| {label} | " + " | ".join(pick(rows) for _, rows in columns) + " |"
            )

        row("triples", lambda rows: str(len(rows)))
        row("faithful accepted", lambda rows: _pct(report.rate(rows, "faithful")))
        row("changed fact accepted (all kinds)", lambda rows: _pct(report.rate(rows, "unfaithful")))
        row(
            "another passage's faithful accepted (control)",
            lambda rows: _pct((sum(o.unrelated_accepted for o in rows), len(rows))),
        )
        for kind in report.by("kind"):
            row(
                f"  changed {kind} accepted",
                lambda rows, k=kind: _pct(
                    report.rate([o for o in rows if o.triple.kind == k], "unfaithful")
                ),
            )
        self.stdout.write(
            f"\nCheck cost: {report.ms_per_sentence:.1f} ms per sentence "
            f"({report.sentences} sentences; sentence embedding included, passage embedding "
            "excluded)"
        )
