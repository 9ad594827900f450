"""Prompt-injection corpus: messages and documents that try to make the bot leak or act, against
a model that obeys them.

`injection_run` builds a scratch world — tenant A with a help center that includes poisoned
documents and an agents-only document, an order system (the reference order service), another
customer of A, and tenant B with its own documents and customers, each secret carrying a
marker — then sends every case through the real chat path as an anonymous visitor or a
verified customer of A, with an obedient model as the product's only inference worker, and
checks what reached the customer, the action ledger and the order system (`checks`).

`manage.py injection_report` writes docs/reports/prompt-injection.md; the test runs the same
corpus and fails on any violation.

Modules: `corpus` (documents and cases), `model` (the obedient model server), `world` (the
scratch tenants and the order system), `checks`, `run` (the cases through the chat path),
`report` (markdown).
"""

from evals.injection.checks import Observed, action_violation, case_violations, word_runs
from evals.injection.corpus import CASES, SYSTEM_FRAGMENTS, InjectionCase
from evals.injection.model import ObedientModel
from evals.injection.report import injection_report, injection_report_markdown
from evals.injection.run import InjectionResult, InjectionRun, injection_run
from evals.injection.world import OrderSystem, World, world_build

__all__ = [
    "CASES",
    "SYSTEM_FRAGMENTS",
    "InjectionCase",
    "InjectionResult",
    "InjectionRun",
    "ObedientModel",
    "Observed",
    "OrderSystem",
    "World",
    "action_violation",
    "case_violations",
    "injection_report",
    "injection_report_markdown",
    "injection_run",
    "word_runs",
    "world_build",
]
