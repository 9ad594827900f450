"""The Dockerfile's structure and the image's entry points (run here for real, outside a
container: the same script with this checkout's interpreter)."""

import base64
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from dockerfile_parse import DockerfileParser

from demo.orders.testing import free_port
from supportbot.tests.deploytools import DEPLOY, ROOT

ENTRYPOINT = DEPLOY / "entrypoint.sh"


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    parser = DockerfileParser(path=str(ROOT / "Dockerfile"))
    assert parser.structure, "the Dockerfile parses to nothing"
    return parser


def _stages(parser: DockerfileParser) -> dict[str, list[dict]]:
    stages: dict[str, list[dict]] = {}
    current = None
    for item in parser.structure:
        if item["instruction"] == "FROM":
            current = item["value"].split()[-1]
            stages[current] = []
        elif current is not None:
            stages[current].append(item)
    return stages


def test_image_is_multi_stage_and_runs_as_a_non_root_user(dockerfile):
    stages = _stages(dockerfile)
    assert {"build", "static", "runtime", "vllm-cpu"} <= set(stages)
    for name in ("runtime", "vllm-cpu"):
        users = [i["value"] for i in stages[name] if i["instruction"] == "USER"]
        assert users, f"stage {name} never leaves root"
        assert users[-1].split(":")[0] not in ("root", "0")
    runtime = stages["runtime"]
    assert any(i["instruction"] == "ENTRYPOINT" and "entrypoint.sh" in i["value"] for i in runtime)
    copies = [i["value"] for i in runtime if i["instruction"] == "COPY"]
    assert any("--from=build" in c and "/opt/venv" in c for c in copies)
    assert any("--from=static" in c and "staticfiles" in c for c in copies)


def test_registry_free_containerfile_mirrors_the_runtime_stage(dockerfile):
    """deploy/image/Containerfile (`make image-check`, built from a debootstrapped base) must
    give the same runtime as the Dockerfile: same Env, user, entry point, copies and ports. Its
    base brings libpq5, tini and curl from debootstrap instead of the runtime stage's apt-get."""
    ours = DockerfileParser(fileobj=io.BytesIO((DEPLOY / "image" / "Containerfile").read_bytes()))
    theirs, mine = _stages(dockerfile)["runtime"], _stages(ours)["runtime"]

    def kept(items: list[dict], instruction: str) -> list[str]:
        return [" ".join(i["value"].split()) for i in items if i["instruction"] == instruction]

    def env(items: list[dict]) -> dict[str, str]:
        pairs = " ".join(kept(items, "ENV")).split()
        return {k: v for k, _, v in (p.partition("=") for p in pairs)}

    ours_env, their_env = env(mine), env(theirs)
    assert ours_env.pop("PATH").startswith(their_env.pop("PATH").split(":")[0])
    assert ours_env == their_env
    for instruction in ("USER", "WORKDIR", "EXPOSE", "ENTRYPOINT", "CMD", "COPY"):
        assert kept(mine, instruction) == kept(theirs, instruction), instruction
    assert kept(mine, "RUN")[-1] == kept(theirs, "RUN")[-1]
    assert "useradd --system --uid 10001" in kept(mine, "RUN")[0]
    build = " ".join(kept(_stages(ours)["build"], "ENV"))
    assert "PIP_NO_INDEX=1" in build, "the registry-free build installs from the wheelhouse only"


def test_torch_cpu_goes_in_before_the_lock(dockerfile):
    runs = [i["value"] for i in _stages(dockerfile)["build"] if i["instruction"] == "RUN"]
    install = next(r for r in runs if "requirements.lock" in r)
    assert install.index("torch==2.13.0") < install.index("-r requirements.lock")
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    assert any(line.startswith("torch==2.13.0") for line in lock)


def test_static_files_are_collected_without_a_real_secret_or_database(dockerfile):
    runs = [i["value"] for i in _stages(dockerfile)["static"] if i["instruction"] == "RUN"]
    assert any("collectstatic --noinput" in r for r in runs)


@pytest.mark.process
def test_the_collectstatic_step_of_the_image_works(tmp_path):
    """The image's collectstatic command line, with its throwaway settings, run here."""
    env = {
        **os.environ,
        "SUPPORTBOT_VAR_DIR": str(tmp_path),
        "DJANGO_SECRET_KEY": "collectstatic-only-not-a-secret",
        "ENCRYPTION_MASTER_KEYS": "build=" + base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "BLIND_INDEX_KEYS": "build=" + base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "DATABASE_URL": "postgres://unused@127.0.0.1:1/unused",
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert any((tmp_path / "staticfiles").rglob("*.js"))


def test_dockerignore_keeps_local_state_and_secrets_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".venv", ".venv-vllm", "var", ".git", ".env", "deploy/*.env"):
        assert entry in ignored


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(extra)
    return env


def _wait_http(url: str, process: subprocess.Popen, timeout: float = 90.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the entry point exited"
        try:
            return httpx.get(url, timeout=2)
        except httpx.HTTPError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@pytest.mark.process
@pytest.mark.parametrize("role", ["web", "orders"])
def test_the_long_running_entry_points_serve(role, tmp_path):
    port = free_port()
    if role == "web":
        env = _env(
            BIND="127.0.0.1",
            PORT=str(port),
            INFERENCE_AUTOSTART="0",
            SUPPORTBOT_REDIS_DB=os.environ.get("SUPPORTBOT_REDIS_DB", "1"),
        )
        path = "/healthz"
    else:
        env = _env(
            ORDER_SERVICE_HOST="127.0.0.1",
            ORDER_SERVICE_PORT=str(port),
            ORDER_SERVICE_DB=str(tmp_path / "orders.sqlite3"),
            ORDER_SERVICE_TOKEN="entrypoint-test-token",
        )
        path = "/openapi.json"
    process = subprocess.Popen(  # noqa: S603 - our own script
        ["sh", str(ENTRYPOINT), role],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "err.log", "wb"),  # noqa: SIM115
    )
    try:
        response = _wait_http(f"http://127.0.0.1:{port}{path}", process)
        assert response.status_code == 200, response.text
    finally:
        process.terminate()
        process.wait(20)


@pytest.mark.process
def test_manage_role_runs_a_management_command():
    done = subprocess.run(  # noqa: S603 - our own script
        ["sh", str(ENTRYPOINT), "manage", "check"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"no issues" in done.stdout
