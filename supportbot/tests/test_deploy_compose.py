"""deploy/compose.yaml: `docker-compose config` accepts it with the example env files, and the
pieces the design asks for are there (proxy, replicas, GPU, health checks, volumes)."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from supportbot.tests.deploytools import DEPLOY, require_tool


def _project(tmp_path: Path, *, drop: tuple[str, ...] = ()) -> Path:
    """A copy of deploy/ with each `*.env.example` copied to the name compose reads."""
    target = tmp_path / "deploy"
    shutil.copytree(DEPLOY, target)
    for example in target.glob("*.example"):
        text = "".join(
            line
            for line in example.read_text().splitlines(keepends=True)
            if not line.startswith(drop)
        )
        example.with_suffix("").write_text(text)
    return target


def _config(project: Path) -> subprocess.CompletedProcess:
    compose = require_tool("docker-compose")
    return subprocess.run(  # noqa: S603 - the installed compose binary
        [compose, "-f", "compose.yaml", "config"],
        cwd=project,
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> dict:
    done = _config(_project(tmp_path_factory.mktemp("compose")))
    assert done.returncode == 0, done.stderr.decode()
    return yaml.safe_load(done.stdout)


def test_compose_config_accepts_the_file(config):
    assert {"proxy", "web", "worker", "migrate", "postgres", "valkey", "vllm", "orders"} <= set(
        config["services"]
    )


@pytest.mark.process
def test_compose_refuses_to_start_without_the_database_password(tmp_path):
    done = _config(_project(tmp_path, drop=("POSTGRES_PASSWORD",)))
    assert done.returncode != 0
    assert b"POSTGRES_PASSWORD" in done.stderr


@pytest.mark.process
def test_compose_rejects_a_broken_file(tmp_path):
    project = _project(tmp_path)
    text = (
        (project / "compose.yaml")
        .read_text()
        .replace("replicas: ${WEB_REPLICAS:-3}", "replicas: [three]")
    )
    (project / "compose.yaml").write_text(text)
    assert _config(project).returncode != 0


def test_web_replicas_sit_behind_a_websocket_upgrading_proxy(config):
    web = config["services"]["web"]
    assert web["deploy"]["replicas"] >= 2
    assert web["command"] == ["web"]
    proxy = config["services"]["proxy"]
    sources = [v["source"] if isinstance(v, dict) else v.split(":")[0] for v in proxy["volumes"]]
    conf_path = next(source for source in sources if "nginx" in source)
    conf = Path(conf_path).read_text()
    assert "proxy_set_header Upgrade $http_upgrade" in conf
    assert "proxy_set_header Connection $connection_upgrade" in conf
    assert "location /ws/" in conf
    assert "proxy_buffering off" in conf  # SSE answers stream


def test_vllm_reserves_a_gpu_and_the_app_discovers_it_by_dns(config):
    vllm = config["services"]["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai:")
    devices = vllm["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    env = config["services"]["web"]["environment"]
    assert env["INFERENCE_DISCOVERY"].startswith("dns://vllm:8000")
    assert config["services"]["postgres"]["image"].startswith("pgvector/pgvector:")
    assert config["services"]["valkey"]["image"].startswith("valkey/valkey:")


def test_long_running_services_have_health_checks_and_state_is_in_named_volumes(config):
    for name, service in config["services"].items():
        if name != "migrate":
            assert "healthcheck" in service, name
    assert config["services"]["migrate"]["command"] == ["migrate"]
    assert (
        config["services"]["web"]["depends_on"]["migrate"]["condition"]
        == "service_completed_successfully"
    )
    assert {"pgdata", "valkeydata", "media", "models"} <= set(config["volumes"])


def test_secrets_live_only_in_the_example_env_files():
    text = (DEPLOY / "compose.yaml").read_text()
    assert "DJANGO_SECRET_KEY" not in text
    assert "change-me" not in text
    for example in DEPLOY.glob("*.example"):
        for line in example.read_text().splitlines():
            if any(word in line for word in ("SECRET", "PASSWORD", "TOKEN=")):
                assert line.startswith("#") or "change-me" in line, line
