"""A small real HTTP server that replays the captured vLLM 0.32 CPU output.

It answers `/health`, `/metrics`, `/v1/models` and streams `/v1/chat/completions` with the
exact SSE bytes of `fixtures/vllm-0.32-cpu-stream.txt` (a copy of shared/fixtures), over
HTTP/1.1 chunked like uvicorn. Tests switch its behaviour to reproduce real failure
modes: a 503 health, a refused connection (server stopped), a slow first byte, a
connection dropped mid-stream, an error event, a stream without `[DONE]`, a 4xx answer.
A request with `stream_options.continuous_usage_stats` gets running usage on every chunk.
Every chat request body and its headers are recorded.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Byte-identical copies of ../shared/fixtures/ (the repo must not depend on its neighbours).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
STREAM_FIXTURE = FIXTURES / "vllm-0.32-cpu-stream.txt"
METRICS_FIXTURE = FIXTURES / "vllm-0.32-cpu-metrics.txt"
MODELS_FIXTURE = FIXTURES / "vllm-0.32-cpu-models.json"


def fixture_events() -> list[bytes]:
    """The SSE events of the captured stream, each with its trailing blank line."""
    text = STREAM_FIXTURE.read_text()
    return [(block.strip() + "\n\n").encode() for block in text.split("\n\n") if block.strip()]


def fixture_text() -> str:
    """The answer text the captured stream carries."""
    out = []
    for event in fixture_events():
        data = event.decode().removeprefix("data: ").strip()
        if data == "[DONE]":
            continue
        for choice in json.loads(data)["choices"]:
            out.append(choice["delta"].get("content") or "")
    return "".join(out)


@dataclass
class Behaviour:
    health_status: int = 200
    health_delay_s: float = 0.0
    health_reset: bool = False  # reset the connection instead of answering /health
    chat_status: int = 200
    chat_body: bytes = b'{"error": {"message": "bad request"}}'
    first_byte_delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    break_after: int | None = None  # drop the connection after N events
    error_after: int | None = None  # send a `data: {"error": …}` event after N events
    drop_done: bool = False  # end the body cleanly but without `data: [DONE]`
    close_unanswered: int = 0  # close the next N chat connections after the request, no answer
    running: float = 0.0  # replaces vllm:num_requests_running in /metrics
    waiting: float = 0.0
    kv: float = 0.0


@dataclass
class ReplayState:
    behaviour: Behaviour = field(default_factory=Behaviour)
    chat_requests: list[dict] = field(default_factory=list)
    chat_headers: list[dict] = field(default_factory=list)  # of each chat request, lower-case
    lock: threading.Lock = field(default_factory=threading.Lock)


def _metrics_body(b: Behaviour) -> bytes:
    lines = []
    for line in METRICS_FIXTURE.read_text().splitlines():
        if line.startswith("vllm:num_requests_running{"):
            line = line.rsplit(" ", 1)[0] + f" {b.running}"
        elif line.startswith("vllm:num_requests_waiting{"):
            line = line.rsplit(" ", 1)[0] + f" {b.waiting}"
        elif line.startswith("vllm:kv_cache_usage_perc{"):
            line = line.rsplit(" ", 1)[0] + f" {b.kv}"
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


def _with_running_usage(events: list[bytes]) -> list[bytes]:
    """What vLLM sends with `continuous_usage_stats`: running usage on every chunk (the
    captured prompt size; one token per content delta, as the capture streamed them)."""
    final = json.loads(events[-2].decode().removeprefix("data: "))["usage"]
    out, generated = [], 0
    for event in events:
        data = event.decode().removeprefix("data: ").strip()
        if data == "[DONE]":
            out.append(event)
            continue
        chunk = json.loads(data)
        if chunk.get("choices"):
            generated += sum(1 for c in chunk["choices"] if c["delta"].get("content"))
            chunk["usage"] = {
                "prompt_tokens": final["prompt_tokens"],
                "completion_tokens": generated,
                "total_tokens": final["prompt_tokens"] + generated,
            }
        out.append(f"data: {json.dumps(chunk)}\n\n".encode())
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        b = self.server.state.behaviour
        if self.path == "/health":
            if b.health_delay_s:
                time.sleep(b.health_delay_s)
            if b.health_reset:  # as a killed server's socket does: RST, no answer
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True
                self.connection.close()
                return
            self._send(b.health_status, b"", "application/json")
        elif self.path == "/metrics":
            self._send(200, _metrics_body(b), "text/plain; version=0.0.4")
        elif self.path == "/v1/models":
            self._send(200, MODELS_FIXTURE.read_bytes(), "application/json")
        else:
            self._send(404, b"{}", "application/json")

    def do_POST(self) -> None:
        b = self.server.state.behaviour
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        with self.server.state.lock:
            self.server.state.chat_requests.append(payload)
            self.server.state.chat_headers.append({k.lower(): v for k, v in self.headers.items()})
        if self.path != "/v1/chat/completions":
            self._send(404, b"{}", "application/json")
            return
        with self.server.state.lock:
            unanswered = b.close_unanswered > 0
            b.close_unanswered -= int(unanswered)
        if unanswered:  # as a server closing a kept-alive connection as it is reused
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if b.first_byte_delay_s:
            time.sleep(b.first_byte_delay_s)
        if b.chat_status != 200:
            self._send(b.chat_status, b.chat_body, "application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = fixture_events()
        if (payload.get("stream_options") or {}).get("continuous_usage_stats"):
            events = _with_running_usage(events)
        if b.drop_done:
            events = [e for e in events if b"[DONE]" not in e]
        for i, event in enumerate(events):
            if b.break_after is not None and i >= b.break_after:
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if b.error_after is not None and i >= b.error_after:
                err = b'data: {"error": {"message": "engine died", "code": 500}}\n\n'
                self._chunk(err)
                break
            self._chunk(event)
            if b.chunk_delay_s:
                time.sleep(b.chunk_delay_s)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: ReplayState, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.state = state
        self.open_connections: set = set()

    def process_request_thread(self, request, client_address) -> None:
        self.open_connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.open_connections.discard(request)

    def handle_error(self, request, client_address) -> None:
        pass  # connections reset by the tests' own failure injection are expected

    def kill_connections(self) -> None:
        """Drop every open connection, as a dying worker process would."""
        for conn in list(self.open_connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class ReplayServer:
    """Start with `start()`; `url` is its base URL; `stop()` makes connections refused."""

    def __init__(self) -> None:
        self.state = ReplayState()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def behaviour(self) -> Behaviour:
        return self.state.behaviour

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ReplayServer:
        server = _Server(self.state, self.port or 0)  # a restart keeps the port
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop open connections: clients see refused/reset connections."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.kill_connections()
            self._server = None
