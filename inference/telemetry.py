"""Gateway-side Prometheus metrics (exported on `/metrics` with the pool's worker gauges)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from inference.models import ModelWorker

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10)

REQUESTS = Counter(
    "supportbot_inference_requests",
    "Gateway requests by requested role and outcome.",
    ["role", "outcome"],
)
RETRIES = Counter(
    "supportbot_inference_retries",
    "Attempts retried on another worker before the first byte.",
    ["worker"],
)
ADMISSION_REJECTIONS = Counter(
    "supportbot_inference_admission_rejections",
    "Requests refused before reaching a worker.",
    ["reason"],
)
TOKENS = Counter("supportbot_inference_tokens", "Tokens through the gateway.", ["kind"])
TTFT = Histogram(
    "supportbot_inference_ttft_seconds",
    "Time to first token measured by the gateway (admission + routing + engine).",
    ["worker"],
    buckets=_LATENCY_BUCKETS,
)
ITL = Histogram(
    "supportbot_inference_itl_seconds",
    "Inter-token latency measured by the gateway.",
    ["worker"],
    buckets=_LATENCY_BUCKETS,
)


def worker_registry_collector(workers: list[ModelWorker]) -> CollectorRegistry:
    """A registry holding one gauge family per pool figure, labelled by worker name."""

    class _Collector:
        def collect(self):
            up = GaugeMetricFamily(
                "supportbot_inference_worker_up",
                "1 if ready and healthy.",
                labels=["worker", "role"],
            )
            running = GaugeMetricFamily(
                "supportbot_inference_worker_running", "Engine running requests.", labels=["worker"]
            )
            waiting = GaugeMetricFamily(
                "supportbot_inference_worker_waiting", "Engine queue depth.", labels=["worker"]
            )
            kv = GaugeMetricFamily(
                "supportbot_inference_worker_kv_cache_usage", "KV-cache use 0-1.", labels=["worker"]
            )
            breaker = GaugeMetricFamily(
                "supportbot_inference_worker_breaker_open",
                "1 if the circuit breaker is open or half-open.",
                labels=["worker"],
            )
            for w in workers:
                m = w.last_metrics or {}
                up.add_metric(
                    [w.name, w.role], float(w.state == ModelWorker.State.READY and w.healthy)
                )
                running.add_metric([w.name], float(m.get("running", 0.0)))
                waiting.add_metric([w.name], float(m.get("waiting", 0.0)))
                kv.add_metric([w.name], float(m.get("kv_cache_usage", 0.0)))
                breaker.add_metric([w.name], float(w.breaker_state != "closed"))
            yield from (up, running, waiting, kv, breaker)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return registry


# ---------------------------------------------------------------- metering and answer paths
_WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60)

CALLS = Counter(
    "supportbot_inference_calls",
    "Model calls a worker took, by how they ended (ok, cancelled, error, stream_broken).",
    ["outcome"],
)
CALL_TOKENS = Counter(
    "supportbot_inference_call_tokens",
    "Tokens of model calls by outcome and kind (prompt processed, completion generated); "
    "estimated where the engine did not report them.",
    ["outcome", "kind"],
)
ANSWERS = Counter(
    "supportbot_answers",
    "Answers by the path that produced the customer's first verified words, and why.",
    ["path", "reason"],
)
GENERATE_DECISIONS = Counter(
    "supportbot_generate_decisions",
    "The yield policy's generate-or-skip decisions per answer, by reason (warming_up, yield_ok, "
    "recovering, probe_interval, probe_random, low_yield, policy_off).",
    ["reason"],
)
MODEL_WAIT = Histogram(
    "supportbot_answer_model_wait_seconds",
    "Time an answer spent waiting on the model (0 when it did not call it), by path.",
    ["path"],
    buckets=_WAIT_BUCKETS,
)


def yield_collector(estimates: list[dict]) -> CollectorRegistry:
    """Gauges of the shared (all processes) verified-sentence yield per model, from
    `yields.shared_snapshot()`."""

    class _Collector:
        def collect(self):
            rate = GaugeMetricFamily(
                "supportbot_inference_verified_yield",
                "Verified sentences kept / sentences generated over the recent answers window.",
                labels=["model"],
            )
            samples = GaugeMetricFamily(
                "supportbot_inference_yield_samples",
                "Generated answers in the yield window.",
                labels=["model"],
            )
            skip = GaugeMetricFamily(
                "supportbot_inference_skip_rate",
                "Share of recent answers that skipped generation for this model.",
                labels=["model"],
            )
            wait = GaugeMetricFamily(
                "supportbot_inference_model_wait_p50_seconds",
                "Median time generated answers waited on the model (yield window).",
                labels=["model"],
            )
            for e in estimates:
                model = e["model"]
                samples.add_metric([model], float(e["samples"]))
                if e["yield_rate"] is not None:
                    rate.add_metric([model], float(e["yield_rate"]))
                if e["skip_rate"] is not None:
                    skip.add_metric([model], float(e["skip_rate"]))
                if e["p50_wait_ms"] is not None:
                    wait.add_metric([model], float(e["p50_wait_ms"]) / 1000.0)
            yield from (rate, samples, skip, wait)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return registry
