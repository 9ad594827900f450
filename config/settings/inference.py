"""The vLLM worker pool (inference app)."""

from config.env import BASE_DIR, env
from config.settings.base import VAR_DIR

# --------------------------------------------------------------------------- inference
# The vLLM worker pool (inference app). Every value can be set from the environment; the app
# reads them through `inference.config.get_config()`, never at import time.
INFERENCE = {
    # External fleet: comma-separated base URLs, each optionally `url|role|model`.
    "WORKERS": env.str("INFERENCE_WORKERS", default=""),
    # Discovered fleet (Kubernetes endpoints or headless-Service DNS), re-read periodically.
    "DISCOVERY": env.str("INFERENCE_DISCOVERY", default=""),
    "DISCOVERY_INTERVAL_S": env.float("INFERENCE_DISCOVERY_INTERVAL_S", default=5.0),
    "DISCOVERY_TIMEOUT_S": env.float("INFERENCE_DISCOVERY_TIMEOUT_S", default=3.0),
    "DISCOVERY_API_URL": env.str(
        "INFERENCE_DISCOVERY_API_URL",
        default=(
            f"https://{env.str('KUBERNETES_SERVICE_HOST')}:"
            f"{env.str('KUBERNETES_SERVICE_PORT', default='443')}"
            if env.str("KUBERNETES_SERVICE_HOST", default="")
            else ""
        ),
    ),
    "DISCOVERY_TOKEN_PATH": env.str(
        "INFERENCE_DISCOVERY_TOKEN_PATH",
        default="/var/run/secrets/kubernetes.io/serviceaccount/token",
    ),
    "DISCOVERY_CA_PATH": env.str(
        "INFERENCE_DISCOVERY_CA_PATH",
        default="/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
    ),
    "DEVICE": env.str("INFERENCE_DEVICE", default="auto"),  # auto | cpu | gpu
    "VLLM_PYTHON": env.str(
        "INFERENCE_VLLM_PYTHON", default=str(BASE_DIR / ".venv-vllm" / "bin" / "python")
    ),
    "MODEL_DIR": env.str("INFERENCE_MODEL_DIR", default=str(VAR_DIR / "models" / "smollm2-135m")),
    "GPU_MODEL": env.str("INFERENCE_GPU_MODEL", default=""),
    "SERVED_MODEL_NAME": env.str("INFERENCE_SERVED_MODEL_NAME", default="smollm2-135m"),
    "HOST": env.str("INFERENCE_HOST", default="127.0.0.1"),
    "BASE_PORT": env.int("INFERENCE_BASE_PORT", default=8100),
    "MAX_MODEL_LEN": env.int("INFERENCE_MAX_MODEL_LEN", default=4096),
    "MAX_NUM_SEQS": env.int("INFERENCE_MAX_NUM_SEQS", default=16),
    "GPU_MEMORY_UTILIZATION": env.float("INFERENCE_GPU_MEMORY_UTILIZATION", default=0.9),
    "TENSOR_PARALLEL_SIZE": env.int("INFERENCE_TENSOR_PARALLEL_SIZE", default=1),
    "ENABLE_PREFIX_CACHING": env.bool("INFERENCE_ENABLE_PREFIX_CACHING", default=True),
    "CPU_KVCACHE_SPACE_GB": env.int("INFERENCE_CPU_KVCACHE_SPACE_GB", default=2),
    "ENFORCE_EAGER": env.bool("INFERENCE_ENFORCE_EAGER", default=True),
    "START_TIMEOUT_S": env.float("INFERENCE_START_TIMEOUT_S", default=300.0),
    "DRAIN_TIMEOUT_S": env.float("INFERENCE_DRAIN_TIMEOUT_S", default=30.0),
    "POLL_INTERVAL_S": env.float("INFERENCE_POLL_INTERVAL_S", default=1.0),
    "STALE_AFTER_S": env.float("INFERENCE_STALE_AFTER_S", default=3.0),
    "HEALTH_TIMEOUT_S": env.float("INFERENCE_HEALTH_TIMEOUT_S", default=2.0),
    "CONNECT_TIMEOUT_S": env.float("INFERENCE_CONNECT_TIMEOUT_S", default=2.0),
    "FIRST_BYTE_TIMEOUT_S": env.float("INFERENCE_FIRST_BYTE_TIMEOUT_S", default=20.0),
    "IDLE_TIMEOUT_S": env.float("INFERENCE_IDLE_TIMEOUT_S", default=20.0),
    "MAX_ATTEMPTS": env.int("INFERENCE_MAX_ATTEMPTS", default=3),
    "BREAKER_FAILURES": env.int("INFERENCE_BREAKER_FAILURES", default=3),
    "BREAKER_RESET_S": env.float("INFERENCE_BREAKER_RESET_S", default=10.0),
    "QUEUE_DEADLINE_S": env.float("INFERENCE_QUEUE_DEADLINE_S", default=5.0),
    "WORKER_MAX_WAITING": env.int("INFERENCE_WORKER_MAX_WAITING", default=8),
    "WORKER_MAX_KV": env.float("INFERENCE_WORKER_MAX_KV", default=0.95),
    "TENANT_TOKENS_PER_MINUTE": env.int("INFERENCE_TENANT_TOKENS_PER_MINUTE", default=60000),
    "TENANT_TOKEN_BURST": env.int("INFERENCE_TENANT_TOKEN_BURST", default=20000),
    "TENANT_MAX_CONCURRENCY": env.int("INFERENCE_TENANT_MAX_CONCURRENCY", default=8),
    "MAX_INPUT_TOKENS": env.int("INFERENCE_MAX_INPUT_TOKENS", default=3000),
    "MAX_OUTPUT_TOKENS": env.int("INFERENCE_MAX_OUTPUT_TOKENS", default=1024),
    # `/metrics` wants `Authorization: Bearer <METRICS_TOKEN>` (METRICS_BEARER_TOKEN: old name).
    "METRICS_BEARER_TOKEN": env.str("METRICS_TOKEN", default="")
    or env.str("METRICS_BEARER_TOKEN", default=""),
    "CONTINUOUS_USAGE": env.bool("INFERENCE_CONTINUOUS_USAGE", default=True),
    # Verified yield: skip generation for a model that rarely gives an answer its first words
    # (the share of its recent answers that got a verified sentence out within the budget).
    "YIELD_POLICY": env.bool("INFERENCE_YIELD_POLICY", default=True),
    "YIELD_WINDOW": env.int("INFERENCE_YIELD_WINDOW", default=50),
    "YIELD_MIN_SAMPLES": env.int("INFERENCE_YIELD_MIN_SAMPLES", default=10),
    "YIELD_THRESHOLD": env.float("INFERENCE_YIELD_THRESHOLD", default=0.2),
    # A model not measured yet (warming up) is measured by background calls nobody waits for
    # (at most this many at once per process); "foreground" lets that many answers wait on it.
    "YIELD_WARMUP": env.str("INFERENCE_YIELD_WARMUP", default="background"),
    "YIELD_WARMUP_IN_FLIGHT": env.int("INFERENCE_YIELD_WARMUP_IN_FLIGHT", default=2),
    "YIELD_RECOVERY_SAMPLES": env.int("INFERENCE_YIELD_RECOVERY_SAMPLES", default=3),
    # Probes of a model measured useless run in the background (never shown, never waited
    # for), so they cost model time only: one every interval (plus a fraction of answers).
    "YIELD_PROBE_FRACTION": env.float("INFERENCE_YIELD_PROBE_FRACTION", default=0.0),
    "YIELD_PROBE_INTERVAL_S": env.float("INFERENCE_YIELD_PROBE_INTERVAL_S", default=30.0),
    "YIELD_PROBES_IN_FLIGHT": env.int("INFERENCE_YIELD_PROBES_IN_FLIGHT", default=1),
    "YIELD_MAX_AGE_S": env.float("INFERENCE_YIELD_MAX_AGE_S", default=3600.0),
    "YIELD_FLUSH_INTERVAL_S": env.float("INFERENCE_YIELD_FLUSH_INTERVAL_S", default=2.0),
}
