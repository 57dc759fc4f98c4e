"""A minimal SGLang-shaped streaming server with exactly known timing.

Two jobs:

* **Benchmark target** (``bench/bench_client.py``): raw asyncio protocol, no
  framework, so it is never the bottleneck.  ``--tick-ms 0`` writes a whole
  response at once (burst); ``--tick-ms N`` runs one shared ticker that writes
  one chunk to every active stream per tick, which is what a real server looks
  like (about one SSE event per read).
* **Exact-timing test server**: request-body knobs override the pacing per
  request, so a test knows to the millisecond what the client should measure:
  ``ttft_ms``, ``tick_ms``, ``tokens_per_chunk``, ``stall_after``+``stall_ms``
  (optionally only for the server's ``stall_nth`` request, counted from 1),
  ``busy_ms`` (TTFT and each tick = busy_ms x open streams: a saturated server
  whose total token rate stays flat while queueing grows), ``no_usage`` (ignore
  ``stream_options``), and faults ``status`` (HTTP error), ``drop_after`` (connection aborted
  mid-stream), ``error_after`` (error object in the stream), ``malformed_after``.

SSE framing follows SGLang (``reference/sglang.md`` §3): a role chunk, content
chunks, a finish chunk, a usage chunk when ``stream_options.include_usage``,
per-chunk usage when ``continuous_usage_stats``, then ``data: [DONE]``.

Run: ``python tests/support/minimal_server.py --port 8199 --tick-ms 10 [--cpu 1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
import time
from typing import Any

MODEL = "minimal"
_HDR = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _plain(status: int, body: bytes, ctype: bytes = b"application/json") -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error",
              503: b"Service Unavailable"}.get(status, b"Error")
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        status, reason, ctype, len(body), body)


class Stream:
    """One streaming response: the chunks still to send and when."""

    __slots__ = ("proto", "rid", "total", "sent", "per_chunk", "usage_each", "include_usage", "prompt_tokens",
                 "tick_s", "next_due", "stall_after", "stall_s", "drop_after", "error_after",
                 "malformed_after", "shared", "handle", "busy_s")

    def __init__(self, proto: "Proto", body: dict[str, Any], default_tick_s: float, nth: int = 0) -> None:
        self.proto = proto
        self.rid = f"{id(self):x}"
        self.total = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        self.sent = 0
        self.per_chunk = max(1, int(body.get("tokens_per_chunk", 1)))
        opts = body.get("stream_options") or {}
        no_usage = bool(body.get("no_usage"))  # behave like a server that ignores stream_options
        self.include_usage = bool(opts.get("include_usage")) and not no_usage
        self.usage_each = bool(opts.get("continuous_usage_stats")) and not no_usage
        msgs = body.get("messages") or []
        self.prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in msgs if isinstance(m, dict))
        custom = any(k in body for k in ("ttft_ms", "tick_ms", "stall_after", "drop_after", "error_after",
                                         "malformed_after", "busy_ms"))
        self.tick_s = float(body.get("tick_ms", default_tick_s * 1000)) / 1000
        ttft_s = float(body.get("ttft_ms", 0)) / 1000
        self.busy_s = float(body.get("busy_ms", 0)) / 1000
        if self.busy_s:  # a saturated server: TTFT grows with the streams already open
            ttft_s = self.busy_s * (proto.server.in_flight + 1)
        self.shared = not custom and self.tick_s > 0
        now = time.perf_counter()
        self.next_due = now + ttft_s
        stalls = body.get("stall_nth") in (None, nth)  # stall only the server's N-th request, if asked
        self.stall_after = body.get("stall_after") if stalls else None
        self.stall_s = float(body.get("stall_ms", 0)) / 1000 if stalls else 0.0
        self.drop_after = body.get("drop_after")
        self.error_after = body.get("error_after")
        self.malformed_after = body.get("malformed_after")
        self.handle: asyncio.TimerHandle | None = None

    def _chunk(self, content: str | None, finish: str | None, role: bool = False) -> bytes:
        delta: dict[str, Any] = {"reasoning_content": None, "content": content}
        if role:
            delta = {"reasoning_content": None, "role": "assistant", "content": ""}
        obj: dict[str, Any] = {
            "id": self.rid, "object": "chat.completion.chunk", "created": 1780000000, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                         "matched_stop": None}],
        }
        if self.usage_each:
            obj["usage"] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.sent,
                            "total_tokens": self.prompt_tokens + self.sent}
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    def _content_chunk(self, n: int) -> bytes:
        """The hot path of the benchmark server: bytes formatting, no json.dumps per chunk."""
        usage = b""
        if self.usage_each:
            usage = b',"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (
                self.prompt_tokens, self.sent, self.prompt_tokens + self.sent)
        return b'data: {"id":"%s","object":"chat.completion.chunk","created":1780000000,"model":"%s",' \
               b'"choices":[{"index":0,"delta":{"reasoning_content":null,"content":"%s"},"logprobs":null,' \
               b'"finish_reason":null,"matched_stop":null}]%s}\n\n' % (
                   self.rid.encode(), MODEL.encode(), b" tok" * n, usage)

    def start(self) -> bytes:
        return _HDR + _chunked(self._chunk(None, None, role=True))

    def next_bytes(self) -> bytes | None:
        """The next content chunk (and the tail when it is the last); None = connection dropped."""
        idx = self.sent // self.per_chunk
        if self.drop_after is not None and idx >= int(self.drop_after):
            return None
        if self.error_after is not None and idx >= int(self.error_after):
            err = {"error": {"object": "error", "message": "injected failure", "type": "InternalServerError",
                             "param": None, "code": 500}}
            self.sent = self.total
            return _chunked(b"data: " + json.dumps(err).encode() + b"\n\n" + b"data: [DONE]\n\n") + b"0\r\n\r\n"
        if self.malformed_after is not None and idx >= int(self.malformed_after):
            self.sent = self.total
            return _chunked(b'data: {"choices": [{"delta": {"content": "x"\n\n') + b"0\r\n\r\n"
        n = min(self.per_chunk, self.total - self.sent)
        self.sent += n
        self.proto.server.chunks += 1
        out = self._content_chunk(n)
        if self.sent >= self.total:
            out += self.tail()
            return _chunked(out) + b"0\r\n\r\n"
        return _chunked(out)

    def tail(self) -> bytes:
        out = self._chunk("", "length")
        if self.include_usage:
            usage = {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + self.total,
                     "completion_tokens": self.total}
            obj = {"id": self.rid, "object": "chat.completion.chunk", "created": 1780000000, "model": MODEL,
                   "choices": [], "usage": usage}
            out += b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        return out + b"data: [DONE]\n\n"

    @property
    def done(self) -> bool:
        return self.sent >= self.total

    def stall_due(self) -> bool:
        """True once, when the stall point is reached: the next chunk waits ``stall_ms`` longer."""
        if self.stall_after is not None and self.sent // self.per_chunk == int(self.stall_after):
            self.stall_after = None
            return True
        return False


class Server:
    """Shared state: the active paced streams and the ticker that feeds them."""

    def __init__(self, tick_ms: float) -> None:
        self.tick_s = tick_ms / 1000
        self.active: set[Stream] = set()
        self.flushes = 0
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.request_ids: list[str] = []
        self.chunks = 0
        self.connections = 0
        """Content chunks written, all streams together (``GET /stats``)."""
        self._ticking = False

    def add_shared(self, stream: Stream) -> None:
        self.active.add(stream)
        if not self._ticking:
            self._ticking = True
            asyncio.get_running_loop().call_later(self.tick_s, self._tick)

    def _tick(self) -> None:
        for s in list(self.active):
            if s.proto.closed:
                self.active.discard(s)
                continue
            data = s.next_bytes()
            if data is None:
                s.proto.abort()
                self.active.discard(s)
                continue
            s.proto.transport.write(data)  # type: ignore[union-attr]
            if s.done:
                self.active.discard(s)
                s.proto.response_done()
        if self.active:
            asyncio.get_running_loop().call_later(self.tick_s, self._tick)
        else:
            self._ticking = False


class Proto(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.busy = False
        self.streaming = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._stream_over()

    def _stream_over(self) -> None:
        if self.streaming:
            self.streaming = False
            self.server.in_flight -= 1

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._maybe_handle()

    def response_done(self) -> None:
        self.busy = False
        self._stream_over()
        self._maybe_handle()

    def _maybe_handle(self) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode("latin-1").split("\r\n")
        length = 0
        self.request_id = ""
        for h in head[1:]:
            k, _, v = h.partition(":")
            key = k.strip().lower()
            if key == "content-length":
                length = int(v.strip())
            elif key == "x-request-id":
                self.request_id = v.strip()
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4:end + 4 + length]
        self.buf = self.buf[end + 4 + length:]
        method, path, *_ = head[0].split(" ")
        self.busy = True
        self._handle(method, path.split("?")[0], body)

    def _handle(self, method: str, path: str, raw: bytes) -> None:
        assert self.transport is not None
        if path == "/v1/chat/completions" and method == "POST":
            self.server.requests += 1
            self.server.request_ids.append(self.request_id)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self._reply(400, b'{"error":{"message":"bad json"}}')
            if "status" in body:
                status = int(body["status"])
                return self._reply(status, b'{"object":"error","message":"injected","code":%d}' % status)
            stream = Stream(self, body, self.server.tick_s, self.server.requests)
            self.streaming = True
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
            self.transport.write(stream.start())
            if self.server.tick_s == 0 and stream.shared is False and not _has_timing(body):
                self._burst(stream)
            elif stream.shared:
                self.server.add_shared(stream)
            else:
                self._schedule(stream)
            return None
        if path == "/v1/models":
            return self._reply(200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode())
        if path == "/flush_cache":
            self.server.flushes += 1
            return self._reply(200, b"Cache flushed.\n", b"text/plain")
        if path == "/stats":
            st = self.server
            return self._reply(200, json.dumps({"in_flight": st.in_flight, "requests": st.requests,
                                                "chunks": st.chunks, "max_in_flight": st.max_in_flight,
                                                "connections": st.connections}).encode())
        if path == "/health":
            return self._reply(200, b"")
        return self._reply(404, b'{"detail":"Not Found"}')

    def _reply(self, status: int, body: bytes, ctype: bytes = b"application/json") -> None:
        assert self.transport is not None
        self.transport.write(_plain(status, body, ctype))
        self.response_done()

    def _burst(self, stream: Stream) -> None:
        parts: list[bytes] = []
        while not stream.done:
            data = stream.next_bytes()
            if data is None:
                self.transport.write(b"".join(parts))  # type: ignore[union-attr]
                return self.abort()
            parts.append(data)
        self.transport.write(b"".join(parts))  # type: ignore[union-attr]
        self.response_done()

    def _schedule(self, stream: Stream) -> None:
        loop = asyncio.get_running_loop()
        delay = stream.next_due - time.perf_counter()

        def fire() -> None:
            if self.closed:
                return
            data = stream.next_bytes()
            if data is None:
                return self.abort()
            self.transport.write(data)  # type: ignore[union-attr]
            if stream.done:
                return self.response_done()
            tick = stream.busy_s * max(1, self.server.in_flight) if stream.busy_s else stream.tick_s
            stream.next_due += tick + (stream.stall_s if stream.stall_due() else 0.0)
            loop.call_at(loop.time() + max(0.0, stream.next_due - time.perf_counter()), fire)

        if stream.stall_due():  # a stall_after of 0 delays the first chunk
            delay += stream.stall_s
        loop.call_at(loop.time() + max(0.0, delay), fire)


def _has_timing(body: dict[str, Any]) -> bool:
    return any(k in body for k in ("ttft_ms", "tick_ms", "stall_after", "busy_ms"))


async def serve(host: str = "127.0.0.1", port: int = 0, tick_ms: float = 0.0) -> tuple[asyncio.AbstractServer, int, Server]:
    """Start the server on the running loop; returns (asyncio server, bound port, state)."""
    state = Server(tick_ms)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Proto(state), host, port, backlog=4096)
    bound = srv.sockets[0].getsockname()[1]
    return srv, bound, state


class ThreadedServer:
    """The server on its own loop in a background thread (tests: its pacing never waits on the test's loop)."""

    def __init__(self, tick_ms: float = 0.0) -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = 0
        self.state: Server | None = None
        self._tick_ms = tick_ms
        self._thread = threading.Thread(target=self._run, name="minimal-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ThreadedServer":
        self._thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def main() -> None:
            srv, self.port, self.state = await serve(tick_ms=self._tick_ms)
            self._srv = srv
            self._ready.set()
            await asyncio.Event().wait()

        try:
            loop.run_until_complete(main())
        except RuntimeError:
            pass

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8199)
    ap.add_argument("--tick-ms", type=float, default=0.0, help="0 = burst; N = one chunk per stream every N ms")
    ap.add_argument("--cpu", type=int, default=None, help="pin to this CPU (os.sched_setaffinity)")
    ap.add_argument("--uvloop", action="store_true")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 1024 streams need more than 1024 fds

    async def run() -> None:
        _srv, port, _ = await serve(args.host, args.port, args.tick_ms)
        print(f"listening http://{args.host}:{port}", flush=True)
        await asyncio.Event().wait()

    if args.uvloop:
        import uvloop

        uvloop.run(run())
    else:
        asyncio.run(run())


if __name__ == "__main__":
    main()
