"""Worker discovery: specs, Endpoints / EndpointSlice documents served over real HTTP, DNS,
and the pool following the platform (workers added, removed and drained, API server down)."""

import asyncio
import threading
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone

from conftest import isolated_pool
from inference import discovery, services
from inference.checks import check_worker_sources
from inference.discovery import DiscoveryError, DiscoverySpec, parse_spec
from inference.gateway import ChatResult, stream_chat
from inference.models import ModelWorker
from inference.pool import Pool
from inference.tests.kube_api import FakeKubeApi, endpoints_doc, endpointslices_doc
from supportbot.tests.factories import TenantFactory

MESSAGES = [
    {"role": "system", "content": "Answer from the passages."},
    {"role": "user", "content": "Can I return opened headphones?"},
]
TOKEN = "sa-token-0123"  # noqa: S105 - a test token the fake API server expects


# ---------------------------------------------------------------------------- specs
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            "k8s-endpoints://supportbot/vllm:8000",
            DiscoverySpec("k8s-endpoints", "vllm", "8000", "supportbot"),
        ),
        (
            "k8s-endpointslices://prod/vllm:http?role=fallback&model=llama-8b",
            DiscoverySpec(
                "k8s-endpointslices", "vllm", "http", "prod", "http", "fallback", "llama-8b"
            ),
        ),
        ("k8s-endpoints://ns/vllm", DiscoverySpec("k8s-endpoints", "vllm", "", "ns")),
        (
            "dns://vllm-headless.supportbot.svc.cluster.local:8000?scheme=https",
            DiscoverySpec(
                "dns", "vllm-headless.supportbot.svc.cluster.local", "8000", scheme="https"
            ),
        ),
    ],
)
def test_discovery_specs_parse(value, expected):
    assert parse_spec(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "http://vllm:8000",  # not a discovery scheme
        "k8s-endpoints://Supportbot/vllm:8000",  # not a Kubernetes name
        "k8s-endpoints://ns/vllm:0",
        "k8s-endpoints://ns/vllm:70000",
        "k8s-endpoints://ns/../secrets:8000",
        "k8s-endpoints://user:pw@ns/vllm:8000",
        "k8s-endpoints://ns/vllm:8000?role=admin",
        "k8s-endpoints://ns/vllm:8000?verify=no",
        "dns://vllm",  # no port
        "dns://vl lm:8000",
        "dns://vllm:80x",
        "dns://vllm:8000/path",
        "dns://vllm:8000?scheme=ftp",
        "k8s-endpoints://ns/vllm\x00:8000",
    ],
)
def test_bad_discovery_specs_are_refused_with_a_reason(value):
    with pytest.raises(ValueError, match="INFERENCE_DISCOVERY"):
        parse_spec(value)


# ---------------------------------------------------------------------------- documents
SPEC = parse_spec("k8s-endpoints://supportbot/vllm:http")


def test_endpoints_document_yields_only_ready_addresses_on_the_named_port():
    doc = endpoints_doc(
        "supportbot",
        "vllm",
        [("10.0.0.7", 8000), ("10.0.0.5", 8000)],
        not_ready=[("10.0.0.9", 8000)],
    )
    found = discovery.from_endpoints(doc, SPEC)
    assert [d.base_url for d in found] == ["http://10.0.0.5:8000", "http://10.0.0.7:8000"]
    assert found[0].pod == "vllm-10-0-0-5-8000"


def test_endpoints_with_odd_entries_keep_the_good_ones():
    doc = endpoints_doc("supportbot", "vllm", [("10.0.0.5", 8000)])
    doc["subsets"][0]["addresses"] += [
        {"ip": "evil.example.com/x"},
        {"ip": "10.0.0.6\x00"},
        {"ip": None},
        "junk",
        {},
        {"ip": "fd00::1"},
    ]
    doc["subsets"].append(
        {"ports": [{"name": "http", "port": 99999}], "addresses": [{"ip": "10.0.0.8"}]}
    )
    doc["subsets"].append({"ports": "nope", "addresses": [{"ip": "10.0.0.9"}]})
    found = discovery.from_endpoints(doc, SPEC)
    assert [d.base_url for d in found] == ["http://10.0.0.5:8000", "http://[fd00::1]:8000"]


def test_port_by_number_and_the_only_port_without_one():
    doc = endpoints_doc("supportbot", "vllm", [("10.0.0.5", 8000)], port_name="api")
    assert discovery.from_endpoints(doc, parse_spec("k8s-endpoints://s/vllm:8000"))
    assert discovery.from_endpoints(doc, parse_spec("k8s-endpoints://s/vllm"))
    assert not discovery.from_endpoints(doc, parse_spec("k8s-endpoints://s/vllm:http"))
    assert not discovery.from_endpoints(doc, parse_spec("k8s-endpoints://s/vllm:8001"))


@pytest.mark.parametrize(
    "doc", [None, [], "Endpoints", {"kind": "Status"}, {"kind": "Endpoints", "subsets": "x"}]
)
def test_a_document_that_is_not_endpoints_is_an_error(doc):
    with pytest.raises(DiscoveryError):
        discovery.from_endpoints(doc, SPEC)


def test_endpointslices_leave_out_terminating_and_not_ready_endpoints():
    doc = endpointslices_doc(
        "vllm",
        [
            ("10.0.0.5", 8000, {"ready": True, "serving": True, "terminating": False}),
            ("10.0.0.6", 8000, {"ready": False, "serving": True, "terminating": True}),
            ("10.0.0.7", 8000, {"ready": False}),
            ("10.0.0.8", 8000, {}),  # no condition: ready, as the API defines
            ("fd00::2", 8000, {"ready": True}),
        ],
    )
    spec = parse_spec("k8s-endpointslices://supportbot/vllm:http")
    found = discovery.from_endpointslices(doc, spec)
    assert [d.base_url for d in found] == [
        "http://10.0.0.5:8000",
        "http://10.0.0.8:8000",
        "http://[fd00::2]:8000",
    ]


# ---------------------------------------------------------------------------- over HTTP
@pytest.fixture
def kube(tmp_path):
    api = FakeKubeApi(namespace="supportbot", service="vllm", token=TOKEN).start()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    api.token_file = token
    yield api
    api.stop()


def kube_api(kube) -> discovery.KubernetesApi:
    return discovery.KubernetesApi(url=kube.url, token_path=kube.token_file)


async def test_endpoints_are_read_from_the_api_server_with_the_service_account_token(kube):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("10.1.2.3", 8000)])
    found = await discovery.discover(SPEC, api=kube_api(kube))
    assert [d.base_url for d in found] == ["http://10.1.2.3:8000"]
    path, auth = kube.requests[-1]
    assert path == "/api/v1/namespaces/supportbot/endpoints/vllm"
    assert auth == f"Bearer {TOKEN}"


async def test_endpointslices_are_listed_by_the_service_name_label(kube):
    kube.slices = endpointslices_doc("vllm", [("10.1.2.4", 8000, {"ready": True})])
    spec = parse_spec("k8s-endpointslices://supportbot/vllm:http")
    found = await discovery.discover(spec, api=kube_api(kube))
    assert [d.base_url for d in found] == ["http://10.1.2.4:8000"]
    assert "labelSelector=kubernetes.io%2Fservice-name%3Dvllm" in kube.requests[-1][0]


async def test_a_rotated_token_is_read_again_on_every_call(kube):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("10.1.2.3", 8000)])
    await discovery.discover(SPEC, api=kube_api(kube))
    kube.token = "rotated-token"  # noqa: S105
    kube.token_file.write_text("rotated-token")
    await discovery.discover(SPEC, api=kube_api(kube))
    assert kube.requests[-1][1] == "Bearer rotated-token"


@pytest.mark.parametrize(
    "setup",
    ["wrong_token", "forbidden", "not_found", "not_json", "no_token_file", "down"],
)
async def test_every_api_server_failure_is_a_discovery_error(kube, setup):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("10.1.2.3", 8000)])
    api = kube_api(kube)
    if setup == "wrong_token":
        kube.token = "other"  # noqa: S105
    elif setup == "forbidden":
        kube.status = 403
    elif setup == "not_found":
        kube.endpoints = None
    elif setup == "not_json":
        kube.body = b"\xff\xfe<html>"
    elif setup == "no_token_file":
        kube.token_file.unlink()
    else:
        kube.stop()
    with pytest.raises(DiscoveryError):
        await discovery.discover(SPEC, api=api, timeout_s=1.0)


# ---------------------------------------------------------------------------- DNS
async def test_dns_discovery_makes_one_worker_per_address():
    asked = []

    async def resolver(host, port):
        asked.append((host, port))
        return ["10.0.0.2", "10.0.0.1", "10.0.0.2", "not-an-ip", "fd00::3"]

    spec = parse_spec("dns://vllm-headless.supportbot.svc:8000")
    found = await discovery.discover(spec, resolver=resolver)
    assert [d.base_url for d in found] == [
        "http://10.0.0.1:8000",
        "http://10.0.0.2:8000",
        "http://[fd00::3]:8000",
    ]
    assert asked == [("vllm-headless.supportbot.svc", 8000)]


async def test_dns_discovery_uses_the_system_resolver():
    found = await discovery.discover(parse_spec("dns://localhost:8000"))
    assert "http://127.0.0.1:8000" in {d.base_url for d in found} or any(
        d.base_url == "http://[::1]:8000" for d in found
    )


async def test_a_failed_or_slow_dns_lookup_is_a_discovery_error():
    async def failing(host, port):
        raise OSError("Name or service not known")

    async def slow(host, port):
        await asyncio.sleep(5)
        return ["10.0.0.1"]

    spec = parse_spec("dns://vllm:8000")
    with pytest.raises(DiscoveryError):
        await discovery.discover(spec, resolver=failing)
    with pytest.raises(DiscoveryError):
        await discovery.discover(spec, resolver=slow, timeout_s=0.2)


# ---------------------------------------------------------------------------- the pool
def _port(server) -> int:
    return server.port


@pytest.fixture
def discovery_settings(fast_settings, kube):
    fast_settings.INFERENCE = {
        **fast_settings.INFERENCE,
        "DISCOVERY": "k8s-endpoints://supportbot/vllm:http",
        "DISCOVERY_INTERVAL_S": 0.0,
        "DISCOVERY_API_URL": kube.url,
        "DISCOVERY_TOKEN_PATH": str(kube.token_file),
        "DRAIN_TIMEOUT_S": 30.0,
    }
    return fast_settings


def _rows() -> dict[str, str]:
    return {w.base_url: w.state for w in ModelWorker.objects.all()}


def _age_rows(*, seconds: float) -> None:
    """Pretend the rows last changed `seconds` ago (the drain clock)."""
    ModelWorker.objects.update(updated_at=timezone.now() - timedelta(seconds=seconds))


def _tenant_id() -> int:
    return TenantFactory(slug="disc-test").id


@pytest.mark.django_db(transaction=True)
async def test_pool_follows_workers_added_and_removed_from_the_endpoints(
    discovery_settings, kube, replay, replay2
):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
    async with isolated_pool() as pool:
        await pool.ensure_running()
        assert {w.base_url for w in pool.workers.values()} == {replay.url}
        assert pool.has_healthy_worker()
        picked, _ = await pool.pick(
            role="primary",
            affinity_key=None,
            exclude=frozenset(),
            deadline=asyncio.get_running_loop().time() + 1,
        )
        pool.release(picked)
        assert picked.base_url == replay.url

        # Scale up: the second pod shows up in the endpoints, no configuration change.
        kube.endpoints = endpoints_doc(
            "supportbot", "vllm", [("127.0.0.1", _port(replay)), ("127.0.0.1", _port(replay2))]
        )
        await pool.poll_once()
        await pool.poll_once()  # the new worker's first scrape
        ready = {v.key for v in pool.views() if v.ready and v.healthy}
        assert ready == {
            services.discovered_worker_name(replay.url),
            services.discovered_worker_name(replay2.url),
        }

        # Scale down: the first pod leaves; it drains, the router never picks it again.
        kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay2))])
        await pool.poll_once()
        gone = pool.workers[services.discovered_worker_name(replay.url)]
        assert gone.state == ModelWorker.State.DRAINING
        for n in range(20):
            ws, _ = await pool.pick(
                role="primary",
                affinity_key=f"conv-{n}",
                exclude=frozenset(),
                deadline=asyncio.get_running_loop().time() + 1,
            )
            pool.release(ws)
            assert ws.base_url == replay2.url
        rows = await sync_to_async(_rows)()
        assert rows == {replay.url: "draining", replay2.url: "ready"}


@pytest.mark.django_db(transaction=True)
async def test_a_call_in_flight_on_a_removed_worker_finishes(discovery_settings, kube, replay):
    tenant_id = await sync_to_async(_tenant_id)()
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
    replay.behaviour.chunk_delay_s = 0.05
    async with isolated_pool() as pool:
        await pool.ensure_running()
        stream = stream_chat(tenant_id=tenant_id, messages=MESSAGES, affinity_key="c1")
        first = await anext(stream)
        assert first.text is not None
        # The pod is being deleted: it leaves the endpoints mid-answer.
        kube.endpoints = endpoints_doc("supportbot", "vllm", [])
        await pool.poll_once()
        name = services.discovered_worker_name(replay.url)
        assert pool.workers[name].state == ModelWorker.State.DRAINING
        assert not pool.has_healthy_worker()
        items = [item async for item in stream]
        result = items[-1]
        assert isinstance(result, ChatResult)
        assert result.finish_reason == "stop"
        assert pool.workers[name].inflight == 0
        await pool.flush()


@pytest.mark.django_db(transaction=True)
async def test_api_server_down_keeps_the_last_known_workers(discovery_settings, kube, replay):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
    async with isolated_pool() as pool:
        await pool.ensure_running()
        kube.stop()
        for _ in range(3):
            await pool.poll_once()
        assert pool.discovery.error
        assert pool.has_healthy_worker()
        assert await sync_to_async(_rows)() == {replay.url: "ready"}


@pytest.mark.django_db(transaction=True)
async def test_an_api_server_answering_garbage_keeps_the_last_known_workers(
    discovery_settings, kube, replay
):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
    async with isolated_pool() as pool:
        await pool.ensure_running()
        kube.endpoints = {"kind": "Endpoints", "subsets": "not a list"}
        await pool.poll_once()
        kube.endpoints, kube.status = None, 500
        await pool.poll_once()
        assert pool.has_healthy_worker()


@pytest.mark.django_db(transaction=True)
async def test_a_drained_worker_is_stopped_after_the_drain_timeout(
    discovery_settings, kube, replay
):
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
    async with isolated_pool() as pool:
        await pool.ensure_running()
        kube.endpoints = endpoints_doc("supportbot", "vllm", [])
        await pool.poll_once()
        assert await sync_to_async(_rows)() == {replay.url: "draining"}
        await pool.poll_once()
        assert await sync_to_async(_rows)() == {replay.url: "draining"}  # within 30 s
        await sync_to_async(_age_rows)(seconds=31)
        await pool.poll_once()
        assert await sync_to_async(_rows)() == {replay.url: "stopped"}
        await pool.poll_once()
        assert pool.workers == {}
        # The pod comes back (same IP): ready again.
        kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
        await pool.poll_once()
        assert await sync_to_async(_rows)() == {replay.url: "ready"}


@pytest.mark.django_db(transaction=True)
async def test_dns_discovery_through_the_pool_with_a_resolver_seam(fast_settings, replay, replay2):
    fast_settings.INFERENCE = {
        **fast_settings.INFERENCE,
        "DISCOVERY": f"dns://vllm-headless:{_port(replay)}",
        "DISCOVERY_INTERVAL_S": 0.0,
    }
    answers = [["127.0.0.1"]]

    async def resolver(host, port):
        if isinstance(answers[-1], Exception):
            raise answers[-1]
        return answers[-1]

    async with isolated_pool() as pool:
        pool.discovery.resolver = resolver
        await pool.ensure_running()
        assert {w.base_url for w in pool.workers.values()} == {replay.url}
        answers.append(OSError("SERVFAIL"))
        await pool.poll_once()
        assert pool.has_healthy_worker()  # last known set kept
        answers.append([])
        await pool.poll_once()
        assert not pool.has_healthy_worker()  # an answer with no pods: all drain


@pytest.mark.django_db(transaction=True)
def test_processes_syncing_at_once_never_duplicate_or_fail():
    """Eight threads (as many web processes) sync overlapping sets at the same moment."""
    urls = [f"http://10.9.0.{i}:8000" for i in range(1, 6)]
    barrier = threading.Barrier(8)
    errors = []

    def sync(n: int) -> None:
        try:
            barrier.wait()
            services.workers_sync_discovered(
                base_urls=urls if n % 2 else urls[:3],
                role="primary",
                model_name="m",
                drain_after_s=30,
            )
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sync, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = ModelWorker.objects.filter(source="discovered")
    assert sorted(rows.values_list("base_url", flat=True)) == urls
    services.workers_sync_discovered(
        base_urls=urls, role="primary", model_name="m", drain_after_s=30
    )
    assert set(rows.values_list("state", flat=True)) == {"ready"}


@pytest.mark.django_db
def test_sync_refuses_an_unknown_role():
    with pytest.raises(ValueError, match="role"):
        services.workers_sync_discovered(base_urls=[], role="root", model_name="m", drain_after_s=1)


# ---------------------------------------------------------------------------- start-up
@pytest.mark.parametrize(
    ("key", "value", "code"),
    [
        ("DISCOVERY", "k8s-endpoints://Bad_NS/vllm:8000", "inference.E001"),
        ("DISCOVERY", "dns://vllm", "inference.E001"),
        ("WORKERS", "ftp://x:1", "inference.E002"),
    ],
)
def test_a_malformed_worker_source_fails_the_system_check(settings, key, value, code):
    settings.INFERENCE = {**settings.INFERENCE, key: value}
    assert [e.id for e in check_worker_sources()] == [code]


def test_a_good_discovery_spec_passes_the_system_check(settings):
    settings.INFERENCE = {**settings.INFERENCE, "DISCOVERY": "dns://vllm:8000", "WORKERS": ""}
    assert check_worker_sources() == []


# ---------------------------------------------------------------------------- faults, races
@pytest.mark.django_db(transaction=True)
async def test_a_slow_api_server_times_out_and_the_last_set_stays(discovery_settings, kube, replay):
    discovery_settings.INFERENCE = {**discovery_settings.INFERENCE, "DISCOVERY_TIMEOUT_S": 0.3}
    kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay))])
    async with isolated_pool() as pool:
        await pool.ensure_running()
        kube.delay_s = 2.0
        started = asyncio.get_running_loop().time()
        await pool.poll_once()
        assert asyncio.get_running_loop().time() - started < 1.5
        assert "unreachable" in pool.discovery.error
        assert pool.has_healthy_worker()
        kube.delay_s = 0.0


@pytest.mark.django_db(transaction=True)
async def test_two_pools_polling_at_once_agree_on_the_workers(
    discovery_settings, kube, replay, replay2
):
    """Two processes' pools (here two pools on one loop, one database) sync concurrently."""
    kube.endpoints = endpoints_doc(
        "supportbot", "vllm", [("127.0.0.1", _port(replay)), ("127.0.0.1", _port(replay2))]
    )
    async with isolated_pool() as first:
        second = Pool(redis_prefix="sb:test:second")
        try:
            await asyncio.gather(first.ensure_running(), second.ensure_running())
            for _ in range(5):
                await asyncio.gather(first.poll_once(), second.poll_once())
            kube.endpoints = endpoints_doc("supportbot", "vllm", [("127.0.0.1", _port(replay2))])
            await asyncio.gather(first.poll_once(), second.poll_once())
            for pool in (first, second):
                states = {w.base_url: w.state for w in pool.workers.values()}
                assert states == {replay.url: "draining", replay2.url: "ready"}
            assert await sync_to_async(_rows)() == {replay.url: "draining", replay2.url: "ready"}
        finally:
            await second.stop()
