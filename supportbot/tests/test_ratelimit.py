"""The limiter against the real Redis, with Redis unreachable, and under concurrent hits."""

import threading
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from supportbot import ratelimit
from supportbot.errors import RateLimited

DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1: refused at once


@pytest.fixture
def redis_down(settings):
    settings.REDIS_URL = DEAD_REDIS
    ratelimit._redis.down_until = 0.0


def test_limit_allows_count_hits_then_refuses_with_retry_after(settings, strict_limits):
    strict_limits(message_customer="3/60")
    for _ in range(3):
        ratelimit.rate_limit_enforce(name="message_customer", key=(1,))
    with pytest.raises(RateLimited) as caught:
        ratelimit.rate_limit_enforce(name="message_customer", key=(1,))
    assert caught.value.status == 429
    assert caught.value.extra["limit"] == "message_customer"
    # Sliding: the rest of this window plus the third of the next that lets one hit slide out.
    assert 1 <= caught.value.extra["retry_after"] <= 80
    ratelimit.rate_limit_enforce(name="message_customer", key=(2,))  # another key is fresh


def test_counters_are_in_redis_shared_by_processes(strict_limits):
    strict_limits(search_key="2/60")
    decision = ratelimit.rate_limit_hit(limit=ratelimit.limit_get("search_key"), key=("k",))
    assert decision.backend == "redis"
    ratelimit._local.clear()  # another process would have no local counts either
    ratelimit.rate_limit_hit(limit=ratelimit.limit_get("search_key"), key=("k",))
    third = ratelimit.rate_limit_hit(limit=ratelimit.limit_get("search_key"), key=("k",))
    assert (third.allowed, third.hits) == (False, 3)


def test_odd_bytes_in_keys_are_counted_not_crashing(strict_limits):
    strict_limits(login_user="1/60")
    odd = ("\ud800\x00\xa0" + "x" * 10_000,)
    assert ratelimit.rate_limit_hit(limit=ratelimit.limit_get("login_user"), key=odd).allowed
    assert not ratelimit.rate_limit_hit(limit=ratelimit.limit_get("login_user"), key=odd).allowed


def test_bad_limit_text_is_a_configuration_error():
    for text in ("20", "a/b", "0/60", "5/-1", "1/2/3"):
        with pytest.raises(ImproperlyConfigured):
            ratelimit.parse_limit("x", text)


def test_redis_down_falls_back_to_a_stricter_local_count(redis_down, settings, strict_limits):
    strict_limits(message_customer="10/60")
    settings.RATE_LIMIT_FALLBACK_DIVISOR = 2
    started = time.monotonic()
    decisions = [
        ratelimit.rate_limit_hit(limit=ratelimit.limit_get("message_customer"), key=(7,))
        for _ in range(6)
    ]
    assert {d.backend for d in decisions} == {"local"}
    assert [d.allowed for d in decisions] == [True] * 5 + [False]  # 10 / 2, never fail open
    assert time.monotonic() - started < 2  # one failed attempt, then Redis is skipped
    assert not ratelimit.redis_available()


def test_limiter_returns_to_redis_after_the_retry_interval(redis_down, settings, strict_limits):
    settings.RATE_LIMIT_REDIS_RETRY_S = 0.2
    strict_limits(search_key="5/60")
    limit = ratelimit.limit_get("search_key")
    assert ratelimit.rate_limit_hit(limit=limit, key=("a",)).backend == "local"
    settings.REDIS_URL = ratelimit.settings.CACHES["default"]["LOCATION"]  # Redis is back
    time.sleep(0.25)
    assert ratelimit.rate_limit_hit(limit=limit, key=("a",)).backend == "redis"


def test_parallel_hits_allow_exactly_the_limit(strict_limits):
    strict_limits(upload_key="25/60")
    limit = ratelimit.limit_get("upload_key")
    allowed: list[bool] = []
    lock = threading.Lock()

    def hit() -> None:
        for _ in range(10):
            decision = ratelimit.rate_limit_hit(limit=limit, key=("parallel",))
            with lock:
                allowed.append(decision.allowed)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(allowed) == 80
    assert allowed.count(True) == 25


def test_parallel_hits_with_redis_down_allow_exactly_the_fallback(redis_down, strict_limits):
    strict_limits(upload_key="20/60")
    limit = ratelimit.limit_get("upload_key")
    results: list[bool] = []
    lock = threading.Lock()

    def hit() -> None:
        for _ in range(10):
            decision = ratelimit.rate_limit_hit(limit=limit, key=("parallel",))
            with lock:
                results.append(decision.allowed)

    threads = [threading.Thread(target=hit) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 10


def test_limits_can_be_switched_off(settings, strict_limits):
    strict_limits(api_key="1/60")
    settings.RATE_LIMITS_ENABLED = False
    for _ in range(5):
        ratelimit.rate_limit_enforce(name="api_key", key=(1,))


def test_lockouts_work_in_redis_and_without_it(settings):
    ratelimit.lockout_set(name="login_user", key=("bob",), seconds=30)
    assert 25 <= ratelimit.lockout_remaining(name="login_user", key=("bob",)) <= 30
    ratelimit.lockout_clear(name="login_user", key=("bob",))
    assert ratelimit.lockout_remaining(name="login_user", key=("bob",)) == 0
    settings.REDIS_URL = DEAD_REDIS
    ratelimit._redis.down_until = 0.0
    ratelimit.lockout_set(name="login_user", key=("eve",), seconds=30)
    assert ratelimit.lockout_remaining(name="login_user", key=("eve",)) >= 25


class _Clock:
    """A wall clock the test moves (the limiter reads `time.time`)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("backend", ["redis", "local"])
def test_hits_on_both_sides_of_a_window_boundary_do_not_pass_twice_the_limit(
    backend, settings, strict_limits, monkeypatch
):
    if backend == "local":
        settings.REDIS_URL = DEAD_REDIS
        settings.RATE_LIMIT_FALLBACK_DIVISOR = 1
        ratelimit._redis.down_until = 0.0
    strict_limits(message_conversation="1/60")
    limit = ratelimit.limit_get("message_conversation")
    clock = _Clock(60.0 * 29_000_000 - 0.05)  # 50 ms before a window boundary
    monkeypatch.setattr(ratelimit.time, "time", clock)
    first = ratelimit.rate_limit_hit(limit=limit, key=("edge", backend))
    clock.now += 0.1  # 50 ms into the next window
    second = ratelimit.rate_limit_hit(limit=limit, key=("edge", backend))
    assert (first.allowed, second.allowed, second.backend) == (True, False, backend)
    assert 55 <= second.retry_after <= 60
    clock.now += 60.0  # a whole window after the first hit: allowed again
    assert ratelimit.rate_limit_hit(limit=limit, key=("edge", backend)).allowed


def test_the_previous_window_weighs_by_the_share_still_inside_the_last_window(
    strict_limits, monkeypatch
):
    strict_limits(search_key="10/60")
    limit = ratelimit.limit_get("search_key")
    clock = _Clock(60.0 * 29_000_100 + 30.0)  # the middle of a window
    monkeypatch.setattr(ratelimit.time, "time", clock)
    assert all(ratelimit.rate_limit_hit(limit=limit, key=("w",)).allowed for _ in range(10))
    clock.now += 45.0  # 15 s into the next window: 3/4 of the previous 10 still count
    verdicts = [ratelimit.rate_limit_hit(limit=limit, key=("w",)).allowed for _ in range(4)]
    assert verdicts == [True, True, False, False]


def test_an_unknown_limit_name_is_named_in_the_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="'no_such_limit'"):
        ratelimit.limit_get("no_such_limit")


def test_a_fresh_local_store_counts_each_window_and_clears():
    store = ratelimit._Local()
    assert store.hit("k", 7, 1) == (0, 1)
    assert store.hit("k", 8, 2) == (1, 2)  # the previous window's hits come back beside these
    store.counts["lock"] = (1, 0.0)
    store.clear()
    assert (store.counts, store.windows) == ({}, {})
    assert store.hit("k", 8, 1) == (0, 1)


def test_local_windows_are_kept_up_to_fifty_thousand_entries():
    store = ratelimit._Local()
    store.windows = {(f"old{i}", 98): 1 for i in range(49_999)}
    store.hit("new", 100, 1)
    assert len(store.windows) == 50_000  # at the bound: nothing pruned yet


def test_local_windows_past_fifty_thousand_keep_only_this_and_the_previous_window():
    store = ratelimit._Local()
    store.windows = {(f"old{i}", 98): 1 for i in range(49_999)}
    store.windows[("k", 99)] = 4  # the previous window still weighs in the sliding estimate
    store.hit("k", 100, 1)  # 50,001 entries: pruned
    assert store.windows == {("k", 99): 4, ("k", 100): 1}
    assert store.hit("k", 100, 1) == (4, 2)


def test_a_fresh_redis_state_connects_to_the_configured_redis():
    state = ratelimit._RedisState()
    client = state.get()
    assert client is not None
    assert client.ping()


def test_falling_back_is_logged_once_per_outage_with_its_cause(settings, caplog):
    settings.RATE_LIMIT_REDIS_RETRY_S = 30
    state = ratelimit._RedisState()
    with caplog.at_level("WARNING", logger="supportbot.ratelimit"):
        state.failed(ConnectionError("refused by the test"))
        state.failed(ConnectionError("again"))
    messages = [r.getMessage() for r in caplog.records if r.name == "supportbot.ratelimit"]
    assert messages == ["rate limits fall back to in-process counters: refused by the test"]
    assert state.get() is None  # down for the retry interval


@pytest.mark.parametrize("call", ["lockout_set", "lockout_remaining", "lockout_clear"])
def test_each_lockout_call_that_meets_a_dead_redis_logs_why(redis_down, call, caplog):
    with caplog.at_level("WARNING", logger="supportbot.ratelimit"):
        if call == "lockout_set":
            ratelimit.lockout_set(name="login_user", key=("dan",), seconds=5)
        else:
            getattr(ratelimit, call)(name="login_user", key=("dan",))
    (record,) = [r for r in caplog.records if r.name == "supportbot.ratelimit"]
    assert "fall back to in-process counters: Error" in record.getMessage()


def test_a_lockout_set_in_redis_holds_in_every_process():
    ratelimit.lockout_set(name="login_user", key=("ann",), seconds=30)
    ratelimit._local.clear()  # another process has none of this one's memory
    assert 25 <= ratelimit.lockout_remaining(name="login_user", key=("ann",)) <= 30


def test_a_one_second_lockout_lasts_one_second_in_redis():
    ratelimit.lockout_set(name="login_user", key=("sam",), seconds=1)
    assert ratelimit.lockout_remaining(name="login_user", key=("sam",)) == 1


def test_without_redis_an_unlocked_key_is_not_locked_and_a_lock_ends_when_cleared(redis_down):
    assert ratelimit.lockout_remaining(name="login_user", key=("free",)) == 0
    ratelimit.lockout_set(name="login_user", key=("zoe",), seconds=1)
    # Less than a second left: still reported as one whole second, never as unlocked.
    assert ratelimit.lockout_remaining(name="login_user", key=("zoe",)) == 1
    ratelimit.lockout_clear(name="login_user", key=("zoe",))
    assert ratelimit.lockout_remaining(name="login_user", key=("zoe",)) == 0


def test_a_mark_is_made_once_per_key_and_seen_by_every_process():
    assert ratelimit.mark_once(name="identity", key=("t", 1), ttl_seconds=60) is True
    assert ratelimit.mark_once(name="identity", key=("t", 1), ttl_seconds=60) is False
    assert ratelimit.mark_once(name="identity", key=("t", 2), ttl_seconds=60) is True
    assert ratelimit.mark_once(name="other", key=("t", 1), ttl_seconds=60) is True
    ratelimit._local.clear()  # another process: Redis alone knows the mark
    assert ratelimit.mark_once(name="identity", key=("t", 1), ttl_seconds=60) is False


def test_a_mark_expires_with_its_ttl_in_redis():
    assert ratelimit.mark_once(name="identity", key=("ttl",), ttl_seconds=1)
    client = ratelimit._redis.get()
    (mark,) = client.keys(f"{ratelimit.KEY_PREFIX}:once:identity:*")
    assert 0 < client.pttl(mark) <= 1000


def test_without_redis_marks_are_kept_in_the_process_until_their_ttl_passes(
    redis_down, monkeypatch
):
    clock = _Clock(1_800_000_000.0)
    monkeypatch.setattr(ratelimit.time, "time", clock)
    assert ratelimit.mark_once(name="identity", key=("down",), ttl_seconds=30)
    assert not ratelimit.mark_once(name="identity", key=("down",), ttl_seconds=30)
    clock.now += 29.0
    assert not ratelimit.mark_once(name="identity", key=("down",), ttl_seconds=30)
    clock.now += 1.5
    assert ratelimit.mark_once(name="identity", key=("down",), ttl_seconds=30)


def test_a_mark_made_while_redis_was_down_still_holds_when_it_comes_back(redis_down, settings):
    assert ratelimit.mark_once(name="identity", key=("outage",), ttl_seconds=60)
    settings.REDIS_URL = ratelimit.settings.CACHES["default"]["LOCATION"]  # Redis is back
    ratelimit._redis.down_until = 0.0
    assert ratelimit.redis_available()
    assert not ratelimit.mark_once(name="identity", key=("outage",), ttl_seconds=60)


@pytest.mark.parametrize("backend", ["redis", "local"])
def test_parallel_marks_of_one_key_let_exactly_one_through(backend, settings):
    if backend == "local":
        settings.REDIS_URL = DEAD_REDIS
        ratelimit._redis.down_until = 0.0
    results: list[bool] = []
    gate = threading.Barrier(16)

    def mark() -> None:
        gate.wait()
        results.append(ratelimit.mark_once(name="identity", key=("race",), ttl_seconds=60))

    threads = [threading.Thread(target=mark) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 15 + [True]


def _decide(previous: int, current: int, into: float, allowed: int = 3):
    limit = ratelimit.Limit(name="t", count=allowed, window=60)
    now = 60.0 * 29_000_000 + 60.0 * into
    return ratelimit._sliding_decision(limit, previous, current, now, allowed, "redis")


def test_a_full_window_waits_for_its_end_and_then_for_enough_of_it_to_slide_out():
    # 3/60, four hits 15 s into a window with nothing before: refused; the rest of this
    # window (45 s) plus the third of the next that lets one of the three slide out (20 s).
    decision = _decide(previous=0, current=4, into=0.25)
    assert (decision.allowed, decision.hits, decision.retry_after) == (False, 4, 65)


def test_when_only_the_previous_window_is_in_the_way_the_wait_is_until_enough_of_it_slid_out():
    # 3/60, 3 hits last window, 1 now, half-way through: 3 x 1/2 + 1 = 2.5 fits; one more
    # fits once the previous window weighs 1 (two thirds of the way through): 10 s.
    decision = _decide(previous=3, current=1, into=0.5)
    assert (decision.allowed, decision.hits, decision.retry_after) == (True, 3, 10)


def test_a_wait_already_over_is_reported_as_one_second():
    decision = _decide(previous=1, current=1, into=0.5)
    assert (decision.allowed, decision.retry_after) == (True, 1)


def test_a_window_counter_lives_through_the_next_window_and_no_longer(strict_limits):
    strict_limits(search_key="5/60")
    ratelimit.rate_limit_hit(limit=ratelimit.limit_get("search_key"), key=("ttl",))
    client = ratelimit._redis.get()
    (counter,) = client.keys(f"{ratelimit.KEY_PREFIX}:search_key:*")
    assert 120 <= client.ttl(counter) <= 121  # two windows and a second


def test_a_hit_can_cost_more_than_one(strict_limits):
    strict_limits(search_key="5/60")
    ratelimit.rate_limit_enforce(name="search_key", key=("bulk",), cost=3)
    with pytest.raises(RateLimited):
        ratelimit.rate_limit_enforce(name="search_key", key=("bulk",), cost=3)
    limit = ratelimit.limit_get("search_key")
    assert ratelimit.rate_limit_hit(limit=limit, key=("bulk",), cost=2).hits == 5


def test_the_refusal_says_the_limit_or_the_callers_own_words(strict_limits):
    strict_limits(search_key="1/60")
    ratelimit.rate_limit_enforce(name="search_key", key=("words",))
    with pytest.raises(RateLimited) as default:
        ratelimit.rate_limit_enforce(name="search_key", key=("words",))
    assert default.value.detail == "Too many requests (1 per 60 s); try again later."
    with pytest.raises(RateLimited) as own:
        ratelimit.rate_limit_enforce(name="search_key", key=("words",), detail="Slow down.")
    assert own.value.detail == "Slow down."


def test_a_limit_reads_count_and_seconds_and_a_bad_one_names_itself():
    assert ratelimit.parse_limit("login_ip", "5/1") == ratelimit.Limit("login_ip", 5, 1)
    with pytest.raises(ImproperlyConfigured) as bad:
        ratelimit.parse_limit("login_ip", "five/60")
    assert str(bad.value) == "Rate limit login_ip: 'five/60' is not '<count>/<seconds>'."
    with pytest.raises(ImproperlyConfigured) as zero:
        ratelimit.parse_limit("login_ip", "5/0")
    assert str(zero.value) == "Rate limit login_ip: count and seconds must be positive."


def test_counter_keys_are_the_same_in_every_release():
    """Processes of two releases share Redis during a rolling deploy: a key's digest must not
    change, or each release counts apart and a client gets twice the limit."""
    import hashlib

    assert (
        ratelimit._digest(("203.0.113.9", 7))
        == (hashlib.sha256(b"203.0.113.9\x1f7").hexdigest()[:32])
    )
    assert ratelimit._digest(("a", "b")) == "f04cdced9736a69da6103f08a4daaf8c"


def test_the_redis_client_gives_up_on_a_silent_redis_within_its_timeout(settings):
    """A Redis that accepts the connection and never answers must not hold a request: the
    limiter falls back within RATE_LIMIT_REDIS_TIMEOUT_S."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # accepts (the kernel does), never reads or answers
    try:
        settings.REDIS_URL = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        settings.RATE_LIMIT_REDIS_TIMEOUT_S = 0.3
        state = ratelimit._RedisState()
        client = state.get()
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (0.3, 0.3)
        started = time.monotonic()
        with pytest.raises(ratelimit.redis.RedisError):
            client.ping()
        assert time.monotonic() - started < 5
    finally:
        silent.close()


def test_with_a_divisor_of_one_the_fallback_allows_the_whole_count(
    redis_down, strict_limits, settings
):
    strict_limits(message_customer="3/60")
    settings.RATE_LIMIT_FALLBACK_DIVISOR = 1
    limit = ratelimit.limit_get("message_customer")
    allowed = [ratelimit.rate_limit_hit(limit=limit, key=("d1",)).allowed for _ in range(4)]
    assert allowed == [True, True, True, False]


def test_the_fallback_counts_each_key_and_limit_apart(redis_down, strict_limits, settings):
    strict_limits(message_customer="2/60", search_key="2/60")
    settings.RATE_LIMIT_FALLBACK_DIVISOR = 1
    customer, search = ratelimit.limit_get("message_customer"), ratelimit.limit_get("search_key")
    for _ in range(2):
        assert ratelimit.rate_limit_hit(limit=customer, key=("ann",)).allowed
    assert not ratelimit.rate_limit_hit(limit=customer, key=("ann",)).allowed
    assert ratelimit.rate_limit_hit(limit=customer, key=("bob",)).allowed  # another customer
    assert ratelimit.rate_limit_hit(limit=search, key=("ann",)).allowed  # another limit


def test_a_hit_that_meets_a_dead_redis_logs_the_cause(redis_down, strict_limits, caplog):
    strict_limits(message_customer="3/60")
    with caplog.at_level("WARNING", logger="supportbot.ratelimit"):
        ratelimit.rate_limit_hit(limit=ratelimit.limit_get("message_customer"), key=("c",))
    (record,) = [r for r in caplog.records if r.name == "supportbot.ratelimit"]
    assert "fall back to in-process counters: Error" in record.getMessage()


def test_a_reset_forgets_redis_counters_and_only_the_limiters(settings, strict_limits):
    strict_limits(search_key="1/60")
    limit = ratelimit.limit_get("search_key")
    client = ratelimit._redis.get()
    client.set("not-ours:keep", "1", ex=60)
    ratelimit._redis.down_until = time.monotonic() + 60  # a reset also ends a fallback
    ratelimit.rate_limits_reset()
    assert ratelimit.redis_available()
    ratelimit.rate_limit_hit(limit=limit, key=("r",))
    ratelimit._local.clear()
    ratelimit.rate_limits_reset()
    assert ratelimit.rate_limit_hit(limit=limit, key=("r",)).allowed  # Redis forgot it too
    assert client.get("not-ours:keep") == b"1"
    client.delete("not-ours:keep")


def test_the_fallback_share_is_whole_hits_and_the_previous_window_still_weighs(
    redis_down, strict_limits, settings, monkeypatch
):
    strict_limits(message_customer="5/60")
    settings.RATE_LIMIT_FALLBACK_DIVISOR = 2  # 5 // 2: two hits a window, not two and a half
    limit = ratelimit.limit_get("message_customer")
    clock = [600.0 * 60 + 30]  # the middle of a window
    monkeypatch.setattr(ratelimit.time, "time", lambda: clock[0])
    assert ratelimit.rate_limit_hit(limit=limit, key=("w",)).allowed
    clock[0] += 60  # the middle of the next window: half of that hit still counts
    assert ratelimit.rate_limit_hit(limit=limit, key=("w",)).allowed  # 0.5 + 1
    assert not ratelimit.rate_limit_hit(limit=limit, key=("w",)).allowed  # 0.5 + 2 > 2
