"""Requests that never connect, servers that go silent, levels that fail at once: the sweep's times stay true.

Real pieces only: the load process (``python -m kimitui.loadgen.worker``) with a
lowered file-descriptor limit, ``tests/support/minimal_server.py`` and small raw
asyncio servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time

import pytest

from kimitui.events import ErrorEvent, LevelResult, LevelStarted, RequestResult, SweepSpec, parse_event
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(60)


def _run_worker(spec: SweepSpec, nofile: int, hard: int | None = None,
                hold_stdin: bool = False) -> tuple[list[object], float]:
    """The real load process with RLIMIT_NOFILE lowered to ``nofile`` (hard too unless given); its events and run time."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard or nofile))  # the worker raises soft to hard

    config = {"spec": spec.model_dump(mode="json"), "sweep_id": "fd-test"}
    t0 = time.time()
    if hold_stdin:  # the parent stays: end of stdin would abort the sweep after its first level
        with subprocess.Popen([sys.executable, "-m", "kimitui.loadgen.worker"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, preexec_fn=limit) as popen:
            assert popen.stdin is not None and popen.stdout is not None
            popen.stdin.write(json.dumps(config).encode() + b"\n")
            popen.stdin.flush()
            events = []
            for line in popen.stdout:
                events.append(parse_event(line))
                if events[-1].kind == "sweep_result":
                    break
            popen.stdin.close()
            assert popen.wait(timeout=30) == 0
        return events, time.time() - t0
    proc = subprocess.run([sys.executable, "-m", "kimitui.loadgen.worker"], input=json.dumps(config).encode() + b"\n",
                          capture_output=True, timeout=45, preexec_fn=limit)
    took = time.time() - t0
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return [parse_event(line) for line in proc.stdout.splitlines()], took


def test_a_hard_file_limit_below_a_level_is_said_before_it(minimal_server) -> None:
    """``ulimit -n`` sets the hard limit too: the worker cannot raise it, so it says so, once, before the level."""
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[8, 96], mode="burst", max_tokens=4,
                     requests_per_level=96, max_error_rate=1.0, extra_body={"ttft_ms": 50, "tick_ms": 5}, repeats=2)
    events, _ = _run_worker(spec, nofile=64, hold_stdin=True)
    warnings = [(i, e) for i, e in enumerate(events) if isinstance(e, ErrorEvent) and e.severity == "warning"]
    assert len(warnings) == 1, [e for e in events if isinstance(e, ErrorEvent)]
    i, warning = warnings[0]
    assert warning.message.startswith("C=96 needs ~") and "the hard limit is 64: raise it (`ulimit -Hn" in warning.message
    assert "expect connect failures" in warning.message and warning.source == "sweep"
    after = events[i + 1]
    assert isinstance(after, LevelStarted) and after.concurrency == 96 and after.repeat == 0
    assert [e.concurrency for e in events if isinstance(e, LevelResult)] == [8, 96, 8, 96]


def test_a_soft_file_limit_is_raised_to_the_hard_one(minimal_server) -> None:
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[96], mode="burst", max_tokens=4,
                     requests_per_level=96, max_error_rate=1.0, extra_body={"ttft_ms": 50, "tick_ms": 5})
    events, _ = _run_worker(spec, nofile=64, hard=4096)
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert all(e.ok for e in events if isinstance(e, RequestResult))


def test_burst_with_failed_connects_keeps_every_time_true(minimal_server) -> None:
    """`ulimit -n` below C: the requests that cannot open a socket fail as `connect`, sent when they tried."""
    c = 96
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[c], mode="burst", max_tokens=16,
                     requests_per_level=c, max_error_rate=1.0, extra_body={"ttft_ms": 100, "tick_ms": 5})
    events, took = _run_worker(spec, nofile=64)
    results = [e for e in events if isinstance(e, RequestResult)]
    [level] = [e for e in events if isinstance(e, LevelResult)]
    failed = [r for r in results if not r.ok]
    assert len(results) == c and failed and len(failed) < c, [r.error for r in failed[:3]]
    assert all(r.error_class == "connect" for r in failed), {r.error_class for r in failed}
    start = min(r.intended_send for r in results)
    for r in results:
        # every time is within the run: no request "sent" at the clock's origin, thousands of seconds early
        assert start <= r.intended_send <= r.sent < start + took, r
        assert 0 <= r.e2e_s < took, r
        assert r.t == pytest.approx(r.sent + r.e2e_s, abs=1e-3)
    for r in failed:
        assert r.e2e_s < 1.0 and r.chunks == 0 and r.ttft_s is None  # EMFILE fails at once
    # the level's wall is what really happened: a ~0.2 s burst, not the perf_counter origin
    assert level.wall_s is not None and 0.1 < level.wall_s < min(took, 5.0)


class _FailAll:
    """Answers each request's headers and first chunk, then, once ``c`` are in, kills them all.

    ``spread_s`` apart (0: in one go).  ``requests`` counts every request that reached it.
    """

    def __init__(self, c: int, spread_s: float) -> None:
        self.c, self.spread_s = c, spread_s
        self.requests = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> _FailAll:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            self.requests += 1
            first = b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"%x\r\n%s\r\n" % (len(first), first))
            self.writers.append(writer)
            if len(self.writers) == self.c:
                doomed, self.writers = self.writers, []
                for w in doomed:
                    w.transport.abort()  # RST: the client sees "connection closed mid-response"
                    if self.spread_s:
                        await asyncio.sleep(self.spread_s)


@pytest.mark.parametrize("spread_s", [0.0, 0.02])
async def test_a_sustained_level_whose_c_requests_all_fail_sends_no_second_round(spread_s: float) -> None:
    from kimitui.loadgen.sweep import SweepEngine
    from kimitui.events import Event, RequestStarted

    c = 16
    async with _FailAll(c, spread_s) as server:
        spec = SweepSpec(url=server.url, model="m", levels=[c, 32], mode="sustained", max_tokens=8,
                         requests_per_level=200, max_error_rate=0.5)
        events: list[Event] = []
        result = await SweepEngine(spec, events.append).run()
    started = [e for e in events if isinstance(e, RequestStarted)]
    [level] = [e for e in events if isinstance(e, LevelResult)]
    # max(10, C) = 16 failures stop dispatch: not one request after them, and the sweep stops
    assert server.requests == c and len(started) == c
    assert level.failures == {"reset": c} and level.stopped and result.outcome == "stopped"


async def test_a_level_of_http_500s_stops_after_max_10_c_ended(minimal_server) -> None:
    """Failures that come one by one: dispatch stops at the 10th, with at most C more already in flight."""
    from kimitui.loadgen.sweep import SweepEngine
    from kimitui.events import Event

    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[4], mode="sustained", max_tokens=6,
                     requests_per_level=40, max_error_rate=0.5, extra_body={"tick_ms": 2, "status": 500})
    events: list[Event] = []
    await SweepEngine(spec, events.append).run()
    [level] = [e for e in events if isinstance(e, LevelResult)]
    assert level.stopped and level.failures == {"http_status": level.requests} and 10 <= level.requests <= 10 + 4


async def test_a_silence_shorter_than_the_deadline_is_a_straggler_by_default(minimal_server) -> None:
    """An EPLB rebalance held a healthy SGLang's request 66 s: by default only the deadline ends a silence."""
    from kimitui.loadgen.sweep import SweepEngine
    from kimitui.events import Event

    assert SweepSpec(url="http://x", model="m", levels=[1]).stall_timeout_s is None  # was 60 s

    async def level(**kw: object) -> tuple[LevelResult, list[RequestResult]]:
        base: dict[str, object] = dict(url=minimal_server.url, model="minimal", levels=[2], max_tokens=10,
                                       requests_per_level=2, straggler_gap_s=0.5, request_timeout_s=5.0,
                                       extra_body={"tick_ms": 5, "stall_after": 3, "stall_ms": 1500})
        base.update(kw)
        events: list[Event] = []
        engine = SweepEngine(SweepSpec(**base), events.append)  # type: ignore[arg-type]
        await engine.run()
        return ([e for e in events if isinstance(e, LevelResult)][0],
                [e for e in events if isinstance(e, RequestResult)])

    lv, results = await level()
    assert all(r.ok and r.completion_tokens == 10 for r in results)
    assert len(lv.stragglers) == 2 and all(1.4 <= s.max_gap_s <= 2.5 for s in lv.stragglers)
    # a stall limit, when asked for, still cuts at its own length (scaled down from 60 s)
    lv, results = await level(stall_timeout_s=0.4)
    assert lv.failures == {"stall": 2} and all(0.38 <= r.max_gap_s <= 0.9 for r in results)
    # the deadline says what it cut: a stream silent for most of it
    lv, results = await level(request_timeout_s=0.8)
    assert lv.failures == {"timeout": 2}
    assert all("silent for the last 0." in r.error for r in results), [r.error for r in results]


def test_recordings_with_the_old_60_s_stall_limit_still_load_and_keep_it() -> None:
    from kimitui.loadgen.sweep import SweepEngine

    old = {"url": "http://gpu-host.example:30000", "model": "m", "levels": [1, 8], "stall_timeout_s": 60.0,
           "request_timeout_s": 900.0}
    spec = SweepSpec.model_validate_json(json.dumps(old))
    assert spec.stall_timeout_s == 60.0
    assert SweepEngine(spec, lambda e: None).deadlines.stall_s == 60.0
    assert SweepEngine(spec.model_copy(update={"stall_timeout_s": None}), lambda e: None).deadlines.stall_s is None
