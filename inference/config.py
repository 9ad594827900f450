"""Typed view of `settings.INFERENCE`, read when called (never at import time)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from django.conf import settings


@dataclass(frozen=True)
class InferenceConfig:
    workers: str = ""
    # Worker discovery (inference/discovery.py): "" off, else k8s-endpoints://ns/svc:port,
    # k8s-endpointslices://ns/svc:port or dns://host:port.
    discovery: str = ""
    discovery_interval_s: float = 5.0
    discovery_timeout_s: float = 3.0
    discovery_api_url: str = ""
    discovery_token_path: str = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105
    discovery_ca_path: str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    device: str = "auto"
    vllm_python: str = ".venv-vllm/bin/python"
    model_dir: str = "var/models/smollm2-135m"
    gpu_model: str = ""
    served_model_name: str = "smollm2-135m"
    host: str = "127.0.0.1"
    base_port: int = 8100
    max_model_len: int = 4096
    max_num_seqs: int = 16
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    enable_prefix_caching: bool = True
    cpu_kvcache_space_gb: int = 2
    enforce_eager: bool = True
    start_timeout_s: float = 300.0
    drain_timeout_s: float = 30.0
    poll_interval_s: float = 1.0
    stale_after_s: float = 3.0
    health_timeout_s: float = 2.0
    connect_timeout_s: float = 2.0
    first_byte_timeout_s: float = 20.0
    idle_timeout_s: float = 20.0
    max_attempts: int = 3
    breaker_failures: int = 3
    breaker_reset_s: float = 10.0
    queue_deadline_s: float = 5.0
    worker_max_waiting: int = 8
    worker_max_kv: float = 0.95
    tenant_tokens_per_minute: int = 60000
    tenant_token_burst: int = 20000
    tenant_max_concurrency: int = 8
    max_input_tokens: int = 3000
    max_output_tokens: int = 1024
    metrics_bearer_token: str = ""
    # Ask vLLM for running usage on every chunk (exact metering of abandoned streams).
    continuous_usage: bool = True
    # Verified yield policy (inference/yields.py).
    yield_policy: bool = True
    yield_window: int = 50
    yield_min_samples: int = 10
    # Share of recent answers whose first words the model's verified sentences gave.
    yield_threshold: float = 0.2
    # How a model not measured yet is measured: "background" (calls nobody waits for, at most
    # `yield_warmup_in_flight` at once per process) or "foreground" (at most that many answers
    # wait on it at once).
    yield_warmup: str = "background"
    yield_warmup_in_flight: int = 2
    yield_recovery_samples: int = 3
    yield_probe_fraction: float = 0.0
    yield_probe_interval_s: float = 30.0
    # Background probes one process runs at once; a probe due while they are busy is skipped.
    yield_probes_in_flight: int = 1
    yield_max_age_s: float = 3600.0
    yield_flush_interval_s: float = 2.0

    def __post_init__(self) -> None:
        if self.yield_warmup not in ("background", "foreground"):
            raise ValueError(
                "INFERENCE_YIELD_WARMUP must be background or foreground, "
                f"not {self.yield_warmup!r}"
            )


def get_config() -> InferenceConfig:
    """Build the config from `settings.INFERENCE` (upper-case keys); unknown keys are errors."""
    raw = getattr(settings, "INFERENCE", {}) or {}
    known = {f.name for f in fields(InferenceConfig)}
    values = {}
    for key, value in raw.items():
        name = key.lower()
        if name not in known:
            raise ValueError(f"unknown settings.INFERENCE key: {key}")
        values[name] = value
    return InferenceConfig(**values)
