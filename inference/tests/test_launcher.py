import os
import subprocess
import sys
import time

import pytest

from inference import launcher
from inference.config import InferenceConfig


@pytest.fixture
def cpu_cfg(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return InferenceConfig(vllm_python=sys.executable, model_dir=str(model), device="cpu")


def test_cpu_command_uses_the_api_server_module_and_cpu_env(cpu_cfg, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    cmd = launcher.engine_command(cpu_cfg, port=8123, device="cpu")
    argv = cmd.argv
    assert argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--port") + 1] == "8123"
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
    assert argv[argv.index("--max-model-len") + 1] == "4096"
    assert "--enable-prefix-caching" in argv
    assert "--enforce-eager" in argv
    assert cmd.env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert cmd.env["HF_HUB_OFFLINE"] == "1"
    assert cmd.env["TMPDIR"].endswith("vllm-8123")


def test_gpu_command_is_vllm_serve_with_gpu_flags(cpu_cfg):
    cfg = InferenceConfig(
        gpu_model="meta-llama/Llama-3.1-8B-Instruct", max_num_seqs=64, gpu_memory_utilization=0.85
    )
    cmd = launcher.engine_command(cfg, port=9000, device="gpu", gpu_index=1)
    assert cmd.argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    assert cmd.argv[cmd.argv.index("--gpu-memory-utilization") + 1] == "0.85"
    assert cmd.argv[cmd.argv.index("--max-num-seqs") + 1] == "64"
    assert "--enable-prefix-caching" in cmd.argv
    assert cmd.env["CUDA_VISIBLE_DEVICES"] == "1"


def test_cpu_command_refuses_a_missing_engine_venv(tmp_path):
    cfg = InferenceConfig(vllm_python=str(tmp_path / "nope" / "python"), device="cpu")
    with pytest.raises(launcher.EngineError, match="make setup"):
        launcher.engine_command(cfg, port=1, device="cpu")


def test_configured_device_wins_over_detection():
    assert launcher.detect_device(InferenceConfig(device="gpu")) == "gpu"
    assert launcher.detect_device(InferenceConfig(device="cpu")) == "cpu"


@pytest.mark.process
def test_terminate_stops_the_whole_process_group():
    # A leader with a child in its session, like the API server and its EngineCore.
    proc = subprocess.Popen(
        ["bash", "-c", "sleep 60 & wait"],
        start_new_session=True,
    )
    time.sleep(0.2)
    launcher.engine_terminate(proc.pid, grace_s=5)
    proc.wait(timeout=5)
    assert not launcher.pid_alive(proc.pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


@pytest.mark.process
def test_terminate_refuses_a_pid_that_leads_no_group():
    # A child in this test's process group: alive, but not a group leader.
    proc = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(launcher.EngineError, match="not an engine process-group leader"):
            launcher.engine_terminate(proc.pid)
        assert launcher.pid_alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.process
def test_wait_ready_reports_an_engine_that_exits(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("RuntimeError: no model\n")
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(launcher.EngineError, match="exited during start-up"):
        launcher.engine_wait_ready("http://127.0.0.1:9", pid=proc.pid, timeout_s=5, log_path=log)


@pytest.mark.process
def test_wait_ready_refuses_a_port_another_process_answers(replay):
    """Another process answering /health on the engine's port (a second checkout's engine, a
    stale one) is not the engine just started: wait, then say so."""
    engine = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(launcher.EngineError, match="another process"):
            launcher.engine_wait_ready(replay.url, pid=engine.pid, timeout_s=1.5)
    finally:
        engine.kill()
        engine.wait()


def test_wait_ready_and_warm_up_against_a_live_server(replay):
    took = launcher.engine_wait_ready(replay.url, pid=os.getpid(), timeout_s=5)
    assert took < 2
    launcher.engine_warm_up(replay.url, model="smollm2-135m")
    replay.behaviour.chat_status = 500
    with pytest.raises(launcher.EngineError, match="warm-up"):
        launcher.engine_warm_up(replay.url, model="smollm2-135m")
