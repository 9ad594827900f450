import math

import pytest

from inference.metrics import (
    Histogram,
    MetricsParseError,
    WorkerMetrics,
    histogram_quantile,
    parse_vllm_metrics,
)
from inference.tests.replay_server import METRICS_FIXTURE


@pytest.fixture
def scrape() -> str:
    return METRICS_FIXTURE.read_text()


def test_real_scrape_gives_gauges_counters_and_model(scrape):
    m = parse_vllm_metrics(scrape)
    assert m.running == 0.0
    assert m.waiting == 0.0
    assert m.kv_cache_usage == 0.0
    assert m.prompt_tokens == 135.0
    assert m.generation_tokens == 44.0
    assert m.prefix_cache_queries == 135.0
    assert m.prefix_cache_hits == 0.0
    assert m.prefix_cache_hit_rate == 0.0
    # request_success is summed over finished_reason labels: 2 stop + 0 others.
    assert m.request_success == 2.0
    assert m.model_names == ["smollm2-135m"]


def test_real_scrape_histograms_keep_buckets_sum_and_count(scrape):
    m = parse_vllm_metrics(scrape)
    assert m.ttft.count == 2.0
    assert m.ttft.sum == pytest.approx(0.4933736324310303)
    assert dict(m.ttft.buckets)[0.25] == 1.0
    assert dict(m.ttft.buckets)[math.inf] == 2.0
    assert m.itl.count == 42.0
    # 28 of 42 inter-token gaps were <= 50 ms, all <= 75 ms.
    assert 0.025 < m.itl.quantile(0.5) <= 0.05
    assert 0.05 < m.itl.quantile(0.95) <= 0.075
    # One TTFT in (0.1, 0.25], one in (0.25, 0.5]: p50 is the top of the first bucket.
    assert m.ttft.quantile(0.5) == pytest.approx(0.25)
    assert m.e2e.count > 0
    assert m.queue_time.count > 0


def _two_engines(scrape: str) -> str:
    """The same scrape with every engine="0" sample duplicated as engine="1"."""
    out = []
    for line in scrape.splitlines():
        out.append(line)
        if line.startswith("vllm:") and 'engine="0"' in line:
            out.append(line.replace('engine="0"', 'engine="1"'))
    return "\n".join(out) + "\n"


def test_series_are_summed_across_engines(scrape):
    one = parse_vllm_metrics(scrape)
    two = parse_vllm_metrics(_two_engines(scrape))
    assert two.prompt_tokens == 2 * one.prompt_tokens
    assert two.generation_tokens == 2 * one.generation_tokens
    assert two.ttft.count == 2 * one.ttft.count
    assert dict(two.itl.buckets)[0.05] == 2 * dict(one.itl.buckets)[0.05]


def test_deprecated_gpu_cache_gauge_is_accepted_when_new_one_is_absent():
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0",model_name="m"} 1.0\n'
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.42\n'
    )
    m = parse_vllm_metrics(text)
    assert (m.running, m.waiting, m.kv_cache_usage) == (3.0, 1.0, 0.42)


def test_scrape_without_vllm_series_is_rejected():
    with pytest.raises(MetricsParseError):
        parse_vllm_metrics("# TYPE process_open_fds gauge\nprocess_open_fds 34.0\n")


def test_garbage_is_rejected():
    with pytest.raises(MetricsParseError):
        parse_vllm_metrics("<html>502 Bad Gateway</html>\n")


def test_to_dict_round_trips_including_infinite_bucket(scrape):
    m = parse_vllm_metrics(scrape)
    back = WorkerMetrics.from_dict(m.to_dict())
    assert back == m


def test_histogram_quantile_interpolates_and_handles_empty():
    buckets = [(0.1, 0.0), (0.2, 10.0), (math.inf, 10.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.99, [(0.1, 1.0), (math.inf, 5.0)]) == 0.1
    with pytest.raises(ValueError, match="within"):
        histogram_quantile(1.5, buckets)


def test_histogram_minus_gives_the_window_since_an_earlier_scrape():
    earlier = Histogram(buckets=[(0.1, 1.0), (math.inf, 2.0)], sum=0.3, count=2.0)
    later = Histogram(buckets=[(0.1, 4.0), (math.inf, 5.0)], sum=0.6, count=5.0)
    window = later.minus(earlier)
    assert window.buckets == [(0.1, 3.0), (math.inf, 3.0)]
    assert window.count == 3.0
    assert window.sum == pytest.approx(0.3)
