"""Serve an exporter's registry over HTTP, on 127.0.0.1 by default: one thread, whatever connects.

kimitui runs on the operator's machine: what it serves is reachable from that machine only unless the
operator names another address (``--metrics-addr`` / ``[metrics] addr``).

prometheus_client's own server spends a thread on every connection and waits forever for its request:
300 idle connections held 300 threads and a scrape took seconds.  Here one asyncio loop on one thread
serves every connection; a connection must send its request within ``IDLE_TIMEOUT_S``, at most
``MAX_CONNECTIONS`` are open (a new one closes the one idle longest), and each answer closes its
connection.  So idle sockets cost a file descriptor each, never a thread, and a scrape is answered
at once however many idle ones there are.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import choose_encoder, gzip_accepted

from kimitui.analysis.cost import CostRates
from kimitui.export.prometheus import MetricsExporter
from kimitui.session import Session

DEFAULT_ADDR = "127.0.0.1"
IDLE_TIMEOUT_S = 10.0
"""How long a connection may take to send its request (Prometheus' own scrape timeout is 10 s)."""
MAX_CONNECTIONS = 128
"""Open connections at most; past it the longest-waiting one is closed for the newcomer."""
_MAX_HEAD = 16 << 10
"""A request head longer than this is refused (a scrape's is a few hundred bytes)."""


class MetricsPortError(OSError):
    """The metrics port could not be bound (in use, not permitted, no such address): one line says which."""

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass
class _Endpoint:
    """The loop, its thread and the connections waiting for their request (oldest first)."""

    exporter: MetricsExporter
    sock: socket.socket
    idle_timeout_s: float
    max_connections: int
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    waiting: dict[asyncio.StreamWriter, None] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    stopped: asyncio.Event | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), name="kimitui-metrics", daemon=True)
        self.thread.start()
        ready.wait(10.0)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve(ready))
        finally:
            self.loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self.stopped = asyncio.Event()
        server = await asyncio.start_server(self._on_connection, sock=self.sock, limit=_MAX_HEAD)
        ready.set()
        try:
            await self.stopped.wait()
        finally:
            server.close()
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await server.wait_closed()

    def stop(self) -> None:
        if self.stopped is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.stopped.set)
        if self.thread is not None:
            self.thread.join(timeout=5.0)

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        self.waiting[writer] = None
        while len(self.waiting) > self.max_connections:  # the longest-waiting goes, so a scrape gets in
            oldest = next(iter(self.waiting))
            del self.waiting[oldest]
            oldest.close()
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle_timeout_s)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
                return
            finally:
                self.waiting.pop(writer, None)
            try:
                answer = self._answer(head)
            except Exception as exc:  # noqa: BLE001 - a collector's failure is this scrape's 500, not the server's end
                answer = _response("500 Internal Server Error", [("Content-Type", "text/plain")],
                                   f"{type(exc).__name__}: {exc}\n".encode())
            writer.write(answer)
            await asyncio.wait_for(writer.drain(), self.idle_timeout_s)
        except (asyncio.TimeoutError, OSError):
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> bytes:
        """The whole HTTP/1.1 response to one request head (as prometheus_client's handler answers)."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return _response("400 Bad Request", [("Content-Type", "text/plain")], b"bad request line\n")
        method, target, _version = parts
        if method not in ("GET", "HEAD"):
            return _response("405 Method Not Allowed", [("Allow", "GET, HEAD")], b"")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        if url.path == "/favicon.ico":
            return _response("200 OK", [], b"")
        registry = self.exporter.registry
        names = parse_qs(url.query).get("name[]")
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        body = encoder(registry.restricted_registry(names) if names else registry)
        extra = [("Content-Type", content_type)]
        if gzip_accepted(headers.get("accept-encoding", "")):
            body = gzip.compress(body)
            extra.append(("Content-Encoding", "gzip"))
        return _response("200 OK", extra, b"" if method == "HEAD" else body, length=len(body))


def _response(status: str, headers: list[tuple[str, str]], body: bytes, length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers),
             f"Content-Length: {len(body) if length is None else length}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


@dataclass
class MetricsServer:
    """A running metrics endpoint: ``http://{addr}:{port}/metrics``."""

    exporter: MetricsExporter
    addr: str
    port: int
    _endpoint: _Endpoint

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    @property
    def thread(self) -> threading.Thread | None:
        """The one thread that serves every connection."""
        return self._endpoint.thread

    def close(self) -> None:
        """Stop serving and free the port (the exporter keeps its sink; :meth:`MetricsExporter.detach` ends it)."""
        self._endpoint.stop()


def _bind(port: int, addr: str) -> socket.socket:
    """The listening socket, bound here so a port in use is the caller's error, not the thread's."""
    family, _, _, _, where = socket.getaddrinfo(addr, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0]
    sock = socket.create_server(where[:2], family=family, backlog=128)
    sock.setblocking(False)
    return sock


def serve(exporter: MetricsExporter, port: int, addr: str = DEFAULT_ADDR, *,
          idle_timeout_s: float = IDLE_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS) -> MetricsServer:
    """Serve ``exporter`` on ``addr:port`` (port 0: a free one, read back from ``.port``).

    Raises :class:`MetricsPortError` when the address cannot be bound."""
    try:
        sock = _bind(port, addr)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise MetricsPortError(exc.errno, f"cannot serve metrics on {addr}:{port}: {reason}") from None
    endpoint = _Endpoint(exporter, sock, idle_timeout_s, max_connections)
    endpoint.start()
    return MetricsServer(exporter, addr, int(sock.getsockname()[1]), endpoint)


def start_metrics(session: Session, port: int, addr: str = DEFAULT_ADDR, *,
                  rates: CostRates | None = None) -> MetricsServer:
    """An exporter sinking ``session``, served on ``addr:port``: what ``kimitui run --metrics-port`` starts;
    ``rates`` (the config's ``[cost]``): each level's cost per million tokens too.

    Raises :class:`MetricsPortError` (and leaves the session as it was) when the port cannot be bound."""
    exporter = MetricsExporter(session, rates)
    try:
        return serve(exporter, port, addr)
    except MetricsPortError:
        exporter.detach()
        raise
