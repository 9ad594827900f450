"""Calibration: the committed set, the eval_verifier command, SmolLM2's real output."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from supportbot.errors import ApplicationError
from verification import verify_answer
from verification.calibration import calibrate, triples_load

DATA = Path(__file__).resolve().parent.parent / "data" / "calibration.jsonl"
KINDS = {"number", "negation", "condition", "name", "scope"}
SPLITS = ("dev", "held-out-1", "held-out-2", "held-out-3")
OPENED = "Opened items can be returned within 30 days for store credit only."


def test_the_committed_calibration_set_has_both_splits_and_every_change_kind():
    triples = triples_load(DATA)
    assert len(triples) >= 100
    assert {t.split for t in triples} == set(SPLITS)
    assert {t.kind for t in triples} == KINDS
    for split in SPLITS:
        assert {t.kind for t in triples if t.split == split} == KINDS
    assert {t.source.split(":")[0] for t in triples} == {"demo", "python-faq"}
    assert all(t.faithful != t.unfaithful for t in triples)


@pytest.mark.parametrize(
    "answer",
    [
        "Yes, you can return opened headphones after 20 days.",  # the captured vLLM stream
        "Yes, you can return opened items for a full refund.",
        "Opened items can be returned within 60 days for store credit only.",
        "Opened items can never be returned.",
        "All items can be returned within 30 days for store credit only.",
        "Opened items can be returned within 30 days for cash.",
    ],
)
def test_smollm2_style_changed_facts_are_rejected(answer):
    assert verify_answer(answer, [OPENED]).supported == []


def test_a_faithful_rewording_of_the_same_passage_passes():
    result = verify_answer(
        "You can return opened items within 30 days, for store credit only.", [OPENED]
    )
    assert len(result.supported) == 1


def _write(tmp_path, rows) -> Path:
    path = tmp_path / "calibration.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


ROWS = [
    {
        "passage": OPENED,
        "faithful": "You can return opened items within 30 days, for store credit only.",
        "unfaithful": "You can return opened items within 90 days, for store credit only.",
        "kind": "number",
        "split": "dev",
    },
    {
        "passage": "Gift cards never expire and have no fees.",
        "faithful": "Gift cards don't expire and come without fees.",
        "unfaithful": "Gift cards expire and come without fees.",
        "kind": "negation",
        "split": "held-out",
    },
]


def test_calibrate_counts_each_verdict_and_the_unrelated_control(tmp_path):
    report = calibrate(triples_load(_write(tmp_path, ROWS)))
    assert report.rate(report.outcomes, "faithful") == (2, 2)
    assert report.rate(report.outcomes, "unfaithful") == (0, 2)
    assert not any(o.unrelated_accepted for o in report.outcomes)
    assert report.sentences == 4


def test_eval_verifier_reports_per_split_and_kind(tmp_path):
    out = StringIO()
    verdicts = tmp_path / "verdicts.json"
    call_command("eval_verifier", str(_write(tmp_path, ROWS)), "--json", str(verdicts), stdout=out)
    text = out.getvalue()
    assert "| faithful accepted | 2/2 (100%) | 1/1 (100%) | 1/1 (100%) |" in text
    assert "changed negation accepted | 0/1 (0%)" in text
    assert "ms per sentence" in text
    assert len(json.loads(verdicts.read_text())) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json\n", "line 1: not JSON"),
        ('{"passage": "p", "faithful": "f"}\n', "'unfaithful'"),
        ("[1, 2]\n", "expected an object"),
        ('{"passage": "", "faithful": "f", "unfaithful": "u"}\n', "'passage'"),
        ("\n\n", "no triples"),
    ],
)
def test_a_bad_calibration_file_is_refused_naming_the_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ApplicationError, match=message):
        triples_load(path)
    with pytest.raises(CommandError, match=message):
        call_command("eval_verifier", str(path))


def test_bad_bytes_are_refused_not_crashed(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(CommandError, match="UTF-8"):
        call_command("eval_verifier", str(path))
