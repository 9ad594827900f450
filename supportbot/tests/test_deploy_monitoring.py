"""deploy/prometheus and deploy/grafana: promtool accepts the rules and their unit tests
pass, and every metric they name is one Supportbot or vLLM actually exports."""

import json
import re
import subprocess

import pytest
import yaml
from prometheus_client import REGISTRY

from chat import metrics as chat_metrics  # noqa: F401 - registers the chat metrics
from handoffs.metrics import HandoffQueueCollector
from inference.telemetry import worker_registry_collector, yield_collector
from inference.tests.replay_server import METRICS_FIXTURE
from supportbot.tests.deploytools import DEPLOY, require_tool

PROM = DEPLOY / "prometheus"
NAME = re.compile(r"\b(supportbot_[a-z0-9_]+|vllm:[a-z0-9_]+)")
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def exported() -> set[str]:
    """Sample names Supportbot's /metrics can carry, and vLLM's (the captured scrape)."""
    names = set()
    registries = [REGISTRY, worker_registry_collector([]), yield_collector([])]
    families = [f for registry in registries for f in registry.collect()]
    families += HandoffQueueCollector().describe()  # its samples need the database
    for family in families:
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES)
    for line in METRICS_FIXTURE.read_text().splitlines():
        if line.startswith("vllm:"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def _alert_exprs() -> list[str]:
    doc = yaml.safe_load((PROM / "alerts.yaml").read_text())
    return [rule["expr"] for group in doc["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    doc = json.loads((DEPLOY / "grafana" / "dashboard.json").read_text())
    return [t["expr"] for panel in doc["panels"] for t in panel["targets"]]


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_every_metric_named_is_exported(source):
    exprs = _alert_exprs() if source == "alerts" else _dashboard_exprs()
    known = exported()
    named = {n for expr in exprs for n in NAME.findall(expr)}
    assert named, "no metric found: the pattern is broken"
    recorded = {r for r in named if r.startswith("supportbot:")}
    assert named - recorded - known == set()


def test_the_exported_name_check_catches_a_typo():
    assert "supportbot_chat_turns_total" in exported()
    assert "supportbot_chat_turn_total" not in exported()
    assert "vllm:kv_cache_usage_perc" in exported()


def test_alerts_cover_the_seed_targets():
    doc = yaml.safe_load((PROM / "alerts.yaml").read_text())
    names = {rule.get("alert") for group in doc["groups"] for rule in group["rules"]}
    for wanted in (
        "SupportbotFirstWordsSlow",
        "SupportbotInferenceErrorRateHigh",
        "SupportbotModelQueueWaitHigh",
        "SupportbotKVCacheNearlyFull",
        "SupportbotHandoffQueueOld",
        "SupportbotAvailabilityBudgetFastBurn",
        "SupportbotAvailabilityBudgetSlowBurn",
    ):
        assert wanted in names


@pytest.mark.process
def test_promtool_accepts_the_rules():
    promtool = require_tool("promtool")
    done = subprocess.run(  # noqa: S603 - the installed promtool
        [promtool, "check", "rules", "alerts.yaml"],
        cwd=PROM,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


@pytest.mark.process
def test_the_rules_fire_on_their_unit_test_series():
    promtool = require_tool("promtool")
    done = subprocess.run(  # noqa: S603 - the installed promtool
        [promtool, "test", "rules", "alerts.test.yaml"],
        cwd=PROM,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


@pytest.mark.process
def test_promtool_rejects_a_broken_rule(tmp_path):
    promtool = require_tool("promtool")
    broken = (
        (PROM / "alerts.yaml")
        .read_text()
        .replace(
            "max(supportbot_handoff_queue_oldest_age_seconds) > 600",
            "max(supportbot_handoff_queue_oldest_age_seconds > 600",
        )
    )
    (tmp_path / "alerts.yaml").write_text(broken)
    done = subprocess.run(  # noqa: S603 - the installed promtool
        [promtool, "check", "rules", "alerts.yaml"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0


def test_dashboard_is_grafana_json_with_a_datasource_variable():
    doc = json.loads((DEPLOY / "grafana" / "dashboard.json").read_text())
    assert doc["uid"] == "supportbot-overview"
    assert [v["name"] for v in doc["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"] for p in doc["panels"])
    for word in ("First words", "error ratio", "Queue wait", "KV cache", "Handoff queue"):
        assert word in titles
