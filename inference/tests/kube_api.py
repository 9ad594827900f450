"""A small real HTTP server on loopback that answers like the Kubernetes API server for one
Service's Endpoints and EndpointSlices (a test seam: the pool reads it over real HTTP with a
bearer token, exactly as it reads the API server in a pod)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def endpoints_doc(
    namespace: str,
    service: str,
    ready: list[tuple[str, int]],
    *,
    not_ready: list[tuple[str, int]] = (),
    port_name: str = "http",
) -> dict:
    """A core/v1 Endpoints document as the API server returns it (one subset per port)."""
    by_port: dict[int, dict] = {}
    for kind, items in (("addresses", ready), ("notReadyAddresses", not_ready)):
        for ip, port in items:
            subset = by_port.setdefault(
                port, {"ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}
            )
            subset.setdefault(kind, []).append(
                {
                    "ip": ip,
                    "targetRef": {
                        "kind": "Pod",
                        "namespace": namespace,
                        "name": f"vllm-{ip.replace('.', '-')}-{port}",
                    },
                }
            )
    return {
        "kind": "Endpoints",
        "apiVersion": "v1",
        "metadata": {"name": service, "namespace": namespace, "resourceVersion": "1"},
        "subsets": list(by_port.values()),
    }


def endpointslices_doc(
    service: str, endpoints: list[tuple[str, int, dict]], *, port_name: str = "http"
) -> dict:
    """An EndpointSliceList: one slice per port; each endpoint (ip, port, conditions)."""
    slices: dict[int, dict] = {}
    for ip, port, conditions in endpoints:
        item = slices.setdefault(
            port,
            {
                "kind": "EndpointSlice",
                "apiVersion": "discovery.k8s.io/v1",
                "metadata": {
                    "name": f"{service}-{port}",
                    "labels": {"kubernetes.io/service-name": service},
                },
                "addressType": "IPv6" if ":" in ip else "IPv4",
                "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
                "endpoints": [],
            },
        )
        item["endpoints"].append(
            {
                "addresses": [ip],
                "conditions": conditions,
                "targetRef": {"kind": "Pod", "name": f"vllm-{port}"},
            }
        )
    return {
        "kind": "EndpointSliceList",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"resourceVersion": "1"},
        "items": list(slices.values()),
    }


class FakeKubeApi:
    """Serve `endpoints` / `slices` for `namespace/service`; 401 without `token`."""

    def __init__(self, *, namespace: str, service: str, token: str) -> None:
        self.namespace, self.service, self.token = namespace, service, token
        self.endpoints: dict | None = None
        self.slices: dict | None = None
        self.status: int | None = None  # force an answer status (500, 403 ...)
        self.body: bytes | None = None  # force a raw body
        self.delay_s = 0.0  # answer this late (a slow API server)
        self.requests: list[tuple[str, str]] = []  # (path, Authorization)
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeKubeApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with api.lock:
                    api.requests.append((self.path, self.headers.get("Authorization", "")))
                time.sleep(api.delay_s)
                status, doc = api.answer(self.path, self.headers.get("Authorization", ""))
                body = api.body if api.body is not None else json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def answer(self, path: str, authorization: str) -> tuple[int, dict]:
        if authorization != f"Bearer {self.token}":
            return 401, {"kind": "Status", "code": 401, "reason": "Unauthorized"}
        if self.status is not None:
            return self.status, {"kind": "Status", "code": self.status}
        parts = urlsplit(path)
        ns = self.namespace
        if parts.path == f"/api/v1/namespaces/{ns}/endpoints/{self.service}":
            if self.endpoints is not None:
                return 200, self.endpoints
        elif parts.path == f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices":
            selector = parse_qs(parts.query).get("labelSelector", [""])[0]
            if selector == f"kubernetes.io/service-name={self.service}" and self.slices:
                return 200, self.slices
            return 200, endpointslices_doc(self.service, [])  # a list: empty, never 404
        return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
