"""The load path's HTTP/1.1 client (kimitui.loadgen.h1client) against real servers on 127.0.0.1.

tests/support/minimal_server.py gives exactly known timing and every fault of issue 5;
the real simulated SGLang server (uvicorn) checks it speaks to what operators
point it at; a raw socket server writes responses in awkward pieces.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from kimitui.loadgen import h1client
from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, build_body, to_result
from kimitui.events import RequestResult
from tests.support.simserver import start_sim
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(45)


async def one(url: str, deadlines: Deadlines = Deadlines(), max_tokens: int = 40, rid: str = "req-1",
              pool: h1client.Pool | None = None, **knobs: object) -> RequestResult:
    own = pool is None
    pool = pool or h1client.Pool(url + "/v1/chat/completions", deadlines)
    trace = RequestTrace(rid, 1, False, time.perf_counter_ns())
    data = pool.request_bytes(build_body("minimal", "hello", max_tokens, extra=dict(knobs)), rid)
    try:
        await h1client.run_request(pool, data, trace, deadlines)
    finally:
        if own:
            pool.close()
    return to_result(trace, "sweep-1", Clock())


async def test_timing_matches_the_servers_pacing(minimal_server) -> None:
    r = await one(minimal_server.url, ttft_ms=200, tick_ms=10, max_tokens=40)
    assert r.ok and r.status == 200 and r.finish_reason == "length"
    assert r.ttfb_s is not None and r.ttfb_s < 0.1  # the role chunk: first byte, not first token
    assert 0.195 <= r.ttft_s <= 0.30  # the server's sleeps only ever overshoot under load
    assert r.completion_tokens == 40 and r.tokens_from_usage and r.chunks == 40
    assert 75 <= r.decode_tok_s <= 108  # 39 tokens over 39 ticks of 10 ms; a loaded box only slows it
    assert 0.0095 <= r.itl_p50_s <= 0.013
    assert r.intended_send <= r.sent <= r.t


async def test_request_id_multi_token_chunks_and_no_usage(minimal_server) -> None:
    r = await one(minimal_server.url, rid="sw-c1-r0-7", ttft_ms=10, tick_ms=5, tokens_per_chunk=3, max_tokens=30)
    assert r.ok and r.chunks == 10 and r.completion_tokens == 30 and r.chunk_tokens == [3] * 10
    assert minimal_server.state.request_ids == ["sw-c1-r0-7"]
    r = await one(minimal_server.url, tick_ms=2, max_tokens=12, no_usage=True)
    assert r.ok and r.completion_tokens == 12 and r.tokens_from_usage is False


async def test_keep_alive_connection_is_reused(minimal_server) -> None:
    pool = h1client.Pool(minimal_server.url + "/v1/chat/completions", Deadlines())
    try:
        for i in range(3):
            r = await one(minimal_server.url, max_tokens=3, tick_ms=1, rid=f"r{i}", pool=pool)
            assert r.ok
            assert len(pool.idle) == 1 and len(pool._all) == 1
    finally:
        pool.close()


@pytest.mark.parametrize(("knobs", "deadlines", "error_class", "chunks"), [
    ({"status": 500}, Deadlines(), "http_status", 0),
    ({"tick_ms": 5, "drop_after": 5}, Deadlines(), "reset", 5),
    ({"tick_ms": 5, "stall_after": 3, "stall_ms": 5000}, Deadlines(stall_s=0.4, total_s=10), "stall", 3),
    ({"tick_ms": 2, "error_after": 4}, Deadlines(), "stream_error", 4),
    ({"tick_ms": 2, "malformed_after": 2}, Deadlines(), "malformed", 2),
])
async def test_every_error_class_keeps_what_arrived(minimal_server, knobs, deadlines, error_class, chunks) -> None:
    r = await one(minimal_server.url, deadlines, **knobs)
    assert not r.ok and r.error_class == error_class and r.chunks == chunks
    if error_class == "http_status":
        assert r.status == 500 and "injected" in r.error
    if error_class == "stall":
        assert 0.38 <= r.max_gap_s <= 0.8
    if error_class == "stream_error":
        assert "injected failure" in r.error


async def test_total_deadline_is_timeout_with_partial_measurements(minimal_server) -> None:
    r = await one(minimal_server.url, Deadlines(stall_s=5, total_s=0.3), tick_ms=20, max_tokens=100)
    assert not r.ok and r.error_class == "timeout"
    assert 5 <= r.chunks <= 16 and 0.29 <= r.e2e_s <= 0.5


async def test_refused_connection_is_connect() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = await one(f"http://127.0.0.1:{port}")
    assert not r.ok and r.error_class == "connect" and r.status is None and "cannot connect" in r.error


async def test_burst_sends_back_to_back_on_warm_connections(minimal_server) -> None:
    c = 128
    pool = h1client.Pool(minimal_server.url + "/v1/chat/completions", Deadlines())
    try:
        await pool.warm(c)
        assert len(pool.idle) == c
        body = build_body("minimal", "x", 3, extra={"ttft_ms": 300, "tick_ms": 1})
        traces = [RequestTrace(f"b{i}", c, False, 0) for i in range(c)]
        batch = [(pool.idle.pop(), t, pool.request_bytes(body, t.request_id)) for t in traces]
        futures = [conn.prime(t) for conn, t, _ in batch]
        assert all(t.sent_ns == 0 for t in traces)  # primed is not sent
        t0 = h1client.send_burst(batch)
        await asyncio.gather(*futures)
    finally:
        pool.close()
    assert all(t.ok and t.tokens == 3 and t.intended_ns == t0 for t in traces)
    sends = [t.sent_ns for t in traces]
    assert sends == sorted(sends) and sends[0] >= t0
    assert minimal_server.state.max_in_flight == c  # all were open at once: one burst


async def _canned_server(response: bytes, piece: int, close: bool) -> tuple[asyncio.Server, str]:
    """Answers every request with ``response`` written ``piece`` bytes at a time."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, len(response), piece):
            writer.write(response[i:i + piece])
            await writer.drain()
            await asyncio.sleep(0.001)
        if close:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


SSE = (b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
       b'data: {"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1}}\n\n'
       b'data: {"choices":[{"delta":{"content":"bc"},"finish_reason":"length"}],"usage":{"completion_tokens":3}}\n\n'
       b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}\n\n'
       b"data: [DONE]\n\n")


def _chunked(body: bytes, size: int) -> bytes:
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b"%x;ext=1\r\n%s\r\n" % (len(part), part)
    return out + b"0\r\n\r\n"


@pytest.mark.parametrize(("framing", "piece"), [("chunked", 1), ("chunked", 7), ("length", 3), ("close", 5)])
async def test_framings_split_across_reads(framing: str, piece: int) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    if framing == "chunked":
        response = head + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(SSE, 50)
    elif framing == "length":
        response = head + b"Content-Length: %d\r\n\r\n" % len(SSE) + SSE
    else:
        response = head + b"Connection: close\r\n\r\n" + SSE
    server, url = await _canned_server(response, piece, close=framing == "close")
    async with server:
        pool = h1client.Pool(url + "/v1/chat/completions", Deadlines(stall_s=5))
        trace = RequestTrace("x", 1, False, 0)
        await h1client.run_request(pool, pool.request_bytes(b"{}", "x"), trace, Deadlines(stall_s=5))
        reused = len(pool.idle)
        pool.close()
    assert trace.ok, trace.error
    assert trace.tokens == 3 and trace.usage_tokens == 3 and trace.prompt_tokens == 4 and trace.multi_token
    assert trace.chunk_tok == [1, 2] and trace.chunk_ns[1] > trace.chunk_ns[0]
    assert reused == (0 if framing == "close" else 1)


async def test_closed_before_any_response_is_connect_and_garbage_is_malformed() -> None:
    async def slam(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(slam, "127.0.0.1", 0)
    async with server:
        r = await one(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    assert r.error_class == "connect" and "before responding" in r.error
    server, url = await _canned_server(b"SSH-2.0-OpenSSH\r\n\r\n", 100, close=False)
    async with server:
        r = await one(url)
    assert r.error_class == "malformed" and "status line" in r.error


async def test_real_simulated_server_streams_through_it() -> None:
    async with start_sim("ep8-tuned", time_scale=50) as sim:
        import httpx

        async with httpx.AsyncClient() as http:
            model = (await http.get(sim.url + "/v1/models")).json()["data"][0]["id"]
        pool = h1client.Pool(sim.url + "/v1/chat/completions", Deadlines(stall_s=20, total_s=30))
        body = build_body(model, "Explain expert parallelism.", 24)
        traces = [RequestTrace(f"sim-{i}", 4, False, 0) for i in range(4)]
        try:
            await asyncio.gather(*(h1client.run_request(pool, pool.request_bytes(body, t.request_id), t,
                                                        pool.deadlines) for t in traces))
        finally:
            pool.close()
    for t in traces:
        assert t.ok, t.error
        assert t.usage_tokens == 24 and t.tokens == 24 and t.status == 200
        assert t.headers_ns is not None and t.first_ns is not None and t.sent_ns < t.headers_ns <= t.first_ns


def test_request_bytes_and_urls() -> None:
    pool = h1client.Pool("http://127.0.0.1:8000/v1/chat/completions", Deadlines())
    data = pool.request_bytes(b'{"a":1}', "r-1")
    assert data.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n")
    assert data.endswith(b'X-Request-ID: r-1\r\nContent-Length: 7\r\n\r\n{"a":1}')
    tls = h1client.Pool("https://gpu-host.example/v1/chat/completions", Deadlines())
    assert tls.port == 443 and tls.ssl is not None and b"Host: gpu-host.example\r\n" in tls.request_bytes(b"", "x")
    with pytest.raises(ValueError, match="ftp://"):
        h1client.Pool("ftp://gpu-host.example/", Deadlines())


async def test_engine_burst_opens_c_connections_then_sends_at_one_intended_time(minimal_server) -> None:
    from kimitui.loadgen.sweep import SweepEngine
    from kimitui.events import Event, LevelResult, SweepSpec

    c = 64
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[c], mode="burst", max_tokens=3,
                     warmup_requests=0, extra_body={"ttft_ms": 200, "tick_ms": 1})
    events: list[Event] = []
    await SweepEngine(spec, events.append).run()
    results = [e for e in events if isinstance(e, RequestResult)]
    [level] = [e for e in events if isinstance(e, LevelResult)]
    assert len(results) == c and all(r.ok for r in results)
    assert len({r.intended_send for r in results}) == 1  # the burst's one start
    assert all(r.sent >= r.intended_send for r in results)
    assert level.dispatch_delay_p99_ms is not None and level.dispatch_delay_p99_ms >= 0
    # exactly C connections, opened before the clock started: none was opened by a send
    assert minimal_server.state.connections == c and minimal_server.state.max_in_flight == c


# Raw UTF-8, as SGLang 0.5.23 writes it (model_dump_json): curly quotes, an accent, CJK, an emoji.
UTF8_SSE = ('data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
            'data: {"choices":[{"delta":{"content":"é"}}],"usage":{"completion_tokens":1}}\n\n'
            'data: {"choices":[{"delta":{"content":" “日本”"}}],"usage":{"completion_tokens":3}}\n\n'
            'data: {"choices":[{"delta":{"content":" 🙂"},"finish_reason":"length"}],"usage":{"completion_tokens":4}}\n\n'
            'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}\n\n'
            "data: [DONE]\n\n").encode()


async def _split_server(response: bytes, cuts: list[int]) -> tuple[asyncio.Server, str]:
    """Writes ``response`` in pieces cut at ``cuts``, pausing between writes so each is its own read."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in zip([0, *cuts], [*cuts, len(response)]):
            writer.write(response[a:b])
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _utf8_response() -> tuple[bytes, list[int]]:
    """A close-framed response and cuts inside three multi-byte characters (é, 日, 🙂)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    response = head + UTF8_SSE
    cuts = [response.index("é".encode()) + 1, response.index("日".encode()) + 2, response.index("🙂".encode()) + 3]
    return response, cuts


@pytest.mark.parametrize("client", ["h1client", "aiohttp"])
async def test_raw_utf8_split_inside_a_character_is_parsed(client: str) -> None:
    response, cuts = _utf8_response()
    server, url = await _split_server(response, cuts)
    trace = RequestTrace("u", 1, False, 0)
    async with server:
        if client == "h1client":
            pool = h1client.Pool(url + "/v1/chat/completions", Deadlines(stall_s=5))
            try:
                await h1client.run_request(pool, pool.request_bytes(b"{}", "u"), trace, pool.deadlines)
            finally:
                pool.close()
        else:
            import aiohttp

            from kimitui.loadgen.client import make_connector
            from kimitui.loadgen.client import run_request as aiohttp_request

            async with aiohttp.ClientSession(connector=make_connector(1)) as http:
                await aiohttp_request(http, url + "/v1/chat/completions", b"{}", trace, Deadlines(stall_s=5))
    assert trace.ok, f"{trace.error_class}: {trace.error}"
    assert trace.chunk_tok == [1, 2, 1] and trace.usage_tokens == 4 and trace.prompt_tokens == 5
    # each cut fell between reads: the chunks carrying é, 日本 and 🙂 were stamped 50 ms apart
    assert all(b - a >= 40_000_000 for a, b in zip(trace.chunk_ns, trace.chunk_ns[1:]))


def test_parser_takes_raw_utf8_but_not_broken_utf8_or_trailing_data() -> None:
    from kimitui.loadgen.client import SseSplitter

    for payload, ok in [('{"choices":[{"delta":{"content":"é"}}]}'.encode(), True),
                        (b'{"choices":[{"delta":{"content":"\\u00e9"}}]}', True),
                        ('{"choices":[{"delta":{"content":"中文 🙂"}}]} '.encode(), True),
                        ('{"choices":[{"delta":{"content":"é"}}]}x'.encode(), False),
                        ('{"choices":[{"delta":{"content":"é"}}]}'.encode()[:-5] + b"\xff}]}", False)]:
        trace = RequestTrace("p", 1, False, 0)
        SseSplitter(trace).feed(b"data: " + payload + b"\n\n", 1)
        assert (trace.error_class is None) is ok, (payload, trace.error)
        assert trace.tokens == (1 if ok else 0)


def test_tokens_of_a_chunk_without_text_go_to_the_next_text_chunk() -> None:
    """vLLM sends a token that makes no text yet (half of a UTF-8 character) as an empty chunk with its
    usage; the next text chunk carries it.  Per-chunk counts must still add up to the server's count."""
    from kimitui.loadgen.client import SseSplitter

    def chunk(content: str, ct: int, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"choices": [{"delta": {"content": content}, "finish_reason": finish}],
                                       "usage": {"prompt_tokens": 9, "completion_tokens": ct}},
                                      ensure_ascii=False).encode() + b"\n\n"

    trace = RequestTrace("v", 1, False, 0)
    sse = SseSplitter(trace)
    for i, piece in enumerate([chunk("", 0), chunk("a", 1), chunk("", 2), chunk("é", 3), chunk("", 4),
                               chunk("", 5), chunk("日", 6, "length")]):
        sse.feed(piece, 10 + i)
    sse.feed(b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":6}}\n\ndata: [DONE]\n\n', 20)
    assert trace.chunk_tok == [1, 2, 3] and sum(trace.chunk_tok) == trace.usage_tokens == 6
    assert trace.chunk_ns == [11, 13, 16] and trace.first_ns == 11

    # the last tokens made no text: the final count still lands in the chunks (on the last one)
    from kimitui.loadgen.client import Clock, to_result

    trace = RequestTrace("w", 1, False, 0)
    sse = SseSplitter(trace)
    for i, piece in enumerate([chunk("a", 1), chunk("b", 2), chunk("", 3), chunk("", 4, "length")]):
        sse.feed(piece, 10 + i)
    sse.feed(b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}\n\ndata: [DONE]\n\n', 20)
    result = to_result(trace, "s", Clock())
    assert result.completion_tokens == 4 and result.chunks == 2 and result.chunk_tokens == [1, 3]
