"""Find vLLM workers from the platform: Kubernetes endpoints or a headless Service's DNS.

`INFERENCE_DISCOVERY` names the source; the pool asks it every `discovery_interval_s` and
syncs the registry with the answer (`services.workers_sync_discovered`), so scaling the vLLM
Deployment needs no configuration change:

- `k8s-endpointslices://<namespace>/<service>[:<port>]` - the Service's EndpointSlices
  (`discovery.k8s.io/v1`); endpoints whose `ready` condition is false (starting, or
  terminating) are left out, so a pod being deleted stops getting new requests;
- `k8s-endpoints://<namespace>/<service>[:<port>]` - the core/v1 Endpoints object (only
  `addresses`, never `notReadyAddresses`);
- `dns://<host>:<port>` - the A/AAAA records of a headless Service (DNS answers only ready
  pods unless the Service publishes not-ready addresses).

`<port>` is a port number or the port's name in the endpoints; without it the only port is
taken. A query string may set `role` and `model` of the discovered workers
(`?role=primary&model=llama-3.1-8b`) and `scheme` (`http` or `https`).

The Kubernetes API is read with the pod's service-account token (re-read on every call: the
kubelet rotates it) and CA. Any failure raises `DiscoveryError`; the pool then keeps the last
set it knew (an API server restart must not empty the pool).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, parse_qs, urlsplit

import httpx

from inference.config import InferenceConfig
from inference.models import ModelWorker

logger = logging.getLogger(__name__)

KINDS = ("k8s-endpointslices", "k8s-endpoints", "dns")
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$")
_HOST_LABEL = r"[A-Za-z0-9_]([-A-Za-z0-9_]*[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_HOST_LABEL}(\.{_HOST_LABEL})*\.?$")

Resolver = Callable[[str, int], Awaitable[list[str]]]


class DiscoveryError(Exception):
    """The source could not be read or answered something unusable; keep the last set."""


@dataclass(frozen=True)
class DiscoverySpec:
    kind: str
    host: str  # the Service name (k8s) or DNS name
    port: str  # a number, a port name, or "" (the only port)
    namespace: str = ""
    scheme: str = "http"
    role: str = ModelWorker.Role.PRIMARY
    model: str = ""


@dataclass(frozen=True)
class Discovered:
    """One worker the source reported ready."""

    base_url: str
    pod: str = ""


def parse_spec(value: str) -> DiscoverySpec:
    """Parse `INFERENCE_DISCOVERY`; raise ValueError naming what is wrong."""
    parts = urlsplit(value.strip())
    kind = parts.scheme.lower()
    if kind not in KINDS:
        raise ValueError(f"INFERENCE_DISCOVERY: scheme {parts.scheme!r} not one of {KINDS}")
    if "@" in parts.netloc or parts.fragment:
        raise ValueError("INFERENCE_DISCOVERY: no user, password or fragment allowed")
    scheme, role, model = _parse_options(parts.query)
    if kind == "dns":
        host, port = _dns_address(parts)
        return DiscoverySpec(kind, host, port, scheme=scheme, role=role, model=model)
    namespace, service, port = _kubernetes_service(kind, parts)
    return DiscoverySpec(kind, service, port, namespace, scheme, role, model)


def _parse_options(query_string: str) -> tuple[str, str, str]:
    """`(scheme, role, model)` from the query string (the last value of each wins)."""
    try:
        query = parse_qs(query_string, strict_parsing=bool(query_string))
    except ValueError as exc:
        raise ValueError(f"INFERENCE_DISCOVERY: bad query {query_string!r}") from exc
    unknown = set(query) - {"role", "model", "scheme"}
    if unknown:
        raise ValueError(f"INFERENCE_DISCOVERY: unknown options {sorted(unknown)}")
    role = query.get("role", [ModelWorker.Role.PRIMARY])[-1]
    if role not in ModelWorker.Role.values:
        raise ValueError(f"INFERENCE_DISCOVERY: role {role!r} not one of {ModelWorker.Role.values}")
    scheme = query.get("scheme", ["http"])[-1]
    if scheme not in ("http", "https"):
        raise ValueError(f"INFERENCE_DISCOVERY: scheme option {scheme!r} is not http or https")
    return scheme, role, query.get("model", [""])[-1].strip()


def _dns_address(parts: SplitResult) -> tuple[str, str]:
    """`(host, port)` of `dns://<host>:<port>`."""
    host, sep, port = parts.netloc.rpartition(":")
    if not sep or not _HOSTNAME.match(host) or parts.path not in ("", "/"):
        raise ValueError("INFERENCE_DISCOVERY: expected dns://<host>:<port>")
    _check_port_number(port)
    return host, port


def _kubernetes_service(kind: str, parts: SplitResult) -> tuple[str, str, str]:
    """`(namespace, service, port)` of `<kind>://<namespace>/<service>[:<port>]`."""
    namespace = parts.netloc
    service, _, port = parts.path.lstrip("/").partition(":")
    if not _DNS1123_LABEL.match(namespace) or not _DNS1123_LABEL.match(service):
        raise ValueError(
            f"INFERENCE_DISCOVERY: expected {kind}://<namespace>/<service>[:<port>] with "
            "Kubernetes names (lower-case letters, digits, '-')"
        )
    if port and not port.isdigit() and not _PORT_NAME.match(port):
        raise ValueError(f"INFERENCE_DISCOVERY: {port!r} is neither a port number nor a name")
    if port.isdigit():
        _check_port_number(port)
    return namespace, service, port


def _check_port_number(port: str) -> None:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"INFERENCE_DISCOVERY: port {port!r} is not 1-65535")


def _base_url(scheme: str, address: str, port: int) -> str | None:
    """`scheme://ip:port` for a literal IP (brackets for IPv6); None for anything else."""
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        return None
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    return f"{scheme}://{host}:{port}"


def _pick_port(ports: object, wanted: str) -> int | None:
    """The port of an endpoints `ports` list matching `wanted` (number or name, or the only
    one when `wanted` is empty); None when none matches."""
    if not isinstance(ports, list):
        return None
    candidates = [p for p in ports if isinstance(p, dict) and isinstance(p.get("port"), int)]
    if not wanted:
        match = candidates if len(candidates) == 1 else []
    elif wanted.isdigit():
        match = [p for p in candidates if p["port"] == int(wanted)]
    else:
        match = [p for p in candidates if p.get("name") == wanted]
    if not match or not 0 < match[0]["port"] < 65536:
        return None
    return match[0]["port"]


def _require_kind(doc: object, kind: str) -> dict:
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        got = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise DiscoveryError(f"expected a {kind} document, got {got!r}")
    return doc


def from_endpoints(doc: object, spec: DiscoverySpec) -> list[Discovered]:
    """Ready addresses of a core/v1 `Endpoints` document (`notReadyAddresses` are left out)."""
    doc = _require_kind(doc, "Endpoints")
    subsets = doc.get("subsets") or []
    if not isinstance(subsets, list):
        raise DiscoveryError("Endpoints.subsets is not a list")
    found: dict[str, Discovered] = {}
    for subset in subsets:
        if not isinstance(subset, dict):
            continue
        port = _pick_port(subset.get("ports"), spec.port)
        addresses = subset.get("addresses") or []
        if port is None or not isinstance(addresses, list):
            continue
        for address in addresses:
            if not isinstance(address, dict):
                continue
            url = _base_url(spec.scheme, address.get("ip", ""), port)
            if url:
                found[url] = Discovered(url, _pod_name(address.get("targetRef")))
    return sorted(found.values(), key=lambda d: d.base_url)


def from_endpointslices(doc: object, spec: DiscoverySpec) -> list[Discovered]:
    """Ready endpoints of an `EndpointSliceList` (a missing `ready` condition means ready,
    as the API defines; terminating endpoints report ready=false)."""
    doc = _require_kind(doc, "EndpointSliceList")
    items = doc.get("items") or []
    if not isinstance(items, list):
        raise DiscoveryError("EndpointSliceList.items is not a list")
    found: dict[str, Discovered] = {}
    for item in items:
        if not isinstance(item, dict) or item.get("addressType") not in ("IPv4", "IPv6"):
            continue
        port = _pick_port(item.get("ports"), spec.port)
        endpoints = item.get("endpoints") or []
        if port is None or not isinstance(endpoints, list):
            continue
        for endpoint in endpoints:
            if not isinstance(endpoint, dict):
                continue
            conditions = endpoint.get("conditions") or {}
            if not isinstance(conditions, dict) or conditions.get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                url = _base_url(spec.scheme, address, port)
                if url:
                    found[url] = Discovered(url, _pod_name(endpoint.get("targetRef")))
    return sorted(found.values(), key=lambda d: d.base_url)


def _pod_name(ref: object) -> str:
    if isinstance(ref, dict) and ref.get("kind") == "Pod" and isinstance(ref.get("name"), str):
        return ref["name"][:100]
    return ""


@dataclass(frozen=True)
class KubernetesApi:
    """Where and how to reach the API server (in a pod: the service-account files)."""

    url: str
    token_path: Path = SA_DIR / "token"
    ca_path: Path = SA_DIR / "ca.crt"

    def headers(self) -> dict[str, str]:
        try:
            token = self.token_path.read_text().strip()
        except OSError as exc:
            raise DiscoveryError(f"cannot read the service-account token: {exc}") from exc
        return {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def verify(self) -> bool | str:
        if not self.url.startswith("https://"):
            return True
        return str(self.ca_path) if self.ca_path.exists() else True


def endpoints_path(spec: DiscoverySpec) -> str:
    if spec.kind == "k8s-endpoints":
        return f"/api/v1/namespaces/{spec.namespace}/endpoints/{spec.host}"
    return (
        f"/apis/discovery.k8s.io/v1/namespaces/{spec.namespace}/endpointslices"
        f"?labelSelector=kubernetes.io%2Fservice-name%3D{spec.host}"
    )


async def read_kubernetes(
    spec: DiscoverySpec, *, api: KubernetesApi, timeout_s: float
) -> list[Discovered]:
    """Ask the API server for the Service's endpoints; raise DiscoveryError on any failure."""
    if not api.url:
        raise DiscoveryError("no Kubernetes API address (KUBERNETES_SERVICE_HOST is unset)")
    try:
        async with httpx.AsyncClient(verify=api.verify(), timeout=timeout_s) as http:
            response = await http.get(
                api.url.rstrip("/") + endpoints_path(spec), headers=api.headers()
            )
    except httpx.HTTPError as exc:
        raise DiscoveryError(f"Kubernetes API unreachable: {exc!r}") from exc
    if response.status_code != 200:
        raise DiscoveryError(f"Kubernetes API answered {response.status_code}")
    try:
        doc = response.json()
    except ValueError as exc:
        raise DiscoveryError("Kubernetes API answered something that is not JSON") from exc
    if spec.kind == "k8s-endpoints":
        return from_endpoints(doc, spec)
    return from_endpointslices(doc, spec)


async def system_resolver(host: str, port: int) -> list[str]:
    """The A/AAAA records of `host` through the system resolver (cluster DNS in a pod)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


async def read_dns(
    spec: DiscoverySpec, *, resolver: Resolver, timeout_s: float
) -> list[Discovered]:
    """One worker per address the name resolves to; raise DiscoveryError on a failed lookup."""
    try:
        async with asyncio.timeout(timeout_s):
            addresses = await resolver(spec.host, int(spec.port))
    except (OSError, TimeoutError) as exc:
        raise DiscoveryError(f"DNS lookup of {spec.host} failed: {exc!r}") from exc
    urls = {_base_url(spec.scheme, a, int(spec.port)) for a in addresses}
    return [Discovered(url) for url in sorted(u for u in urls if u)]


async def discover(
    spec: DiscoverySpec,
    *,
    api: KubernetesApi | None = None,
    resolver: Resolver = system_resolver,
    timeout_s: float = 3.0,
) -> list[Discovered]:
    """The workers the source reports ready now, sorted by URL."""
    if spec.kind == "dns":
        return await read_dns(spec, resolver=resolver, timeout_s=timeout_s)
    if api is None:
        raise DiscoveryError("no Kubernetes API configured")
    return await read_kubernetes(spec, api=api, timeout_s=timeout_s)


class Feed:
    """One process's discovery: the last good answer, asked at most once per interval."""

    def __init__(
        self,
        spec: DiscoverySpec,
        *,
        api: KubernetesApi | None,
        interval_s: float,
        timeout_s: float,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.spec = spec
        self.api = api
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.resolver = resolver
        self.known: set[str] | None = None  # base URLs of the last good answer
        self.error = ""
        self._asked_at: float | None = None

    @classmethod
    def from_config(cls, config: InferenceConfig) -> Feed | None:
        """The feed `INFERENCE_DISCOVERY` asks for, or None when it is unset."""
        if not config.discovery.strip():
            return None
        spec = parse_spec(config.discovery)
        api = None
        if spec.kind != "dns":
            api = KubernetesApi(
                url=config.discovery_api_url,
                token_path=Path(config.discovery_token_path),
                ca_path=Path(config.discovery_ca_path),
            )
        return cls(
            spec,
            api=api,
            interval_s=config.discovery_interval_s,
            timeout_s=config.discovery_timeout_s,
        )

    async def refresh(self, *, force: bool = False) -> list[str] | None:
        """The ready workers' base URLs when the source was asked and answered; None when it
        is not time yet or the read failed (the last known set stays in force)."""
        now = time.monotonic()
        if not force and self._asked_at is not None and now - self._asked_at < self.interval_s:
            return None
        self._asked_at = now
        try:
            found = await discover(
                self.spec, api=self.api, resolver=self.resolver, timeout_s=self.timeout_s
            )
        except DiscoveryError as exc:
            if str(exc) != self.error:
                logger.warning("inference discovery failed, keeping the last set: %s", exc)
            self.error = str(exc)
            return None
        self.error = ""
        urls = sorted(d.base_url for d in found)
        if self.known != set(urls):
            logger.info("inference discovery: %d worker(s): %s", len(urls), ", ".join(urls))
        self.known = set(urls)
        return urls

    def local_state(self, row: ModelWorker) -> str:
        """A discovered worker's state as this process's last answer says: one that left it
        drains here at once (no new requests), whatever another process wrote."""
        if row.source != ModelWorker.Source.DISCOVERED or self.known is None:
            return row.state
        if row.base_url not in self.known:
            return ModelWorker.State.DRAINING
        return ModelWorker.State.READY if row.state == ModelWorker.State.DRAINING else row.state
