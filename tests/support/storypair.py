"""Two 8-level sweeps as a host sends them, many stragglers per level: the seeds' story at report scale.

A (``ep8-tuned``) and B (``ep8-eplb``) sweep the seeds' eight levels.  In each level every request decodes
``TOKENS`` tokens at ``RATE`` tok/s; B's level has one EPLB rebalance (SGLang 0.5.23's ``[EPLBManager]
rebalance start`` / ``rebalance end time=``, every rank's copy, parsed by kimitui's own parser) that stops
the ``STRAGGLERS`` requests sent just before it, while the GPUs fall from ~50 % to ~8 % utilisation; A's
level has two requests that stop for 1 s with nothing to explain them.  Events come in the order a session records
them (log lines and GPU samples interleaved with the results by arrival time); the GPU samples arrive
``LINK_LAG_S`` after the agent read them (``host_t``), as over an SSH link, so a view that timed them by arrival
would read busy samples into the gap.
"""

from __future__ import annotations

import time

from kimitui.events import (Event, GpuReading, GpuSample, LevelResult, LevelStarted, Percentiles, RequestResult,
                            ServerInfo, Straggler, SweepResult, SweepSpec, SweepStarted)
from kimitui.sglang.log import to_event

T0 = 1_764_498_000.0
LEVELS = [1, 8, 32, 64, 96, 128, 192, 256]
RATE = 60.0
TOKENS = 48
STRAGGLERS = 16
"""Stalled requests per level of B (so 128 in the sweep: the report that listed each was 2,592 lines)."""
STALL_S = 4.0
HOST = "sim"
PAUSE_S = 3.0
"""Between levels: longer than a gap, so the span a gap is held against holds no rebalance of the level before."""
LINK_LAG_S = 0.6
"""How late a GPU sample arrives after the agent read it."""
BUSY = [49.0 + (i % 6) for i in range(8)]
"""Each GPU's utilisation outside a rebalance: 49–54 %."""
IDLE = 8.0
GPU_WORDS = "all 8 GPUs fell from 49–54 % to 8 % utilisation"
"""What every view says the GPUs did in a B straggler's gap (each GPU's mean inside against the span before)."""


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _line(t: float, message: str, rank: int = 0) -> Event:
    return to_event(f"[{_stamp(t)} TP{rank} EP{rank}] {message}", host=HOST, source="file", t=t + 0.05)


def _request(sweep: str, c: int, k: int, sent: float, stall: tuple[float, float] | None) -> RequestResult:
    """``TOKENS`` chunks at RATE from ``sent + 0.05``; a ``stall`` (start, end) holds the stream still."""
    offs, t = [], 0.05
    for _ in range(TOKENS):
        if stall is not None and stall[0] <= sent + t < stall[1]:
            t = stall[1] - sent
        offs.append(round(t * 1000, 1))
        t += 1 / RATE
    e2e = offs[-1] / 1000
    gaps = [b - a for a, b in zip(offs, offs[1:])]
    return RequestResult(t=sent + e2e, sweep_id=sweep, request_id=f"{sweep}-c{c}-r{k}", concurrency=c, ok=True,
                         intended_send=sent, sent=sent, ttft_s=offs[0] / 1000, e2e_s=e2e, completion_tokens=TOKENS,
                         chunks=TOKENS, decode_tok_s=(TOKENS - 1) / (e2e - offs[0] / 1000),
                         e2e_tok_s=TOKENS / e2e, max_gap_s=max(gaps) / 1000, chunk_offsets_ms=offs)


def _straggler(r: RequestResult) -> Straggler:
    offs = r.chunk_offsets_ms or []
    i = max(range(1, len(offs)), key=lambda k: offs[k] - offs[k - 1])
    start = r.sent + offs[i - 1] / 1000
    return Straggler(request_id=r.request_id, concurrency=r.concurrency, decode_tok_s=r.decode_tok_s,
                     median_decode_tok_s=RATE, max_gap_s=r.max_gap_s, gap_start=start,
                     gap_end=start + (r.max_gap_s or 0.0), reason=f"decode {r.decode_tok_s:.1f} tok/s < 0.5 x median")


def _samples(start: float, end: float, low: tuple[float, float] | None) -> list[Event]:
    """The agent's samples every 0.5 s: 49–54 % busy, 8 % while ``low`` holds."""
    out: list[Event] = []
    t, seq = start, 0
    while t <= end:
        still = low is not None and low[0] <= t <= low[1]
        gpus = [GpuReading(index=i, util_pct=IDLE if still else BUSY[i], sm_clock_mhz=1980.0, temp_c=60.0,
                           power_w=400.0) for i in range(8)]
        out.append(GpuSample(host=HOST, t=t + LINK_LAG_S, host_t=t, seq=seq, gpus=gpus))
        t += 0.5
        seq += 1
    return out


def sweep(sweep_id: str, profile: str, t0: float, *, eplb: bool) -> list[Event]:
    """One sweep of LEVELS; with ``eplb`` every level has a rebalance stalling STRAGGLERS requests."""
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=LEVELS, mode="burst",
                     max_tokens=TOKENS, stop_on_oversaturation=False)
    head: list[Event] = [ServerInfo(t=t0, host=HOST, args={"ep_size": 8, "enable_eplb": eplb}),
                         SweepStarted(t=t0, host=HOST, sweep_id=sweep_id, spec=spec, profile=profile)]
    timed: list[Event] = []
    t = t0 + 1.0
    for c in LEVELS:
        n = max(24, c)
        slow = STRAGGLERS if eplb else 2
        stall = (t + 1.2, t + 1.2 + (STALL_S if eplb else 1.0))
        results = [_request(sweep_id, c, k, t, None) for k in range(n - slow)]
        results += [_request(sweep_id, c, n - slow + k, t + 1.0 + 0.001 * k, stall) for k in range(slow)]
        end = max(r.t for r in results)
        timed.append(LevelStarted(t=t, host=HOST, sweep_id=sweep_id, concurrency=c))
        timed += results
        if eplb:
            for rank in range(8):
                timed.append(_line(stall[0] + rank * 0.001, "[EPLBManager] rebalance start", rank))
                timed.append(_line(stall[1] + rank * 0.001, f"[EPLBManager] rebalance end time={STALL_S:.3f}s", rank))
        timed += _samples(t, end + 1.0, stall if eplb else None)
        rates = sorted(r.decode_tok_s or 0.0 for r in results)
        timed.append(LevelResult(
            t=end + 0.2, host=HOST, sweep_id=sweep_id, concurrency=c, requests=n, ok=n, wall_s=end - t,
            output_tokens=TOKENS * n, agg_tok_s=TOKENS * n / (end - t), steady_tok_s=TOKENS * n / (end - t) * 1.01,
            decode_tok_s=Percentiles(p50=RATE, p90=rates[int(0.9 * n)], p99=rates[-1]),
            ttft=Percentiles(p50=0.05, p99=0.05), tpot=Percentiles(p50=1 / RATE),
            stragglers=[_straggler(r) for r in results[n - slow:]]))
        t = end + PAUSE_S
    timed.sort(key=lambda e: e.t)
    return head + timed + [SweepResult(t=t, host=HOST, sweep_id=sweep_id, levels=LEVELS, outcome="completed")]


def story_pair(t0: float = T0) -> tuple[list[Event], list[Event]]:
    """(A ep8-tuned, B ep8-eplb): B follows A by an hour."""
    return sweep("s1", "ep8-tuned", t0, eplb=False), sweep("s2", "ep8-eplb", t0 + 3600.0, eplb=True)
