import asyncio
import contextlib
import uuid

import pytest
from django.conf import settings
from redis.asyncio import Redis

from inference.admission import TenantLimiter, check_caps, estimate_prompt_tokens
from inference.errors import InputTooLarge, TenantRateLimited


@pytest.fixture
async def redis():
    client = Redis.from_url(settings.REDIS_URL)
    yield client
    await client.aclose()


def limiter(redis, **kw) -> TenantLimiter:
    opts = {"tokens_per_minute": 600, "burst": 1000, "max_concurrency": 2}
    opts.update(kw)
    return TenantLimiter(redis, prefix=f"sb:test:{uuid.uuid4().hex[:8]}", **opts)


def test_estimate_grows_with_text_and_messages():
    one = estimate_prompt_tokens([{"role": "user", "content": "x" * 350}])
    assert 100 <= one <= 110
    two = estimate_prompt_tokens(
        [{"role": "system", "content": ""}, {"role": "user", "content": "x" * 350}]
    )
    assert two > one


def test_hard_caps_reject_oversized_input_and_output():
    check_caps(prompt_tokens=100, max_tokens=100, max_input=100, max_output=100)
    with pytest.raises(InputTooLarge, match="max_tokens"):
        check_caps(prompt_tokens=1, max_tokens=101, max_input=100, max_output=100)
    with pytest.raises(InputTooLarge, match="prompt"):
        check_caps(prompt_tokens=101, max_tokens=1, max_input=100, max_output=100)
    with pytest.raises(InputTooLarge):
        check_caps(prompt_tokens=1, max_tokens=0, max_input=100, max_output=100)


async def test_bucket_admits_until_empty_then_rate_limits_with_retry_after(redis):
    lim = limiter(redis, max_concurrency=10)
    await lim.acquire(tenant_id=1, cost=600, lease_ttl_s=60)
    await lim.acquire(tenant_id=1, cost=390, lease_ttl_s=60)
    with pytest.raises(TenantRateLimited) as err:
        await lim.acquire(tenant_id=1, cost=300, lease_ttl_s=60)
    # ~10 left, 290 missing at 10 tokens/s -> ~29 s.
    assert 27 <= err.value.retry_after <= 30
    assert err.value.status == 429
    assert err.value.extra["retry_after"] >= 27


async def test_tenants_have_separate_buckets(redis):
    lim = limiter(redis)
    await lim.acquire(tenant_id=1, cost=1000, lease_ttl_s=60)
    await lim.acquire(tenant_id=2, cost=1000, lease_ttl_s=60)


async def test_concurrency_cap_and_release(redis):
    lim = limiter(redis)
    a = await lim.acquire(tenant_id=7, cost=1, lease_ttl_s=60)
    await lim.acquire(tenant_id=7, cost=1, lease_ttl_s=60)
    with pytest.raises(TenantRateLimited, match="in flight"):
        await lim.acquire(tenant_id=7, cost=1, lease_ttl_s=60)
    await lim.release(a)
    assert await lim.in_flight(tenant_id=7) == 1
    await lim.acquire(tenant_id=7, cost=1, lease_ttl_s=60)


async def test_expired_leases_free_their_slot(redis):
    lim = limiter(redis, max_concurrency=1)
    await lim.acquire(tenant_id=3, cost=1, lease_ttl_s=0.05)
    with pytest.raises(TenantRateLimited):
        await lim.acquire(tenant_id=3, cost=1, lease_ttl_s=0.05)
    await asyncio.sleep(0.1)
    await lim.acquire(tenant_id=3, cost=1, lease_ttl_s=60)


async def test_release_refunds_unused_tokens(redis):
    lim = limiter(redis, max_concurrency=10)
    lease = await lim.acquire(tenant_id=4, cost=1000, lease_ttl_s=60)
    with pytest.raises(TenantRateLimited):
        await lim.acquire(tenant_id=4, cost=500, lease_ttl_s=60)
    await lim.release(lease, used_tokens=300)  # 700 come back
    await lim.acquire(tenant_id=4, cost=650, lease_ttl_s=60)


async def test_release_charges_use_above_the_estimate(redis):
    lim = limiter(redis, tokens_per_minute=6, max_concurrency=10)  # refills 0.1 token/s
    lease = await lim.acquire(tenant_id=5, cost=400, lease_ttl_s=60)
    await lim.release(lease, used_tokens=700)  # 300 more than estimated: 300 left
    with pytest.raises(TenantRateLimited):
        await lim.acquire(tenant_id=5, cost=310, lease_ttl_s=60)
    await lim.acquire(tenant_id=5, cost=290, lease_ttl_s=60)


async def test_two_limiters_share_state_through_redis(redis):
    prefix = f"sb:test:{uuid.uuid4().hex[:8]}"
    other = Redis.from_url(settings.REDIS_URL)
    try:
        a = TenantLimiter(redis, tokens_per_minute=60, burst=100, max_concurrency=5, prefix=prefix)
        b = TenantLimiter(other, tokens_per_minute=60, burst=100, max_concurrency=5, prefix=prefix)
        await a.acquire(tenant_id=1, cost=80, lease_ttl_s=60)
        with pytest.raises(TenantRateLimited):
            await b.acquire(tenant_id=1, cost=80, lease_ttl_s=60)
    finally:
        await other.aclose()


async def test_cost_above_burst_can_never_pass(redis):
    lim = limiter(redis)
    with pytest.raises(InputTooLarge):
        await lim.acquire(tenant_id=1, cost=1001, lease_ttl_s=60)


async def test_a_cancel_redis_py_swallows_while_taking_a_lease_gives_the_lease_back(
    redis, monkeypatch
):
    """Python 3.11's wait_for (inside redis-py) can return the finished call instead of
    raising the cancel: the cancelled request must not go on holding a slot and tokens."""
    lim = limiter(redis, max_concurrency=1, burst=100, tokens_per_minute=1)
    real = lim._acquire
    swallowed = []

    async def swallowing(**kwargs):
        result = await real(**kwargs)
        try:
            await asyncio.sleep(30)  # the cancel lands as the call finishes
        except asyncio.CancelledError:
            swallowed.append(True)  # ... and is swallowed, as wait_for does
        return result

    monkeypatch.setattr(lim, "_acquire", swallowing)
    task = asyncio.ensure_future(lim.acquire(tenant_id=5, cost=90, lease_ttl_s=600))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert swallowed, "the seam never saw the cancel"
    assert await lim.in_flight(tenant_id=5) == 0
    monkeypatch.setattr(lim, "_acquire", real)
    # the 90 tokens came back: another 90 fit in the 100-token bucket at once
    await lim.acquire(tenant_id=5, cost=90, lease_ttl_s=600)


async def test_a_swallowed_cancel_stays_a_cancel_when_giving_the_lease_back_fails(
    redis, monkeypatch, caplog
):
    lim = limiter(redis, max_concurrency=1, burst=100, tokens_per_minute=1)
    real = lim._acquire

    async def swallowing(**kwargs):
        result = await real(**kwargs)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)  # the cancel lands as the call finishes, and is swallowed
        return result

    async def failing_release(**kwargs):
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(lim, "_acquire", swallowing)
    monkeypatch.setattr(lim, "_release", failing_release)
    task = asyncio.ensure_future(lim.acquire(tenant_id=7, cost=10, lease_ttl_s=600))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # not the ConnectionError
        await task
    assert "lease release after a cancel failed" in caplog.text
    assert await lim.in_flight(tenant_id=7) == 1  # left to expire by its TTL


async def test_a_cancel_handled_before_taking_a_lease_does_not_cancel_it(redis):
    lim = limiter(redis)
    task = asyncio.current_task()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(1)
    try:
        lease = await lim.acquire(tenant_id=6, cost=1, lease_ttl_s=60)
        assert await lim.in_flight(tenant_id=6) == 1
        await lim.release(lease)
    finally:
        task.uncancel()
