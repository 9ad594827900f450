import asyncio

import pytest
from asgiref.sync import sync_to_async

from inference.asgi import PoolPollerMiddleware
from inference.models import ModelWorker
from inference.tests.factories import ModelWorkerFactory

pytestmark = pytest.mark.django_db(transaction=True)


async def test_first_http_request_starts_the_poller_without_waiting_for_it(pool, replay):
    await sync_to_async(ModelWorkerFactory)(name="w-a", base_url=replay.url)
    calls = []

    async def app(scope, receive, send):
        calls.append(scope["type"])

    middleware = PoolPollerMiddleware(app)
    await middleware({"type": "http"}, None, None)
    assert calls == ["http"]
    for _ in range(50):
        if pool.running_in(asyncio.get_running_loop()):
            break
        await asyncio.sleep(0.05)
    assert pool.running_in(asyncio.get_running_loop())
    row = await sync_to_async(ModelWorker.objects.get)(name="w-a")
    assert row.healthy
    assert row.last_metrics["generation_tokens"] == 44.0


async def test_websocket_scopes_do_not_start_the_poller(pool):
    async def app(scope, receive, send):
        return None

    await PoolPollerMiddleware(app)({"type": "websocket"}, None, None)
    await asyncio.sleep(0.05)
    assert pool.last_poll_at is None
