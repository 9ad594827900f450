import pytest

from inference.router import (
    RouterWeights,
    WorkerView,
    choose,
    prefix_affinity_key,
    rendezvous_home,
)


def w(key, role="primary", **kw) -> WorkerView:
    base = {"ready": True, "healthy": True, "breaker_allows": True, "metrics_age_s": 0.1}
    base.update(kw)
    return WorkerView(key=key, role=role, **base)


def test_idle_workers_without_affinity_rank_by_load_then_name():
    d = choose([w("b"), w("a", waiting=1)], role="primary")
    assert [x.key for x in d.ranked] == ["b", "a"]
    assert d.reason == "score"


def test_same_affinity_key_always_lands_on_the_same_worker():
    workers = [w("w1"), w("w2"), w("w3")]
    homes = {
        choose(workers, role="primary", affinity_key="conv-42").ranked[0].key for _ in range(5)
    }
    assert len(homes) == 1
    keys = [f"conv-{i}" for i in range(60)]
    spread = {choose(workers, role="primary", affinity_key=k).ranked[0].key for k in keys}
    assert spread == {"w1", "w2", "w3"}, "affinity must spread conversations over workers"


def test_affinity_holds_under_mild_load_on_home():
    workers = [w("w1"), w("w2")]
    home = rendezvous_home("conv-7", workers).key
    other = "w2" if home == "w1" else "w1"
    loaded = [w(home, running=2, kv_cache_usage=0.2), w(other)]
    d = choose(loaded, role="primary", affinity_key="conv-7")
    assert d.ranked[0].key == home
    assert d.reason == "affinity"


def test_imbalance_switches_to_least_loaded_even_against_affinity():
    workers = [w("w1"), w("w2")]
    home = rendezvous_home("conv-7", workers).key
    other = "w2" if home == "w1" else "w1"
    d = choose([w(home, running=7), w(other, running=1)], role="primary", affinity_key="conv-7")
    assert d.ranked[0].key == other
    assert d.reason == "least_loaded"


def test_local_inflight_counts_when_metrics_lag():
    d = choose([w("a", local_inflight=6), w("b", local_inflight=0)], role="primary")
    assert d.ranked[0].key == "b"


def test_kv_use_weighs_in_the_score():
    d = choose([w("a", kv_cache_usage=0.8), w("b", kv_cache_usage=0.1)], role="primary")
    assert d.ranked[0].key == "b"


def test_stale_metrics_count_as_saturated():
    weights = RouterWeights(stale_after_s=1.0)
    d = choose(
        [w("a", metrics_age_s=1.5), w("b", metrics_age_s=0.2)], role="primary", weights=weights
    )
    assert [x.key for x in d.ranked] == ["b"]
    d = choose([w("a", metrics_age_s=None)], role="primary", weights=weights)
    assert d.ranked == []
    assert d.reason == "saturated"


def test_long_queue_or_full_kv_is_saturated():
    d = choose([w("a", waiting=8), w("b", kv_cache_usage=0.96)], role="primary")
    assert d.ranked == []
    assert d.reason == "saturated"


def test_unhealthy_not_ready_or_open_breaker_are_never_chosen():
    workers = [w("a", healthy=False), w("b", ready=False), w("c", breaker_allows=False)]
    d = choose(workers, role="primary")
    assert d.ranked == []
    assert d.reason == "no_worker"


def test_small_role_prefers_small_workers_then_any():
    workers = [w("p", role="primary"), w("s", role="small", running=3)]
    assert choose(workers, role="small").ranked[0].key == "s"
    assert choose([w("p", role="primary")], role="small").ranked[0].key == "p"


def test_primary_falls_back_to_fallback_role_then_any():
    workers = [w("p", healthy=False), w("f", role="fallback"), w("s", role="small")]
    d = choose(workers, role="primary")
    assert [x.key for x in d.ranked] == ["f"]
    assert d.tier == "fallback"
    d = choose([w("p", healthy=False), w("s", role="small")], role="primary")
    assert [x.key for x in d.ranked] == ["s"]
    assert d.tier is None


def test_saturated_primary_tier_falls_through_to_fallback():
    d = choose([w("p", waiting=9), w("f", role="fallback")], role="primary")
    assert d.ranked[0].key == "f"


def test_excluded_workers_are_skipped_for_retries():
    d = choose([w("a"), w("b")], role="primary", exclude=frozenset({"a"}))
    assert [x.key for x in d.ranked] == ["b"]


def test_when_the_home_worker_goes_only_its_keys_move():
    three = [w("w1"), w("w2"), w("w3")]
    keys = [f"conv-{i}" for i in range(100)]
    before = {k: rendezvous_home(k, three).key for k in keys}
    after = {k: rendezvous_home(k, [x for x in three if x.key != "w2"]).key for k in keys}
    for k in keys:
        if before[k] != "w2":
            assert after[k] == before[k]
        else:
            assert after[k] in {"w1", "w3"}


def test_unknown_role_is_an_error():
    with pytest.raises(ValueError, match="unknown role"):
        choose([w("a")], role="huge")


def test_prefix_key_follows_the_system_prompt_only():
    system = {"role": "system", "content": "Acme policy. Passages: [1] [2]"}
    a = prefix_affinity_key([system, {"role": "user", "content": "refund?"}])
    b = prefix_affinity_key([system, {"role": "user", "content": "shipping?"}])
    other = prefix_affinity_key([{"role": "system", "content": "Globex"}, {"role": "user"}])
    assert a == b
    assert a != other
    assert prefix_affinity_key([{"role": "user", "content": "hi"}]) is None
