import json

import pytest
from django.core.management import CommandError, call_command

from knowledge.evaluation import Question, evaluate

from .conftest import HELPCENTER


@pytest.mark.slow
def test_hybrid_meets_the_recall_bar_on_the_demo_help_center(tenant, demo_helpcenter):
    spec = json.loads((HELPCENTER / "eval_questions.json").read_text())
    assert len(spec["questions"]) >= 40
    reports = {
        r.mode: r
        for r in evaluate(
            tenant=tenant, questions=[Question.from_dict(q) for q in spec["questions"]]
        )
    }
    hybrid = reports["hybrid"].recall_at(5)
    assert hybrid >= 0.9, reports["hybrid"].misses
    assert hybrid >= max(reports["fulltext"].recall_at(5), reports["vector"].recall_at(5))
    assert reports["hybrid"].mrr >= reports["fulltext"].mrr


def test_eval_command_refuses_when_documents_are_not_ready(tenant, tmp_path):
    spec = tmp_path / "q.json"
    spec.write_text(json.dumps({"tenant": tenant.slug, "questions": []}))
    with pytest.raises(CommandError, match="ready"):
        call_command("eval_retrieval", str(spec))
