"""Events for one request's slow stretch, cause by cause, as a host would send them.

Log lines are SGLang 0.5.23's text parsed by kimitui's own parser (``sglang.log.to_event``),
stamped with the host's clock in the text and with arrival time ``t = printed + lag`` (the SSH link's
delay); GPU samples carry the agent's ``host_t`` and arrive ``lag`` later too.  The request decodes at
``RATE`` tok/s and stops for ``GAP_S`` (or runs ``SLOW`` times slower) from ``GAP_AT``.
"""

from __future__ import annotations

import time

from kimitui.events import (Event, GpuReading, GpuSample, LevelResult, LevelStarted, Percentiles, RequestResult,
                            Straggler, SweepStarted, SweepSpec)
from kimitui.sglang.log import to_event

T0 = 1_764_498_000.0
SENT = T0 + 10.0
RATE = 61.0
TOKENS = 512
GAP_AT = SENT + 2.0
GAP_S = 20.0


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def line(t: float, message: str, *, rank: str = " TP0 EP0", lag: float = 0.0, zone_s: float = 0.0):
    """A SGLang line printed at ``t`` (its stamp in the host's zone, ``zone_s`` ahead), arriving ``lag`` later."""
    return to_event(f"[{stamp(t + zone_s)}{rank}] {message}", host="gpu-host", source="file", t=t + lag)


def decode(t: float, *, graph: bool = True, running: int = 1, usage: float = 0.05, lag: float = 0.0):
    return line(t, f"Decode batch, #running-req: {running}, #token: 4000, token usage: {usage:.2f}, "
                   f"cuda graph: {graph}, gen throughput (token/s): 61.00, #queue-req: 0", lag=lag)


def prefill(t: float, new_token: int, *, queue: int = 0, pending: int = 0, thr: float = 9000.0, lag: float = 0.0):
    return line(t, f"Prefill batch, #new-seq: 1, #new-token: {new_token}, #cached-token: 0, token usage: 0.30, "
                   f"#running-req: 4, #queue-req: {queue}, #pending-token: {pending}, cuda graph: False, "
                   f"input throughput (token/s): {thr:.2f}", lag=lag)


def eplb_lines(start: float, took: float, *, lag: float = 0.0) -> list:
    out = []
    for k in range(8):
        out.append(line(start + k * 0.001, "[EPLBManager] rebalance start", rank=f" TP{k} EP{k}", lag=lag))
        out.append(line(start + took + k * 0.001, f"[EPLBManager] rebalance end time={took:.3f}s",
                        rank=f" TP{k} EP{k}", lag=lag))
    return out


def reading(i: int, util: float = 92.0, *, clock: float = 2430.0, reasons: list[str] | None = None,
            temp: float = 70.0, pcie: float = 2e6, gen: int = 5, width: int = 16) -> GpuReading:
    return GpuReading(index=i, util_pct=util, sm_clock_mhz=clock, throttle_reasons=reasons or [], temp_c=temp,
                      pcie_tx_kbps=pcie, pcie_rx_kbps=pcie, power_w=450.0, pcie_gen=gen, pcie_width=width)


def samples(start: float, end: float, make, *, lag: float = 0.0, every: float = 0.5) -> list[GpuSample]:
    """One sample each ``every`` seconds; ``make(t)`` returns the eight readings at host time t."""
    out, t, seq = [], start, 0
    while t <= end:
        out.append(GpuSample(host="gpu-host", t=t + lag, host_t=t, seq=seq, gpus=make(t)))
        t += every
        seq += 1
    return out


def normal(t: float) -> list[GpuReading]:
    return [reading(i) for i in range(8)]


def result(request_id: str = "s1-c1-r3", *, gap_s: float = GAP_S, slow: float = 1.0, slow_s: float = 0.0,
           sent: float = SENT) -> RequestResult:
    """Decoding at RATE with one gap of ``gap_s`` at GAP_AT, or ``slow_s`` seconds at RATE/slow from there."""
    offs, t, slowed = [], 0.0, 0.0
    gap_at = GAP_AT - SENT
    for _ in range(TOKENS):
        step = 1 / RATE
        if gap_at <= t and slowed < slow_s:
            step *= slow
            slowed += step
        t += step
        if gap_s and abs(t - gap_at) < 0.5 / RATE:
            t += gap_s
        offs.append(round(t * 1000, 2))
    e2e = offs[-1] / 1000
    return RequestResult(t=sent + e2e, sweep_id="s1", request_id=request_id, concurrency=1, ok=True,
                         intended_send=sent, sent=sent, ttft_s=offs[0] / 1000, e2e_s=e2e, completion_tokens=TOKENS,
                         chunks=TOKENS, decode_tok_s=(TOKENS - 1) / (e2e - offs[0] / 1000),
                         max_gap_s=max(b - a for a, b in zip([0.0, *offs], offs)) / 1000,
                         chunk_offsets_ms=offs)


def straggler_of(r: RequestResult) -> Straggler:
    gap_at = None
    if r.chunk_offsets_ms:
        offs = r.chunk_offsets_ms
        i = max(range(1, len(offs)), key=lambda k: offs[k] - offs[k - 1])
        gap_at = r.sent + offs[i - 1] / 1000
    return Straggler(request_id=r.request_id, concurrency=r.concurrency, decode_tok_s=r.decode_tok_s,
                     median_decode_tok_s=RATE, max_gap_s=r.max_gap_s, gap_start=gap_at,
                     gap_end=gap_at + (r.max_gap_s or 0) if gap_at else None, reason="test")


def level_events(slow: RequestResult, n_normal: int = 9, *, agg: float | None = None) -> list[Event]:
    """A C=1 level: ``n_normal`` requests at RATE before the straggler, then its LevelResult."""
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi", levels=[1], max_tokens=TOKENS)
    ev: list[Event] = [SweepStarted(t=T0, sweep_id="s1", spec=spec, profile="ep8-eplb"),
                       LevelStarted(t=T0, sweep_id="s1", concurrency=1)]
    t = slow.sent - n_normal * (TOKENS / RATE + 0.02)
    normals = []
    for k in range(n_normal):
        r = result(f"s1-c1-n{k}", gap_s=0.0, sent=t)
        normals.append(r)
        t += (r.e2e_s or 0) + 0.02
    results = [*normals, slow]
    wall = (slow.sent + (slow.e2e_s or 0)) - normals[0].sent if normals else slow.e2e_s or 1.0
    tokens = TOKENS * len(results)
    ev += results
    ev.append(LevelResult(t=slow.sent + (slow.e2e_s or 0), sweep_id="s1", concurrency=1, requests=len(results),
                          ok=len(results), wall_s=wall, output_tokens=tokens,
                          agg_tok_s=agg if agg is not None else tokens / wall,
                          decode_tok_s=Percentiles(p50=RATE), stragglers=[straggler_of(slow)]))
    return ev


def level_of(results: list[RequestResult], *, sweep_id: str = "s1") -> list[Event]:
    """A C=1 level of these requests (one after another); the ones with a gap over 1 s are its stragglers."""
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi", levels=[1], max_tokens=TOKENS)
    start = min(r.sent for r in results)
    end = max(r.sent + (r.e2e_s or 0) for r in results)
    tokens = TOKENS * len(results)
    slow = [straggler_of(r) for r in results if (r.max_gap_s or 0) > 1.0]
    return [SweepStarted(t=start - 1, sweep_id=sweep_id, spec=spec, profile="ep8-eplb"),
            LevelStarted(t=start - 1, sweep_id=sweep_id, concurrency=1), *results,
            LevelResult(t=end, sweep_id=sweep_id, concurrency=1, requests=len(results), ok=len(results),
                        wall_s=end - start, output_tokens=tokens, agg_tok_s=tokens / (end - start),
                        decode_tok_s=Percentiles(p50=RATE), stragglers=slow)]


def back_to_back(n: int, gaps: dict[int, float]) -> list[RequestResult]:
    """``n`` requests one after another; request ``k`` in ``gaps`` stops for that long 2 s after it was sent."""
    out, t = [], SENT
    for k in range(n):
        r = result(f"s1-c1-r{k}", gap_s=gaps.get(k, 0.0), sent=t)
        out.append(r)
        t += (r.e2e_s or 0) + 0.02
    return out
