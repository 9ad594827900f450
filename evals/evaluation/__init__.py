"""Answer evaluation: labelled question sets run through the real orchestrator, then scored.

Modules: `cases` (the eval file format and its loader), `corpus` (a set's knowledge loaded as
a tenant of its own through the normal upload and indexing path), `runner` (one fresh
conversation per case, every turn through `handle_customer_message`), `metrics` (key facts,
per-set summary).
"""

from evals.evaluation.cases import Case, EvalSet, eval_set_load
from evals.evaluation.corpus import corpus_tenant_load
from evals.evaluation.metrics import key_fact_found, normalize, percentile, summarize
from evals.evaluation.runner import CaseResult, run_all, run_case, unsupported_sentences

__all__ = [
    "Case",
    "CaseResult",
    "EvalSet",
    "corpus_tenant_load",
    "eval_set_load",
    "key_fact_found",
    "normalize",
    "percentile",
    "run_all",
    "run_case",
    "summarize",
    "unsupported_sentences",
]
