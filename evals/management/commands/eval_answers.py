"""Run labelled question sets through the real orchestrator and print their figures side by side.

`manage.py eval_answers` runs every registered set (the demo help center, the development sets
`dev-*` and the held-out ones: the Python FAQ, `heldout-*`); `--corpus NAME` picks sets by
name; positional FILE arguments run other eval files. Held-out sets are run only once a change
has been chosen on the development sets, and never tuned on.
"""

import asyncio
import json
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.test.utils import override_settings

from conversations import services
from evals import evaluation
from supportbot.errors import ApplicationError

CORPORA = {
    "demo": Path(settings.BASE_DIR) / "demo" / "helpcenter" / "eval_answers.json",
    # The development set answers are tuned on (with the demo); python-faq is held out.
    "dev-faq": Path(settings.BASE_DIR) / "demo" / "dev_faq" / "eval_answers.json",
    "dev-debian": Path(settings.BASE_DIR) / "demo" / "dev_debian_faq" / "eval_answers.json",
    # Long entries (several paragraphs with code between them), like the held-out FAQ's.
    "dev-sqlalchemy": Path(settings.BASE_DIR) / "demo" / "dev_sqlalchemy_faq" / "eval_answers.json",
    # Celery FAQ (mostly short entries, code between paragraphs) + two long user-guide pages.
    "dev-celery": Path(settings.BASE_DIR) / "demo" / "dev_celery_faq" / "eval_answers.json",
    # Not Sphinx: AsciiDoc manual pages (FAQ entries in <dt>/<dd>) and the DocBook user manual.
    "dev-git": Path(settings.BASE_DIR) / "demo" / "dev_git_faq" / "eval_answers.json",
    # sqlite.org's hand-written HTML: FAQ questions as bold paragraphs, answers in blockquotes.
    "dev-sqlite": Path(settings.BASE_DIR) / "demo" / "dev_sqlite_faq" / "eval_answers.json",
    # Fetchmail's hand-written XHTML FAQ: one long page, 119 <h2> questions coded G1..O17.
    "dev-fetchmail": Path(settings.BASE_DIR) / "demo" / "dev_fetchmail_faq" / "eval_answers.json",
    # nano: a hand-written HTML FAQ (<h3> questions) + the Texinfo manual (long <dl> lists).
    "dev-nano": Path(settings.BASE_DIR) / "demo" / "dev_nano_docs" / "eval_answers.json",
    # The Z-shell FAQ: one plain-text file (YODL's text output), "N.M:" headings, indented code.
    "dev-zsh": Path(settings.BASE_DIR) / "demo" / "dev_zsh_faq" / "eval_answers.json",
    # CUPS help pages: hand-written HTML how-tos (<pre> commands, <dl>/<ul> options, URI tables).
    "dev-cups": Path(settings.BASE_DIR) / "demo" / "dev_cups_help" / "eval_answers.json",
    # Podman docs in Markdown: a troubleshooting list (### N) entries, Symptom/Solution, fences)
    # + the rootless tutorial (#-#### headings, lists, config-file code blocks).
    "dev-podman": Path(settings.BASE_DIR) / "demo" / "dev_podman_docs" / "eval_answers.json",
    # Privoxy FAQ + two user-manual chapters: DocBook DSSSL HTML 4.01 (upper-case tags, H1/H3
    # entries, Prev/Next tables, <pre> inside one-cell layout tables, a CALS table).
    "dev-privoxy": Path(settings.BASE_DIR) / "demo" / "dev_privoxy_docs" / "eval_answers.json",
    # KeePassXC Getting Started Guide + User Guide: Asciidoctor HTML, 2.2 and 4.7 MB (base64
    # screenshots), admonitions as icon-cell tables; the user guide repeats most of the guide.
    "dev-keepassxc": Path(settings.BASE_DIR) / "demo" / "dev_keepassxc_docs" / "eval_answers.json",
    "python-faq": Path(settings.BASE_DIR) / "demo" / "python_faq" / "eval_answers.json",
    # Issue 31: four kinds of corpora that are not FAQs, two to develop on, two held out.
    # The fish shell's tutorial + its guide for bash users (Sphinx HTML): a step-by-step tutorial.
    "dev-fish": Path(settings.BASE_DIR) / "demo" / "dev_fish_tutorial" / "eval_answers.json",
    # Evince's help: a help center of 43 short task articles (Mallard rendered to HTML).
    "dev-evince": Path(settings.BASE_DIR) / "demo" / "dev_evince_help" / "eval_answers.json",
    # HELD OUT: run only after a change is chosen on the development sets, never tuned on,
    # per-case results not read. ffprobe + ffplay manuals (makeinfo HTML): a reference manual.
    "heldout-ffmpeg": Path(settings.BASE_DIR)
    / "demo"
    / "heldout_ffmpeg_reference"
    / "eval_answers.json",
    # HELD OUT, as above. rsyslog's Troubleshooting chapter (Sphinx HTML): symptom -> fix.
    "heldout-rsyslog": Path(settings.BASE_DIR)
    / "demo"
    / "heldout_rsyslog_troubleshooting"
    / "eval_answers.json",
}


def _frac(pair: tuple[int, int]) -> str:
    ok, n = pair
    return f"{ok}/{n} ({ok / n:.0%})" if n else "-"


def _ms(value: float | None) -> str:
    return f"{value:.0f} ms" if value is not None else "-"


def summary_rows(summary: dict, elapsed: float) -> list[tuple[str, str]]:
    """The table rows of one set's summary, in report order."""
    return [
        ("in-scope: right source cited", _frac(summary["in_scope_source"])),
        ("in-scope: key fact in the reply text", _frac(summary["in_scope_key_fact"])),
        ("in-scope: correct (source + must-contain)", _frac(summary["in_scope_correct"])),
        ("  of which hedged (weak evidence, asks back)", str(summary["in_scope_hedged"])),
        ("follow-ups answered (key fact, 2nd turn)", _frac(summary["follow_up_key_fact"])),
        ("follow-ups: right source (2nd turn)", _frac(summary["follow_up_source"])),
        (
            "  control: 2nd turn asked alone, key fact",
            _frac(summary["follow_up_alone_key_fact"]),
        ),
        ("out-of-scope refused or handed off", _frac(summary["out_of_scope_declined"])),
        (
            "  of which adjacent (near the corpus) refused",
            _frac(summary["out_of_scope_adjacent_declined"]),
        ),
        ("tricky (numbers, dates, exceptions) correct", _frac(summary["tricky_correct"])),
        ("unsupported claims delivered", str(summary["unsupported_delivered"])),
        (
            "TTFT p50 / p95 (answers)",
            f"{_ms(summary['ttft_p50_ms'])} / {_ms(summary['ttft_p95_ms'])}",
        ),
        ("reply kinds", ", ".join(f"{k}={v}" for k, v in sorted(summary["kinds"].items()))),
        ("wall time", f"{elapsed:.1f} s"),
    ]


class Command(BaseCommand):
    help = (
        "Evaluate answers per corpus: right source, key fact in the reply, follow-ups, "
        "refusals, unsupported claims, TTFT."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="*", help="eval files (default: the --corpus sets)")
        parser.add_argument(
            "--corpus",
            action="append",
            choices=sorted(CORPORA),
            help="a registered set to run (repeatable; default: all of them)",
        )
        parser.add_argument("--limit", type=int, default=0, help="first N cases of each set")
        parser.add_argument("--show", action="store_true", help="print every wrong case")
        parser.add_argument("--json", dest="json_out", help="write every case's result here")
        parser.add_argument(
            "--use-cache",
            action="store_true",
            help="let cached answers serve (default: measure the whole pipeline every time)",
        )

    def handle(self, *args, files, corpus, limit, show, json_out, use_cache, **options):
        paths = [(Path(f).parent.name, Path(f)) for f in files]
        if corpus or not files:
            paths += [(name, CORPORA[name]) for name in (corpus or sorted(CORPORA))]
        sets = []
        for name, path in paths:
            if not path.exists():
                raise CommandError(f"No such file: {path}")
            try:
                sets.append(evaluation.eval_set_load(path, name=name))
            except ApplicationError as exc:
                raise CommandError(exc.detail) from exc
        columns, records = [], {}
        for eval_set in sets:
            rows, results = self._run_set(eval_set, limit=limit, use_cache=use_cache)
            columns.append((eval_set.name, rows))
            records[eval_set.name] = [r.as_dict() for r in results]
            if show:
                self._show(results)
        self.stdout.write("")
        header = "| metric | " + " | ".join(name for name, _ in columns) + " |"
        self.stdout.write(header)
        self.stdout.write("|---" * (len(columns) + 1) + "|")
        for i, (metric, _) in enumerate(columns[0][1]):
            values = " | ".join(rows[i][1] for _, rows in columns)
            self.stdout.write(f"| {metric} | {values} |")
        if json_out:
            Path(json_out).write_text(json.dumps(records, indent=1, ensure_ascii=False))
            self.stdout.write(f"Results written to {json_out}")

    def _run_set(self, eval_set, *, limit: int, use_cache: bool):
        try:
            load = evaluation.corpus_tenant_load(
                slug=eval_set.tenant_slug, manifest_path=eval_set.corpus
            )
        except ApplicationError as exc:
            raise CommandError(exc.detail) from exc
        if load.failed:
            raise CommandError(f"{eval_set.name}: documents failed to index: {load.failed}")
        cases = eval_set.cases[:limit] if limit else eval_set.cases
        # Members' questions about member-only documents need a member (a non-member correctly
        # never sees those): the evaluation customer holds every segment the set names.
        customer = services.customer_get_or_create_verified(
            tenant=load.tenant, external_id="eval-runner", name="Evaluation"
        )
        customer.segments = sorted({s for c in cases for s in c.segments})
        customer.save(update_fields=["segments"])
        self.stdout.write(
            f"[{eval_set.name}] tenant {eval_set.tenant_slug!r}: {load.created} documents "
            f"uploaded, {load.changed} changed; running {len(cases)} cases"
        )
        started = time.monotonic()
        with override_settings(ANSWER_CACHE_ENABLED=use_cache):
            results, mode = asyncio.run(
                evaluation.run_all(tenant=load.tenant, cases=cases, customer=customer)
            )
        self.stdout.write(f"[{eval_set.name}] answer path: {mode}")
        summary = evaluation.summarize(results)
        return summary_rows(summary, time.monotonic() - started), results

    def _show(self, results) -> None:
        for r in results:
            if r.correct and r.key_fact is not False and not r.unsupported:
                continue
            turns = " / ".join(repr(q) for q in [*r.case.before, r.case.question])
            self.stdout.write(
                f"- [{r.case.category}] {turns}: {r.reason} "
                f"{'UNSUPPORTED ' + str(r.unsupported) if r.unsupported else ''}\n"
                f"    -> {r.text[:240]!r}"
            )
