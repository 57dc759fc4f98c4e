"""One streaming request against tests/support/minimal_server.py, whose timing is known exactly."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time

import aiohttp
import pytest

from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, _read_stream, build_body, make_connector, run_request, to_result
from kimitui.events import RequestResult
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(30)


async def one(url: str, deadlines: Deadlines = Deadlines(), max_tokens: int = 40, rid: str = "req-1",
              **knobs: object) -> RequestResult:
    clock = Clock()
    async with aiohttp.ClientSession(connector=make_connector(1)) as http:
        trace = RequestTrace(rid, 1, False, time.perf_counter_ns())
        body = build_body("minimal", "hello", max_tokens, extra=dict(knobs))
        await run_request(http, url + "/v1/chat/completions", body, trace, deadlines)
    return to_result(trace, "sweep-1", clock)


async def test_ttft_decode_e2e_match_the_servers_pacing(minimal_server) -> None:
    r = await one(minimal_server.url, ttft_ms=200, tick_ms=10, max_tokens=40)
    assert r.ok and r.error_class is None and r.status == 200
    # The role-only chunk arrives at once: it is the first byte, not the first token.
    assert r.ttfb_s is not None and r.ttfb_s < 0.1
    assert 0.195 <= r.ttft_s <= 0.30  # the server's sleeps only ever overshoot under load
    assert r.completion_tokens == 40 and r.tokens_from_usage and r.chunks == 40
    assert 75 <= r.decode_tok_s <= 108  # 39 tokens over 39 ticks of 10 ms; a loaded box only slows it
    assert 0.58 <= r.e2e_s <= 0.80
    assert r.e2e_tok_s == pytest.approx(40 / r.e2e_s)
    assert 0.0095 <= r.itl_p50_s <= 0.013
    assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 39)
    assert len(r.chunk_offsets_ms) == 40 and r.chunk_offsets_ms[0] == pytest.approx(r.ttft_s * 1000, abs=0.01)
    assert r.max_gap_s < 0.08
    assert r.finish_reason == "length"
    assert r.intended_send <= r.sent <= r.t


async def test_multi_token_chunks_are_counted_as_tokens(minimal_server) -> None:
    r = await one(minimal_server.url, ttft_ms=20, tick_ms=20, tokens_per_chunk=3, max_tokens=30)
    assert r.ok and r.chunks == 10 and r.completion_tokens == 30
    assert r.chunk_tokens == [3] * 10
    # Judged against the arrivals this run measured, not the server's 20 ms pacing: a busy box
    # delays one chunk and bunches the next (gaps of 16 ms and 24 ms are both seen), so only
    # the counting is the client's to get right.  Offsets are floored to the microsecond.
    off = r.chunk_offsets_ms
    assert off is not None and len(off) == 10
    span_s = (off[-1] - off[0]) / 1000
    # 27 tokens after the first chunk over the measured span: tokens/s, not 9 "chunks"/s (3x fewer).
    assert r.decode_tok_s == pytest.approx(27 / span_s, rel=1e-4)
    # token-normalised ITL: each measured gap carried 3 tokens.
    gaps = [(b - a) / 1000 for a, b in zip(off, off[1:])]
    assert r.itl_p50_s == pytest.approx(statistics.median(gaps) / 3, abs=1e-6)


async def test_without_usage_tokens_are_counted_and_flagged(minimal_server) -> None:
    r = await one(minimal_server.url, tick_ms=2, max_tokens=12, no_usage=True)
    assert r.ok and r.completion_tokens == 12 and r.chunks == 12
    assert r.tokens_from_usage is False


async def test_x_request_id_reaches_the_server(minimal_server) -> None:
    await one(minimal_server.url, rid="sweep-1-c1-r0-7", max_tokens=2)
    assert minimal_server.state.request_ids == ["sweep-1-c1-r0-7"]


async def test_http_500_is_http_status(minimal_server) -> None:
    r = await one(minimal_server.url, status=500)
    assert not r.ok and r.error_class == "http_status" and r.status == 500
    assert "injected" in r.error and r.completion_tokens == 0


async def test_drop_mid_stream_is_reset_and_keeps_what_arrived(minimal_server) -> None:
    r = await one(minimal_server.url, tick_ms=5, drop_after=5, max_tokens=40)
    assert not r.ok and r.error_class == "reset"
    assert r.chunks == 5 and r.completion_tokens == 5 and r.ttft_s is not None


async def test_stall_deadline_ends_incomplete_with_its_gap(minimal_server) -> None:
    r = await one(minimal_server.url, Deadlines(stall_s=0.4, total_s=10), tick_ms=5, stall_after=3,
                  stall_ms=5000, max_tokens=40)
    assert not r.ok and r.error_class == "stall"
    assert r.chunks == 3 and r.completion_tokens == 3
    assert 0.38 <= r.max_gap_s <= 0.8  # the silence until the deadline fired
    assert r.max_gap_at == pytest.approx(r.sent + r.chunk_offsets_ms[-1] / 1000, abs=0.002)


async def test_total_deadline_is_timeout_with_partial_measurements(minimal_server) -> None:
    r = await one(minimal_server.url, Deadlines(stall_s=5, total_s=0.3), tick_ms=20, max_tokens=100)
    assert not r.ok and r.error_class == "timeout"
    assert 5 <= r.chunks <= 16 and r.decode_tok_s is not None
    assert 0.29 <= r.e2e_s <= 0.5


async def test_error_object_in_stream_is_stream_error(minimal_server) -> None:
    r = await one(minimal_server.url, tick_ms=2, error_after=4)
    assert not r.ok and r.error_class == "stream_error" and "injected failure" in r.error
    assert r.chunks == 4


async def test_bad_json_is_malformed(minimal_server) -> None:
    r = await one(minimal_server.url, tick_ms=2, malformed_after=2)
    assert not r.ok and r.error_class == "malformed" and r.chunks == 2


async def test_refused_connection_is_connect() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = await one(f"http://127.0.0.1:{port}")
    assert not r.ok and r.error_class == "connect" and r.status is None


async def test_connector_is_sized_to_the_level_not_aiohttps_100(minimal_server) -> None:
    c = 150
    async with aiohttp.ClientSession(connector=make_connector(c)) as http:
        traces = [RequestTrace(f"r{i}", c, False, time.perf_counter_ns()) for i in range(c)]
        body = build_body("minimal", "x", 3, extra={"ttft_ms": 400, "tick_ms": 1})
        await asyncio.gather(*(run_request(http, minimal_server.url + "/v1/chat/completions", body, t, Deadlines())
                               for t in traces))
    assert all(t.ok for t in traces)
    assert minimal_server.state.max_in_flight == c


class _Chunks:
    """Stands in for aiohttp's StreamReader: yields the bytes in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def iter_any(self):  # noqa: ANN201
        for p in self.pieces:
            await asyncio.sleep(0.01)
            yield p


async def test_sse_events_split_across_reads_are_reassembled() -> None:
    ev = [b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
          b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n',
          b'data: {"choices":[{"delta":{"reasoning_content":"b"}}]}\n\n',
          b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n',
          b"data: [DONE]\n\n"]
    raw = b"".join(ev)
    pieces = [raw[:30], raw[30:75], raw[75:76], raw[76:150], raw[150:]]
    trace = RequestTrace("x", 1, False, time.perf_counter_ns())
    await _read_stream(_Chunks(pieces), trace)  # type: ignore[arg-type]
    assert trace.saw_done and trace.error_class is None
    assert trace.tokens == 2 and trace.usage_tokens == 2 and trace.prompt_tokens == 3
    # the content chunk completed in the 3rd read, the reasoning chunk in the 4th: distinct stamps
    assert len(trace.chunk_ns) == 2 and trace.chunk_ns[1] - trace.chunk_ns[0] >= 5_000_000
