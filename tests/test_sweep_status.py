"""A sweep's levels say what they are: aborted/failed levels are marked and never the peak, a
saturated client is measured and marked, a server without /flush_cache is said once.

The engine runs in this process against real servers on 127.0.0.1, so a test can block its
event loop the way a saturated load process blocks."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kimitui.analysis.level_stats import level_rate, peak_level
from kimitui.loadgen.sweep import FLUSH_CACHE_MISSING, SweepEngine
from kimitui.events import (
    ClientHealth,
    ErrorEvent,
    Event,
    LevelResult,
    LevelStarted,
    RequestResult,
    RequestStarted,
)
from tests.support.strict_server import StrictServer
from tests.support.sweep_servers import minimal_server, minimal_spec  # noqa: F401  (fixture)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


spec = minimal_spec


def of(events: list[Event], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


async def test_an_aborted_level_is_marked_and_never_the_peak(minimal_server) -> None:
    s = spec(minimal_server.url, levels=[1, 4], requests_per_level=8, max_tokens=60, extra_body={"tick_ms": 10})
    events: list[Event] = []
    engine = SweepEngine(s, events.append, host="testhost")
    task = asyncio.get_running_loop().create_task(engine.run())
    await wait_for(lambda: [e for e in of(events, RequestStarted) if e.concurrency == 4], 20, "C=4 to start")
    # A fixed wait on purpose: four streams at 100 tok/s each for a while, a higher rate than C=1 ever
    # had (the claim below is that the aborted level is never the peak, however fast it ran).
    await asyncio.sleep(0.3)
    engine.abort()
    result = await task
    c1, c4 = of(events, LevelResult)
    assert c1.status == "ok" and c1.valid
    assert c4.status == "aborted" and not c4.valid and "requests aborted" in c4.status_reason
    assert c4.ok == 0 and c4.output_tokens == 0 and c4.agg_tok_s is None  # partial streams are not output
    partial = [r for r in of(events, RequestResult) if r.concurrency == 4 and r.error_class == "aborted"]
    assert partial and all(r.completion_tokens > 0 for r in partial)  # ...though they did stream
    assert result.outcome == "aborted" and result.peak_tok_s == level_rate(c1)
    assert peak_level([c1, c4]) is c1


async def test_a_level_whose_every_request_failed_is_failed_with_the_servers_message() -> None:
    with StrictServer() as srv:
        s = spec(srv.url, model="kimi-wrong", levels=[2], requests_per_level=3, extra_body={})
        events: list[Event] = []
        result = await SweepEngine(s, events.append, host="testhost").run()
    [lv] = of(events, LevelResult)
    assert lv.status == "failed" and lv.status_reason == "all 3 requests failed (http_status 3)"
    assert lv.errors == {"http_status": "HTTP 404: The model `kimi-wrong` does not exist."}
    assert result.peak_tok_s is None and "error rate" in result.reason


async def test_a_blocked_client_loop_is_measured_per_level_and_marks_the_level(minimal_server) -> None:
    """A 500 ms stall of the load process's own loop (what a saturated client does) during C=4."""
    s = spec(minimal_server.url, levels=[2, 4], requests_per_level=4, max_tokens=30, extra_body={"tick_ms": 20})
    events: list[Event] = []
    loop = asyncio.get_running_loop()

    def emit(ev: Event) -> None:
        events.append(ev)
        if isinstance(ev, LevelStarted) and ev.concurrency == 4:
            loop.call_later(0.2, time.sleep, 0.5)  # blocks the engine's loop, like a CPU-bound client

    result = await SweepEngine(s, emit, host="testhost").run()
    assert result.outcome == "completed"
    c2, c4 = of(events, LevelResult)
    assert c4.client is not None and c4.client.loop_lag_max_ms >= 400
    assert c4.client_distorted and "event-loop lag up to" in c4.client_distorted
    assert c2.client is not None and c2.client.loop_lag_max_ms is not None and c2.client.loop_lag_max_ms < 400
    assert c2.client.cpu_max_pct is not None and c2.client.dispatch_delay_max_p99_ms is not None
    assert c4.status == "ok"  # the server measured fine; it is the client's figures that are marked
    # the once-a-second events still carry the lag too
    assert max(h.loop_lag_ms or 0 for h in of(events, ClientHealth)) >= 400


async def test_flush_cache_missing_is_said_once_and_not_asked_again() -> None:
    with StrictServer() as srv:
        s = spec(srv.url, model=srv.served, levels=[1, 2, 3], requests_per_level=2, flush_cache=True,
                 extra_body={})
        events: list[Event] = []
        result = await SweepEngine(s, events.append, host="testhost").run()
        flushes = srv.hits["/flush_cache"]
    assert result.outcome == "completed" and len(of(events, LevelResult)) == 3
    said = [e for e in of(events, ErrorEvent) if "flush_cache" in e.message]
    assert [e.message for e in said] == [FLUSH_CACHE_MISSING] and "404" in said[0].detail
    assert flushes == 1
