"""The load path's HTTP/1.1 streaming client: pre-built request bytes on pooled connections.

Why not aiohttp here (measured, ``bench/bench_client.py`` and issue 5): aiohttp
spends ~120 us of CPU building and sending each request (``ClientRequest``,
headers, body payload, writer), so the 256th request of a C=256 burst leaves
>= 30 ms after the first even with no pre-emption - six times the 5 ms
dispatch-delay goal.  Here a request is one ``transport.write`` of bytes built
before the clock starts (~3 us), the send is stamped right before that write,
and responses are parsed in ``data_received`` callbacks (no task wake-up per
chunk).  Only what an OpenAI-compatible server sends is handled: a status line,
headers, and a chunked, ``Content-Length`` or read-until-close body (over TLS for ``https://``); SSE
events go through :class:`kimitui.loadgen.client.SseSplitter`, the same code the
aiohttp client uses.  httpx stays the client for everything else.

Error classes match :func:`kimitui.loadgen.client.run_request`: ``connect``
(refused, connect timeout, closed before any response byte), ``http_status``,
``stall`` (no byte for ``stall_s``, only when one is set), ``timeout`` (total deadline, via task
cancellation; it says how long the stream had been silent), ``reset`` (closed mid-response or before ``[DONE]``),
``malformed`` and ``stream_error``; and one only this client tells: ``link_lost``, a connection to an
SSH forward on 127.0.0.1 that the forward cut because the link under it was lost (it says so in
:mod:`kimitui.host.link_marks` before closing; to a socket the two look the same as ``connect``/``reset``).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import cast

import yarl

from kimitui.host import link_marks
from kimitui.loadgen.client import DRAIN_S, Deadlines, RequestTrace, SseSplitter, TotalDeadline

_perf_ns = time.perf_counter_ns
_MAX_SIZE_LINE = 1024
"""A chunk-size line (hex size and extensions) longer than this is not HTTP/1.1 from a real server."""
_HEX_DIGITS = b"0123456789abcdefABCDEF"


WARM_BATCH = 32
"""Connects started in one turn of the event loop when a pool warms (see :data:`kimitui.loadgen.modes.RAMP_BATCH`)."""


class ConnectFailed(Exception):
    """The connection could not be opened (refused, unreachable, timed out)."""


class Pool:
    """Idle keep-alive connections to one server; the engine's slots bound how many are busy."""

    def __init__(self, url: str | yarl.URL, deadlines: Deadlines) -> None:
        u = yarl.URL(url)
        if u.scheme not in ("http", "https") or not u.host:
            raise ValueError(f"the load client needs an http:// or https:// URL with a host, not {url}")
        self.host, self.port = u.host, u.port or (443 if u.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if u.scheme == "https" else None
        self.deadlines = deadlines
        self.idle: list[Conn] = []
        self._all: set[Conn] = set()
        host = self.host if u.is_default_port() else f"{self.host}:{self.port}"
        self._head = (f"POST {u.raw_path_qs} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                      f"Accept: text/event-stream\r\n").encode()

    def request_bytes(self, body: bytes, request_id: str, extra_headers: bytes = b"") -> bytes:
        """The whole request, built before its send is due (``extra_headers``: whole ``Name: value\\r\\n`` lines)."""
        return b"%sX-Request-ID: %s\r\n%sContent-Length: %d\r\n\r\n%s" % (
            self._head, request_id.encode(), extra_headers, len(body), body)

    async def connect(self) -> "Conn":
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.deadlines.connect_s):
                _, conn = await loop.create_connection(lambda: Conn(self), self.host, self.port, ssl=self.ssl)
        except TimeoutError as exc:
            raise ConnectFailed(f"connect timeout after {self.deadlines.connect_s:g} s to "
                                f"{self.host}:{self.port}") from exc
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        self._all.add(conn)
        return conn

    async def acquire(self) -> "Conn":
        while self.idle:
            conn = self.idle.pop()
            if conn.open:
                return conn
        return await self.connect()

    async def warm(self, n: int) -> None:
        """Open connections until ``n`` are idle (set-up before a burst, not part of its dispatch)."""
        missing = n - sum(1 for c in self.idle if c.open)
        if missing > 0:
            loop = asyncio.get_running_loop()
            tasks = []
            for i in range(missing):  # WARM_BATCH connects a turn: 2048 in one turn stalled the loop ~100 ms
                if i and i % WARM_BATCH == 0:
                    await asyncio.sleep(0)
                tasks.append(loop.create_task(self.connect()))
            got = await asyncio.gather(*tasks, return_exceptions=True)
            self.idle.extend(c for c in got if isinstance(c, Conn))
            failed = [e for e in got if isinstance(e, BaseException)]
            if failed:
                raise failed[0]

    def close(self) -> None:
        for conn in list(self._all):
            conn.close()
        self.idle.clear()


def send_burst(batch: list[tuple["Conn", RequestTrace, bytes]]) -> int:
    """Send primed requests back to back with nothing else in between; returns the burst's start stamp.

    Each request is stamped just before its ``transport.write``; the stall
    timers are armed after the last write, counted from each request's own send.
    """
    t0 = _perf_ns()
    for conn, _, data in batch:
        conn.write(data)
    for conn, trace, _ in batch:
        trace.intended_ns = t0
        conn.arm()
    return t0


class Conn(asyncio.Protocol):
    """One connection; carries one request at a time."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.trace: RequestTrace | None = None
        self.done: asyncio.Future[None] | None = None
        self._stall_s = 0.0
        self._last_ns = 0
        self._stall: asyncio.TimerHandle | None = None
        self._drain: asyncio.TimerHandle | None = None
        self._state, self._buf, self._framing, self._left, self._err_body = "idle", b"", "", 0, b""
        self._keep = True
        self._sse = SseSplitter(RequestTrace("", 0, False, 0))
        self._ends: tuple[int, int] | None = None
        """(server port, our port) of a connection to 127.0.0.1: an SSH forward may have cut it."""
        self._opened = 0.0

    # -- asyncio.Protocol --------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # create_connection's: a stream transport
        self.open = True
        peer, ours = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
        if peer and ours and peer[0] == "127.0.0.1":
            self._ends, self._opened = (int(peer[1]), int(ours[1])), time.time()

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self.pool._all.discard(self)
        trace = self.trace
        if trace is None:
            return
        if self._framing == "close" and self._state == "body":
            self._message_end(_perf_ns())
            return
        if trace.saw_done or trace.error_class is not None:
            self._finish(reuse=False)
            return
        why = f": {exc}" if exc else ""
        cut = link_marks.lookup(*self._ends, since=self._opened) if self._ends is not None else None
        if cut is not None:
            trace.fail("link_lost", f"{cut}; the request was in flight through it")
        elif trace.headers_ns is None and not self._buf:
            trace.fail("connect", f"server closed the connection before responding{why}")
        else:
            trace.fail("reset", f"connection closed mid-response{why}")
        self._finish(reuse=False)

    # -- one request -------------------------------------------------------------
    def send(self, trace: RequestTrace, data: bytes) -> asyncio.Future[None]:
        """Stamp ``trace.sent_ns`` and hand ``data`` to the transport; the future resolves at the end."""
        done = self.prime(trace)
        self.write(data)
        self.arm()
        return done

    def prime(self, trace: RequestTrace) -> asyncio.Future[None]:
        """Everything a request needs but its bytes on the wire (a burst does this before its clock starts)."""
        assert self.transport is not None and self.trace is None
        self.trace = trace
        self.done = asyncio.get_running_loop().create_future()
        self._state, self._buf, self._framing, self._left, self._err_body = "head", b"", "", 0, b""
        self._sse = SseSplitter(trace)
        return self.done

    def write(self, data: bytes) -> None:
        """The send itself, stamped just before the bytes go to the transport."""
        trace, transport = self.trace, self.transport
        assert trace is not None and transport is not None, "prime() on an open connection first"
        self._last_ns = trace.sent_ns = _perf_ns()
        transport.write(data)

    def arm(self) -> None:
        """Start the stall deadline, counted from the send (armed after a burst's writes, not between them)."""
        stall_s = self.pool.deadlines.stall_s
        if stall_s is None:  # no stall limit: only the request's total deadline ends a silent stream
            return
        loop = asyncio.get_running_loop()
        self._stall_s = stall_s
        idle_s = (_perf_ns() - self._last_ns) / 1e9
        self._stall = loop.call_at(loop.time() + self._stall_s - idle_s, self._check_stall)

    def abort(self) -> None:
        """The request was cancelled: drop the connection (its response is still coming)."""
        self._finish(reuse=False)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.open = False

    def _check_stall(self) -> None:
        trace = self.trace
        if trace is None:
            return
        loop = asyncio.get_running_loop()
        idle_s = (_perf_ns() - self._last_ns) / 1e9
        if idle_s < self._stall_s:  # data came since the timer was set: re-arm once per stall_s, not per read
            self._stall = loop.call_at(loop.time() + self._stall_s - idle_s, self._check_stall)
            return
        self._stall = None
        if not trace.saw_done:
            trace.fail("stall", f"no data for {self._stall_s:g} s (stall deadline)")
        self._finish(reuse=False)

    def _finish(self, reuse: bool) -> None:
        trace = self.trace
        if trace is None:
            return
        self.trace = None
        for h in (self._stall, self._drain):
            if h is not None:
                h.cancel()
        self._stall = self._drain = None
        if trace.end_ns is None:
            trace.end_ns = _perf_ns()
        if reuse and self.open:
            self.pool.idle.append(self)
        else:
            self.close()
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    # -- parsing ------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        now = _perf_ns()
        self._last_ns = now
        if self.trace is None:
            return  # bytes after a finished request (a drained or dropped response): ignore
        try:  # zero-cost until raised
            if self._state == "head":
                self._buf += data
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buf) > 65536:
                        self.trace.fail("malformed", "response headers larger than 64 KiB")
                        self._finish(reuse=False)
                    return
                if not self._head(self._buf[:end], now):
                    return
                data, self._buf = self._buf[end + 4:], b""
            if self._framing == "chunked":
                self._dechunk(data, now)
            elif self._framing == "length":
                take = data[:self._left]
                self._left -= len(take)
                self._body(take, now)
                if self._left == 0 and self.trace is not None:
                    self._message_end(now)
            else:
                self._body(data, now)
        except Exception as exc:  # a parser bug must read as what it is, never as a reset connection
            if self.trace is not None:
                self.trace.fail("malformed", f"cannot parse the response: {type(exc).__name__}: {exc}")
                self._finish(reuse=False)

    def _head(self, head: bytes, now: int) -> bool:
        trace = self.trace
        assert trace is not None
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            trace.fail("malformed", f"not an HTTP/1.x status line: {lines[0][:120]!r}")
            self._finish(reuse=False)
            return False
        trace.headers_ns = now
        trace.status = int(parts[1])
        self._framing, self._keep = "close", parts[0] == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding" and b"chunked" in value.lower():
                self._framing = "chunked"
            elif name == b"content-length" and self._framing != "chunked":
                length = value.strip()
                if not length.isdigit() or len(length) > 18:  # ASCII digits only: no sign, no '_', no 1e9
                    trace.fail("malformed", f"bad Content-Length {length[:40]!r} (not a byte count)")
                    self._finish(reuse=False)
                    return False
                self._framing, self._left = "length", int(length)
            elif name == b"connection":
                self._keep = value.strip().lower() != b"close"
        self._state = "body"
        if self._framing == "length" and self._left == 0:
            self._message_end(now)
            return False
        return True

    def _dechunk(self, data: bytes, now: int) -> None:
        buf = self._buf + data if self._buf else data
        pos = 0
        while self.trace is not None:
            if self._left > 0:  # inside a chunk's data
                take = buf[pos:pos + self._left]
                pos += len(take)
                self._left -= len(take)
                self._body(take, now)
                if self._left > 0:
                    break
                self._left = -2  # the CRLF after the data
            if self._left == -2:
                if len(buf) - pos < 2:
                    break
                pos += 2
                self._left = 0
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if len(buf) - pos > _MAX_SIZE_LINE:  # an endless size line: never buffered without bound
                    self.trace.fail("malformed", f"chunk size line longer than {_MAX_SIZE_LINE} bytes: "
                                                 f"{buf[pos:pos + 40]!r}")
                    self._finish(reuse=False)
                    return
                break
            size_s = buf[pos:eol].split(b";", 1)[0].strip()
            if not size_s or len(size_s) > 16 or size_s.strip(_HEX_DIGITS):
                self.trace.fail("malformed", f"bad chunk size {size_s[:40]!r}")
                self._finish(reuse=False)
                return
            size = int(size_s, 16)
            pos = eol + 2
            if size == 0:  # last chunk: no trailers from the servers we talk to
                self._message_end(now)
                return
            self._left = size
        self._buf = buf[pos:]

    def _body(self, data: bytes, now: int) -> None:
        trace = self.trace
        if trace is None or not data:
            return
        if trace.status != 200:
            if len(self._err_body) < 2048:
                self._err_body += data
            return
        if trace.saw_done or trace.error_class is not None:
            return  # after [DONE] (or a broken stream) only the HTTP end is awaited
        if not self._sse.feed(data, now):
            if trace.saw_done:
                self._await_end()
            else:
                self._finish(reuse=False)  # malformed: the rest of this response is not worth reading

    def _await_end(self) -> None:
        """After ``[DONE]``: keep the connection only if the HTTP end follows within DRAIN_S."""
        if self._drain is None:
            self._drain = asyncio.get_running_loop().call_later(DRAIN_S, self._finish, False)

    def _message_end(self, now: int) -> None:
        trace = self.trace
        assert trace is not None
        if trace.status != 200:
            text = self._err_body[:2048].decode("utf-8", "replace").strip()
            trace.fail("http_status", f"HTTP {trace.status}: {text}")
        elif not trace.saw_done and trace.error_class is None:
            if not self._sse.end(now) and trace.finish_reason is None:
                trace.fail("reset", "stream ended before [DONE]")
        self._finish(reuse=self._keep and self._framing != "close")


async def run_request(pool: Pool, data: bytes, trace: RequestTrace, deadlines: Deadlines,
                      conn: Conn | None = None, sent: Callable[[], object] | None = None) -> RequestTrace:
    """Send ``data`` (from :meth:`Pool.request_bytes`) and fill ``trace``; never raises except on outside cancellation.

    ``conn`` already carrying ``trace`` (sent by the caller, as a burst does)
    is only awaited.  ``sent`` is called once the request's bytes are written (after its connect, when it
    needed one).  ``trace.cancel_reason`` set before cancelling the task
    (``aborted``, ``cancelled``) makes the request end incomplete instead of raising.
    """
    remaining_s = (deadlines.total_s - (_perf_ns() - trace.sent_ns) / 1e9) if conn is not None else None
    try:
        with TotalDeadline(trace, deadlines, remaining_s):
            try:
                if conn is None:
                    # Until a write re-stamps it, "sent" is the connect attempt: a request that never connects
                    # (refused, EMFILE, timeout) then has sent = when it tried and e2e = until it failed,
                    # not whatever the trace was built with (0 in a burst).
                    trace.sent_ns = _perf_ns()
                    conn = await pool.acquire()
                    done = conn.send(trace, data)
                    if sent is not None:
                        sent()
                else:
                    assert conn.done is not None
                    done = conn.done
                await done
            except asyncio.CancelledError:
                if conn is not None and conn.trace is trace:
                    conn.abort()  # its response is still coming: the connection cannot carry another
                raise
    except ConnectFailed as exc:
        trace.fail("connect", str(exc))
    finally:
        if trace.end_ns is None:
            trace.end_ns = _perf_ns()
    return trace
