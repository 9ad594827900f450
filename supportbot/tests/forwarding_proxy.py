"""A small reverse proxy on loopback for tests: what nginx's `proxy_add_x_forwarded_for` does.

Each client connection is forwarded to one upstream connection. The request head gets the
client's address appended to whatever X-Forwarded-For the client sent (several headers are
folded into one, as nginx does); a WebSocket upgrade is then piped both ways untouched, and a
plain HTTP request is sent with `Connection: close`, so every request gets its own upstream
connection and its own header. Clients on different loopback addresses (127.0.0.2, …: Linux
routes all of 127/8 to `lo`) are different forwarded clients; the upstream sees the proxy's
own address, 127.0.0.1, as its peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

MAX_HEAD = 64 * 1024


class ForwardingProxy:
    """`with ForwardingProxy(upstream_port) as proxy:` serves on `proxy.port` in a thread."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None

    def __enter__(self) -> ForwardingProxy:
        self.thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self.port = future.result(timeout=10)
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            if self.server is not None:
                self.server.close()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    async def _serve(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=MAX_HEAD)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        peer = writer.get_extra_info("peername")[0].encode()
        request_line, *headers = head[:-4].split(b"\r\n")
        forwarded = [
            h.split(b":", 1)[1].strip()
            for h in headers
            if h.lower().startswith(b"x-forwarded-for:")
        ]
        kept = [h for h in headers if not h.lower().startswith(b"x-forwarded-for:")]
        upgrade = any(h.lower().startswith(b"upgrade:") for h in headers)
        if not upgrade:
            kept = [h for h in kept if not h.lower().startswith(b"connection:")]
            kept.append(b"Connection: close")
        kept.append(b"X-Forwarded-For: " + b", ".join([*forwarded, peer]))
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        up_writer.write(b"\r\n".join([request_line, *kept]) + b"\r\n\r\n")
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
