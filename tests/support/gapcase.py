"""The issue-15 straggler case as events: the story's C=1 straggler ``s2-c1-r4`` with a 35.6 s gap at 10:21:07.

Its own chunk offsets (63 tok/s, stopped for 35.6 s), the GPUs falling to ~10 % during the gap, all 8 ranks
printing the EPLB rebalance lines, and kimitui polling ``/metrics``, ``/v1/loads`` and ``/health`` every
second: the 119-line window the issue saw.  ``FakeController(initial=gap_case_events())`` opens it in a pilot
(tests/test_tui_straggler_detail.py; a snapshot of the straggler detail can use it too).
"""

from __future__ import annotations

import time

from kimitui.events import (ConnectionState, Event, LevelResult, LevelStarted, LogLine, Percentiles, ProfileState,
                            RequestResult, Straggler, SweepStarted)
from tests.support.fakecontrol import T0, caps, gpu_sample, spec

SENT = T0 + 66.0
GAP_START, GAP_S = T0 + 67.0, 35.6
"""10:21:07, as the issue saw it."""
RATE = 63.0
TOKENS = 512
POLL_PATHS = ("/metrics", "/v1/loads", "/health")


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def chunk_offsets() -> list[float]:
    """One token per chunk at 63 tok/s, stopped for 35.6 s at 10:21:07."""
    offs, t = [], 0.0
    for _ in range(TOKENS):
        t += 1 / RATE
        if abs(SENT + t - GAP_START) < 0.5 / RATE:
            t += GAP_S
        offs.append(round(t * 1000, 1))
    return offs


def straggler_result() -> RequestResult:
    offs = chunk_offsets()
    e2e = offs[-1] / 1000
    return RequestResult(t=SENT + e2e, sweep_id="s2", request_id="s2-c1-r4", concurrency=1, ok=True,
                         intended_send=SENT, sent=SENT, ttft_s=1 / RATE, e2e_s=e2e, completion_tokens=TOKENS,
                         chunks=TOKENS, decode_tok_s=TOKENS / e2e, max_gap_s=GAP_S, max_gap_at=GAP_START,
                         chunk_offsets_ms=offs)


def the_straggler() -> Straggler:
    r = straggler_result()
    return Straggler(request_id="s2-c1-r4", concurrency=1, decode_tok_s=r.decode_tok_s, median_decode_tok_s=RATE,
                     max_gap_s=GAP_S, gap_start=GAP_START, gap_end=GAP_START + GAP_S, reason=f"gap {GAP_S} s > 0.50 s")


def rank_lines(t: float, message: str) -> list[LogLine]:
    return [LogLine(t=t + k * 0.001, raw=f"[{_stamp(t)} TP{k} EP{k}] [EPLBManager] {message}", line_kind="eplb",
                    severity="info") for k in range(8)]


def gap_case_events() -> list[Event]:
    """The cockpit after the EPLB sweep's C=1 level: GPUs, 8 ranks' EPLB lines, polling, the straggler's result."""
    ev: list[Event] = [ConnectionState(t=T0, state="connected"), caps(T0),
                       ProfileState(t=T0, profile="ep8-eplb", state="serving"),
                       SweepStarted(t=T0 + 60, sweep_id="s2", spec=spec(), profile="ep8-eplb"),
                       LevelStarted(t=T0 + 60, sweep_id="s2", concurrency=1)]
    end = GAP_START + GAP_S
    for k in range(60, 120):
        t = T0 + k
        in_gap = GAP_START <= t <= end
        ev.append(gpu_sample(t, 93.0, seq=k, dip=83.0 if in_gap else 0.0))
        for path in POLL_PATHS:
            ev.append(LogLine(t=t + 0.3, raw=f'INFO:     127.0.0.1:5{k:04d} - "GET {path} HTTP/1.1" 200 OK',
                              line_kind="access"))
    ev.append(LogLine(t=GAP_START - 0.5, raw=f"[{_stamp(GAP_START - 0.5)} TP0 EP0] Decode batch. #running-req: 1, "
                      "gen throughput (token/s): 62.8", line_kind="decode"))
    ev += rank_lines(GAP_START + 0.1, "rebalance start")
    ev += rank_lines(end - 0.2, f"rebalance end time={GAP_S} s")
    ev.sort(key=lambda e: e.t)
    ev.append(straggler_result())
    ev.append(LevelResult(t=end + 9, sweep_id="s2", concurrency=1, requests=6, ok=6, agg_tok_s=38.4,
                          steady_tok_s=62.1, decode_tok_s=Percentiles(p50=RATE), stragglers=[the_straggler()]))
    return ev
