"""Parse a vLLM `/metrics` scrape into the numbers the pool routes and reports on.

Parsing uses `prometheus_client`'s text parser. Every series is summed across the `engine`
(and `model_name`) labels, so a data-parallel server reads as one worker. Histograms keep
their cumulative buckets so percentiles can be estimated the way Prometheus does
(`histogram_quantile`: linear interpolation inside the bucket).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from prometheus_client.parser import text_string_to_metric_families

# family name (as the parser reports it: counters lose `_total`) -> attribute
_GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    # Deprecated name of the same gauge on older vLLM; used only when the new one is absent.
    "vllm:gpu_cache_usage_perc": "_kv_cache_usage_deprecated",
}
_COUNTERS = {
    "vllm:prompt_tokens": "prompt_tokens",
    "vllm:generation_tokens": "generation_tokens",
    "vllm:prefix_cache_queries": "prefix_cache_queries",
    "vllm:prefix_cache_hits": "prefix_cache_hits",
    "vllm:request_success": "request_success",
    "vllm:num_preemptions": "preemptions",
}
_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:e2e_request_latency_seconds": "e2e",
    "vllm:request_queue_time_seconds": "queue_time",
}


class MetricsParseError(ValueError):
    """The scrape is not Prometheus text, or lacks every vLLM series we rely on."""


@dataclass
class Histogram:
    """Cumulative buckets `[(upper_bound, count), ...]` sorted by bound, plus sum and count."""

    buckets: list[tuple[float, float]] = field(default_factory=list)
    sum: float = 0.0
    count: float = 0.0

    def quantile(self, q: float) -> float | None:
        """Estimate the q-quantile like PromQL `histogram_quantile`; None when empty."""
        return histogram_quantile(q, self.buckets)

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since `earlier` (same bucket layout), for windowed percentiles."""
        before = dict(earlier.buckets)
        return Histogram(
            buckets=[(le, max(0.0, c - before.get(le, 0.0))) for le, c in self.buckets],
            sum=max(0.0, self.sum - earlier.sum),
            count=max(0.0, self.count - earlier.count),
        )


@dataclass
class WorkerMetrics:
    """One scrape of one worker, summed over engines."""

    running: float = 0.0
    waiting: float = 0.0
    kv_cache_usage: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    prefix_cache_queries: float = 0.0
    prefix_cache_hits: float = 0.0
    request_success: float = 0.0
    preemptions: float = 0.0
    ttft: Histogram = field(default_factory=Histogram)
    itl: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)
    queue_time: Histogram = field(default_factory=Histogram)
    model_names: list[str] = field(default_factory=list)

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Hits / queried tokens since the engine started; None before any query."""
        if self.prefix_cache_queries <= 0:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    def to_dict(self) -> dict:
        """JSON-safe form stored on the registry row (`ModelWorker.last_metrics`)."""
        data = asdict(self)
        for name in _HISTOGRAMS.values():
            data[name]["buckets"] = [[_bound_to_json(le), c] for le, c in data[name]["buckets"]]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> WorkerMetrics:
        values = dict(data)
        for name in _HISTOGRAMS.values():
            raw = values.get(name) or {}
            values[name] = Histogram(
                buckets=[(_bound_from_json(le), float(c)) for le, c in raw.get("buckets", [])],
                sum=float(raw.get("sum", 0.0)),
                count=float(raw.get("count", 0.0)),
            )
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


def _bound_to_json(le: float) -> float | str:
    return "+Inf" if math.isinf(le) else le


def _bound_from_json(le: float | str) -> float:
    return math.inf if le == "+Inf" else float(le)


def parse_vllm_metrics(text: str) -> WorkerMetrics:
    """Parse a `/metrics` body; raise MetricsParseError if it holds no vLLM request gauges."""
    totals = _ScrapeTotals()
    for family in _metric_families(text):
        if family.name in _GAUGES or family.name in _COUNTERS:
            totals.add_series(family)
        elif family.name in _HISTOGRAMS:
            totals.add_histogram(family)
    return totals.metrics()


def _metric_families(text: str) -> list:
    """All metric families of a scrape; raise MetricsParseError if it is not Prometheus text."""
    try:
        return list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises bare ValueError/TypeError/IndexError
        raise MetricsParseError(f"not Prometheus text: {exc}") from exc


@dataclass
class _ScrapeTotals:
    """The vLLM families of one scrape summed over engines, as they are read."""

    out: WorkerMetrics = field(default_factory=WorkerMetrics)
    seen: set[str] = field(default_factory=set)
    deprecated_kv: float | None = None
    buckets: dict[str, dict[float, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )
    models: set[str] = field(default_factory=set)

    def add_series(self, family) -> None:
        """Add a gauge or counter family: its samples' sum, and the model names it labels."""
        name = family.name
        attr = _GAUGES.get(name) or _COUNTERS[name]
        suffix = "_total" if name in _COUNTERS else ""
        total = sum(s.value for s in family.samples if s.name == name + suffix)
        for s in family.samples:
            if "model_name" in s.labels:
                self.models.add(s.labels["model_name"])
        if attr == "_kv_cache_usage_deprecated":
            self.deprecated_kv = total
        else:
            setattr(self.out, attr, float(total))
            self.seen.add(attr)

    def add_histogram(self, family) -> None:
        """Add a histogram family: bucket counts by bound, sum and count."""
        name = family.name
        attr = _HISTOGRAMS[name]
        hist: Histogram = getattr(self.out, attr)
        for s in family.samples:
            if s.name == name + "_bucket":
                self.buckets[attr][float(s.labels["le"])] += s.value
            elif s.name == name + "_sum":
                hist.sum += s.value
            elif s.name == name + "_count":
                hist.count += s.value
        self.seen.add(attr)

    def metrics(self) -> WorkerMetrics:
        """The finished WorkerMetrics; raise MetricsParseError without the request gauges."""
        for attr, by_bound in self.buckets.items():
            getattr(self.out, attr).buckets = sorted(by_bound.items())
        if "kv_cache_usage" not in self.seen and self.deprecated_kv is not None:
            self.out.kv_cache_usage = float(self.deprecated_kv)
            self.seen.add("kv_cache_usage")
        if not {"running", "waiting"} <= self.seen:
            raise MetricsParseError(
                "no vllm:num_requests_running / vllm:num_requests_waiting series"
            )
        self.out.model_names = sorted(self.models)
        return self.out


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """PromQL-style quantile over cumulative buckets; None when there are no observations.

    A quantile that falls in the +Inf bucket returns the largest finite bound (as Prometheus).
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must be within [0, 1]")
    if not buckets:
        return None
    ordered = sorted(buckets)
    total = ordered[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank and count > prev_count:
            if math.isinf(bound):
                return prev_bound
            # Linear interpolation inside the bucket (the first bucket starts at 0).
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound
