"""The churn benchmark against a real stack: steady chats lose no `answer.completed` while other
sessions connect and close around them (mid-answer included)."""

import json

import pytest

from bench import churn

pytestmark = [pytest.mark.slow, pytest.mark.process]


def test_steady_chats_lose_no_event_while_other_sessions_come_and_go(tmp_path):
    result = churn.main(
        ["--turns", "1000", "--steady", "8", "--churners", "8", "--cap", "600"]
        + ["--out", str(tmp_path)]
    )

    assert result["turns_lost"] == 0, result["lost"]
    assert result["turns_answered"] >= 1000, result
    assert not result["turn_errors"], result["turn_errors"]
    assert set(result["churn_sessions"]) == set(churn.CHURN_KINDS), result["churn_sessions"]
    assert result["churn_sessions_total"] >= 100, result
    assert "0 lost in 1000: met" in (tmp_path / "churn.md").read_text()
    assert json.loads((tmp_path / "churn.json").read_text())["turns_lost"] == 0
