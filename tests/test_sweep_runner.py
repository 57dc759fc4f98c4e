"""SweepRunner end to end: a real load process against tests/support/minimal_server.py (known timing)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kimitui.loadgen.runner import SweepRunner
from kimitui.events import (
    ClientHealth,
    Event,
    LevelResult,
    RequestResult,
    RequestStarted,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.session import Session
from tests.support.sweep_servers import minimal_server, minimal_spec  # noqa: F401  (fixture)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


spec = minimal_spec


async def run(s: SweepSpec, **kw: Any) -> tuple[SweepResult, list[Event], SweepRunner]:
    session = Session(host="testhost")
    events: list[Event] = []
    session.add_sink(events.append)
    runner = SweepRunner(session, s, **kw)
    await runner.start()
    assert runner.running
    result = await runner.wait()
    assert not runner.running
    return result, events, runner


async def run_here(s: SweepSpec) -> tuple[SweepResult, list[Event]]:
    """The same engine in this process: for what does not need the process plumbing (faster)."""
    from kimitui.loadgen.sweep import SweepEngine

    events: list[Event] = []
    result = await SweepEngine(s, events.append, host="testhost").run()
    return result, events


def of(events: list[Event], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


async def test_sustained_sweep_publishes_everything_in_order(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[1, 3], requests_per_level=6, warmup_requests=2, max_tokens=30,
             extra_body={"ttft_ms": 50, "tick_ms": 4})
    result, events, runner = await run(s, profile="ep8-tuned")
    assert isinstance(events[0], SweepStarted) and events[0].spec == s and events[0].profile == "ep8-tuned"
    assert events[-1] == result and result.outcome == "completed" and result.levels == [1, 3]
    assert all(e.host == "testhost" for e in events)
    levels = of(events, LevelResult)
    assert [lv.concurrency for lv in levels] == [1, 3] and runner.levels == levels
    results = of(events, RequestResult)
    assert len(results) == 2 * (6 + 2)
    assert sum(r.warmup for r in results) == 4
    for lv in levels:
        assert lv.requests == 6 and lv.ok == 6 and lv.output_tokens == 6 * 30 and lv.mode == "sustained"
        assert lv.decode_tok_s.p50 == pytest.approx(250, rel=0.15)
        assert 0.045 <= lv.ttft.p50 <= 0.1  # the server's 50 ms (it shares this busy process's GIL)
        assert lv.steady_tok_s is not None and lv.steady_window_s > 0
    # warm-up obeyed the cap: the server never saw more than C=3 streams at once
    assert minimal_server.state.max_in_flight == 3
    # warm-up used only 32 tokens at most, measured requests the full 30
    assert {r.completion_tokens for r in results if not r.warmup} == {30}
    # every request announced, with the id the server received
    started = of(events, RequestStarted)
    assert sorted(e.request_id for e in started) == sorted(r.request_id for r in results)
    assert sorted(minimal_server.state.request_ids) == sorted(r.request_id for r in results)
    prog = of(events, SweepProgress)
    assert any(p.in_flight and p.in_flight[0].tokens > 0 for p in prog)
    assert prog[-1].done == 6
    # sustained slots: the next request's intended send is when the slot freed up
    assert all(0 <= (r.sent - r.intended_send) < 0.05 for r in results)


async def test_burst_sends_all_at_once_and_flushes_cache(minimal_server) -> None:
    s = spec(minimal_server.url, mode="burst", levels=[4, 8], requests_per_level=None, flush_cache=True)
    result, events = await run_here(s)
    assert result.outcome == "completed"
    assert minimal_server.state.flushes == 2
    for c in (4, 8):
        rs = [r for r in of(events, RequestResult) if r.concurrency == c]
        assert len(rs) == c and len({r.intended_send for r in rs}) == 1
    assert minimal_server.state.max_in_flight == 8


async def test_rate_mode_is_poisson_under_the_cap(minimal_server) -> None:
    s = spec(minimal_server.url, mode="rate", rate_rps=60.0, levels=[2], requests_per_level=12,
             extra_body={"tick_ms": 5})
    result, events = await run_here(s)
    rs = sorted(of(events, RequestResult), key=lambda r: r.intended_send)
    assert result.outcome == "completed" and len(rs) == 12 and all(r.ok for r in rs)
    gaps = [b.intended_send - a.intended_send for a, b in zip(rs, rs[1:])]
    assert len(set(round(g, 4) for g in gaps)) > 5  # exponential gaps, not a fixed tick
    assert minimal_server.state.max_in_flight <= 2
    # 100 ms requests at 60 req/s with only 2 slots: arrivals queue, and the delay is reported
    assert max(r.sent - r.intended_send for r in rs) > 0.1
    [lv] = of(events, LevelResult)
    assert lv.dispatch_delay_p99_ms > 100


async def test_seed_c1_straggler_burst_vs_sustained(minimal_server) -> None:
    """The seeds' C=1 story: one request stalls; the tail kills 'agg' only where it is a tail."""
    knobs = {"tick_ms": 4, "stall_after": 10, "stall_ms": 600, "stall_nth": 2}
    # sustained C=1, five requests, the second stalls for 1 s
    s1 = spec(minimal_server.url, levels=[1], requests_per_level=5, max_tokens=40, extra_body=knobs,
              straggler_gap_s=0.3)
    _, events = await run_here(s1)
    [lv] = of(events, LevelResult)
    [st] = lv.stragglers
    slow = next(r for r in of(events, RequestResult) if r.request_id == st.request_id)
    assert slow.max_gap_s == pytest.approx(0.6, abs=0.1)
    assert st.gap_start == pytest.approx(slow.max_gap_at) and st.gap_end - st.gap_start == pytest.approx(0.6, abs=0.1)
    assert "gap" in st.reason and "decode" in st.reason  # 39 tokens over ~0.75 s: far below the median too
    assert lv.decode_tok_s.p50 == pytest.approx(250, rel=0.2)  # the model itself is not slow
    # at C=1 the stall is inside the only window there is: steady state does not hide it
    assert lv.steady_tok_s == pytest.approx(lv.agg_tok_s, rel=0.1)
    assert lv.agg_tok_s < 0.6 * lv.decode_tok_s.p50

    # burst C=4: one of the four stalls and becomes the drain tail
    minimal_server.state.requests = 0
    s2 = spec(minimal_server.url, mode="burst", levels=[4], requests_per_level=None, max_tokens=40,
              extra_body=knobs, straggler_gap_s=0.3)
    _, events = await run_here(s2)
    [lv] = of(events, LevelResult)
    assert len(lv.stragglers) == 1
    assert lv.wall_s > 0.6
    assert lv.agg_tok_s < 160 / 0.6  # 160 tokens over the straggler's wall
    assert lv.steady_tok_s > 3 * lv.agg_tok_s  # while all four ran, the server was fine


async def test_abort_keeps_partial_results(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[3, 8], requests_per_level=30, max_tokens=50, extra_body={"tick_ms": 20})
    session = Session()
    events: list[Event] = []
    session.add_sink(events.append)
    runner = SweepRunner(session, s)
    await runner.start()
    await wait_for(lambda: len(of(events, RequestResult)) >= 3, 20, "the first three requests to end")
    after = len(events)

    def three_streaming() -> bool:  # the next three are mid-stream (50 tokens each): cut, each has a rate to keep
        return any(len(p.in_flight) == 3 and all(5 <= r.tokens <= 35 for r in p.in_flight)
                   for p in of(events[after:], SweepProgress))

    await wait_for(three_streaming, 20, "a progress snapshot of three requests streaming")
    result = await runner.abort()
    assert result.outcome == "aborted" and not runner.running
    [lv] = of(events, LevelResult)  # the partial level is reported, the next never started
    assert lv.concurrency == 3 and lv.stopped and lv.ok >= 3
    assert lv.failures == {"aborted": 3}
    cut = [r for r in of(events, RequestResult) if r.error_class == "aborted"]
    assert len(cut) == 3 and all(r.chunks > 0 and r.decode_tok_s for r in cut)  # measured so far: kept
    assert result.levels == [3]


async def test_error_rate_stops_the_sweep_and_keeps_what_ran(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[2, 4], requests_per_level=40, extra_body={"status": 500},
             max_error_rate=0.5)
    result, events = await run_here(s)
    assert result.outcome == "stopped" and "error rate" in result.reason
    [lv] = of(events, LevelResult)
    assert lv.failures == {"http_status": lv.requests} and 10 <= lv.requests < 40  # dispatch stopped early
    assert lv.stopped == result.reason


async def test_level_time_limit_cancels_in_flight_and_stops(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[2, 4], requests_per_level=10, max_tokens=100,
             extra_body={"tick_ms": 10}, level_time_limit_s=0.5)
    result, events = await run_here(s)
    assert result.outcome == "stopped" and "level time limit" in result.reason
    [lv] = of(events, LevelResult)
    assert lv.failures == {"cancelled": 2} and lv.wall_s < 1.0


async def test_dead_load_process_is_a_failed_result(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[2], requests_per_level=100, max_tokens=200, extra_body={"tick_ms": 20})
    session = Session()
    events: list[Event] = []
    session.add_sink(events.append)
    runner = SweepRunner(session, s)
    await runner.start()
    await wait_for(lambda: of(events, RequestStarted), 20, "a request to start")
    runner._proc.kill()  # noqa: SLF001 - the crash under test
    result = await runner.wait()
    assert result.outcome == "failed" and "exited with code -9" in result.reason
    assert of(events, SweepResult) == [result]


async def test_client_health_is_reported(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[4], duration_s=1.3, requests_per_level=None, max_tokens=20)
    _, events = await run_here(s)
    health = of(events, ClientHealth)
    assert health and health[0].cpu_pct is not None and health[0].loop_lag_ms is not None
    assert any(h.dispatch_delay_p99_ms is not None for h in health)
    [lv] = of(events, LevelResult)
    assert lv.requests >= 8  # kept 4 in flight for 1.3 s of 100 ms requests


async def test_a_bad_setting_is_a_failed_sweep_not_a_crash(minimal_server) -> None:
    result, events, _ = await run(spec(minimal_server.url, prompts="random:lots"))
    assert result.outcome == "failed" and "prompts: 'random:lots'" in result.reason
    assert [e.kind for e in events] == ["sweep_started", "error", "sweep_result"]


async def test_abort_wakes_a_rate_sweep_waiting_for_its_next_arrival(minimal_server) -> None:
    s = spec(minimal_server.url, mode="rate", rate_rps=0.05, levels=[2], requests_per_level=3, max_tokens=5)
    session = Session()
    events: list[Event] = []
    session.add_sink(events.append)
    runner = SweepRunner(session, s)
    await runner.start()
    # running, and (almost surely) waiting ~20 s for an arrival
    await wait_for(lambda: of(events, SweepProgress), 20, "the sweep's first progress")
    result = await asyncio.wait_for(runner.abort(), 5)
    assert result.outcome == "aborted"


async def test_oversaturation_stops_the_sweep(minimal_server) -> None:
    """TTFT climbs with C while the server's token rate stays flat: the sweep stops climbing."""
    from kimitui.loadgen.sweep import SweepEngine

    # busy_ms: each stream gets a token every 80 ms x open streams (12.5 tok/s in all), TTFT 80 ms x its place
    s = spec(minimal_server.url, mode="burst", levels=[1, 8, 16], requests_per_level=None, max_tokens=4,
             extra_body={"busy_ms": 80})
    events: list[Event] = []
    result = await SweepEngine(s, events.append).run()
    levels = of(events, LevelResult)
    assert [lv.concurrency for lv in levels] == [1, 8]
    assert levels[1].ttft.p50 > 3 * levels[0].ttft.p50
    assert levels[1].agg_tok_s == pytest.approx(levels[0].agg_tok_s, rel=0.15)
    assert result.outcome == "stopped" and result.reason.startswith("over-saturated: TTFT p50")
    assert levels[-1].stopped == result.reason


def test_worker_can_write_its_events_to_a_file(minimal_server, tmp_path) -> None:  # noqa: ANN001
    """``python -m kimitui.loadgen.worker > events.jsonl``: a regular file, not a pipe (used by bench/)."""
    import json
    import subprocess
    import sys

    from kimitui.events import parse_event

    out = tmp_path / "events.jsonl"
    config = {"spec": spec(minimal_server.url, levels=[2], requests_per_level=3).model_dump(mode="json"),
              "sweep_id": "file-test"}
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kimitui.loadgen.worker"], stdin=subprocess.PIPE, stdout=f)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
        proc.stdin.close()
    events = [parse_event(line) for line in out.read_bytes().splitlines()]
    assert events[0].kind == "sweep_started" and events[-1].kind == "sweep_result"
    assert events[-1].outcome == "completed" and events[-1].sweep_id == "file-test"
    assert sum(e.kind == "request_result" for e in events) == 3


async def test_load_process_starts_from_the_parent_of_a_clone(minimal_server, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A working directory holding a folder named ``kimitui`` (with ``bench/``, as a clone has) is not imported."""
    (tmp_path / "kimitui" / "bench").mkdir(parents=True)
    (tmp_path / "kimitui" / "kimitui").mkdir()
    monkeypatch.chdir(tmp_path)
    result, events, _ = await run(spec(minimal_server.url, requests_per_level=2))
    assert result.outcome == "completed", (result.reason, [e for e in events if type(e).__name__ == "ErrorEvent"])
