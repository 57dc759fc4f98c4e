"""What kimitui's Prometheus exporter costs: per event on the session's loop, and per scrape on its thread.

* µs per GpuSample of 8 GPUs (every field read, as a real H200 host reports them), through the
  exporter's sink, and the part of it that is the cause timeline's own work (the exporter feeds every
  event to a per-host :class:`kimitui.analysis.causes.timeline.CauseTimeline` for the stragglers' causes);
  the cockpit's rate at 8 hosts (8 × 4 Hz agent ticks + log-derived stats: ~40 GpuSample/s) as % of one core.
* µs per LevelResult: a level without stragglers, and one of C=64 whose 4 stragglers are attributed.
* a scrape with 8 hosts × 8 GPUs and 8 sweeps of 8 levels per host (the most a scrape holds): time to
  format (``generate_latest``) and over HTTP on 127.0.0.1, bytes and series.

Goals (docs/prometheus.md's figures, with room for a busy machine): the exporter at the cockpit's 8-host rate
<= 1 % of one core (~0.1 % measured), a full scrape over HTTP <= 1 s (~130 ms measured; Prometheus waits
10 s by default).  PASS/FAIL per goal; exit 1 on FAIL.

Run:  .venv/bin/python bench/bench_export.py [--samples 40000]
"""

from __future__ import annotations

import argparse
import gzip
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from prometheus_client import generate_latest  # noqa: E402

from kimitui.analysis.causes.timeline import CauseTimeline  # noqa: E402
from kimitui.analysis.level_stats import level_result  # noqa: E402
from kimitui.events import (  # noqa: E402
    ConnectionState,
    Event,
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    ProfileState,
    RequestResult,
    ServerHealth,
    ServerStats,
    SweepSpec,
    SweepStarted,
)
from kimitui.export import MetricsExporter, serve  # noqa: E402

from benchutil import exit_on, verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

HOSTS = [f"gpu{i}" for i in range(8)]
SPEC = SweepSpec(url="http://127.0.0.1:30000", model="kimi", levels=[1, 2, 4, 8, 16, 32, 64, 128], max_tokens=256)


def h200_sample(host: str, t: float, seq: int, rng: random.Random) -> GpuSample:
    """One agent tick of a busy 8-GPU host, every field the agent reads on an H200."""
    return GpuSample(t=t, host=host, seq=seq, host_t=t, gpus=[GpuReading(
        index=i, uuid=f"GPU-{host}-{i}", util_pct=rng.uniform(85, 100), mem_util_pct=rng.uniform(30, 60),
        mem_used_mib=131_000.0, mem_total_mib=143_771.0, power_w=rng.uniform(550, 700), power_limit_w=700.0,
        temp_c=rng.uniform(55, 75), sm_clock_mhz=1980.0, mem_clock_mhz=3201.0,
        pcie_tx_kbps=rng.uniform(1e5, 2e6), pcie_rx_kbps=rng.uniform(1e5, 2e6),
        throttle_reasons=["sw_power_cap"] if rng.random() < 0.1 else [], pstate=0, pcie_gen=5, pcie_width=16)
        for i in range(8)])


def level_events(host: str, sweep_id: str, c: int, t0: float, stragglers: int, rng: random.Random) -> list[Event]:
    """A level as the sweep worker reports it: LevelStarted, C streamed requests (chunk times kept; the first
    ``stragglers`` stall 8 s), the LevelResult from ``level_result``."""
    evs: list[Event] = [LevelStarted(t=t0, host=host, sweep_id=sweep_id, concurrency=c)]
    results = []
    for r in range(c):
        step = 25.0 * rng.uniform(0.97, 1.03)
        offsets = [150.0 + step * k + (8000.0 if r < stragglers and k >= 100 else 0.0) for k in range(256)]
        gap, at = max((b - a, a) for a, b in zip(offsets, offsets[1:]))
        e2e = offsets[-1] / 1000.0
        results.append(RequestResult(
            t=t0 + e2e, host=host, sweep_id=sweep_id, request_id=f"{sweep_id}-{c}-{r}", concurrency=c, ok=True,
            intended_send=t0, sent=t0, ttft_s=0.15, e2e_s=e2e, completion_tokens=256, chunks=256,
            decode_tok_s=255 / (e2e - 0.15), e2e_tok_s=256 / e2e, tpot_s=(e2e - 0.15) / 255, itl_p50_s=step / 1000,
            itl_p99_s=gap / 1000, max_gap_s=gap / 1000, max_gap_at=t0 + at / 1000, chunk_offsets_ms=offsets))
    evs += results
    evs.append(level_result(sweep_id, c, 0, SPEC, results, host=host, t=t0 + max(r.e2e_s or 0 for r in results)))
    return evs


def per_gpu_sample(n: int) -> tuple[float, float]:
    """µs per GpuSample through the exporter, and through a bare cause timeline (its share)."""
    rng = random.Random(1)
    samples = [h200_sample(HOSTS[i % 8], 1e6 + i / 32, i, rng) for i in range(n)]
    exporter = MetricsExporter()
    t = time.perf_counter()
    for ev in samples:
        exporter(ev)
    per = (time.perf_counter() - t) / n * 1e6
    timelines = {h: CauseTimeline() for h in HOSTS}
    t = time.perf_counter()
    for ev in samples:
        timelines[ev.host].add(ev)
    return per, (time.perf_counter() - t) / n * 1e6


def per_level(repeat: int = 20) -> tuple[float, float]:
    """µs per LevelResult (C=64): without stragglers, and with 4 attributed (its requests fed first)."""
    out = []
    for stragglers in (0, 4):
        times = []
        for k in range(repeat):
            exporter = MetricsExporter()
            evs = level_events("gpu0", f"s{k}", 64, 1e6, stragglers, random.Random(k))
            for ev in evs[:-1]:
                exporter(ev)
            level = evs[-1]
            assert isinstance(level, LevelResult) and len(level.stragglers) == stragglers
            t = time.perf_counter()
            exporter(level)
            times.append(time.perf_counter() - t)
        out.append(statistics.median(times) * 1e6)
    return out[0], out[1]


def full_exporter() -> MetricsExporter:
    """8 hosts × 8 GPUs, server figures, and 8 sweeps of 8 levels on each (each level's figures real)."""
    rng = random.Random(2)
    exporter = MetricsExporter()
    for h, host in enumerate(HOSTS):
        for ev in (ConnectionState(host=host, state="connected"), ProfileState(host=host, profile="ep8-tuned",
                   state="serving"), ServerHealth(host=host, ok=True, latency_s=0.05),
                   ServerStats(host=host, running_reqs=64, queued_reqs=2, token_usage=0.4, gen_throughput=2900.0,
                               cache_hit_rate=0.1), h200_sample(host, 1e6, 1, rng)):
            exporter(ev)
        for s in range(8):
            exporter(SweepStarted(t=1e6 + s, host=host, sweep_id=f"{host}-s{s}", spec=SPEC, profile="ep8-tuned"))
            for c in SPEC.levels:
                for ev in level_events(host, f"{host}-s{s}", c, 1e6 + s * 100 + c, 1 if c >= 32 else 0, rng)[-1:]:
                    exporter(ev)
    return exporter


def scrape_figures(exporter: MetricsExporter, rounds: int = 20) -> tuple[float, float, int, int, int]:
    """(ms to format, ms over HTTP, bytes, gzipped bytes, series) of a scrape, medians of ``rounds``."""
    fmt, http = [], []
    body = b""
    for _ in range(rounds):
        t = time.perf_counter()
        body = generate_latest(exporter.registry)
        fmt.append(time.perf_counter() - t)
    server = serve(exporter, 0)
    try:
        with httpx.Client() as client:
            for _ in range(rounds):
                t = time.perf_counter()
                reply = client.get(f"http://127.0.0.1:{server.port}/metrics")
                http.append(time.perf_counter() - t)
                assert reply.status_code == 200 and len(reply.content) == len(body)
    finally:
        server.close()
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return statistics.median(fmt) * 1e3, statistics.median(http) * 1e3, len(body), len(gzip.compress(body)), series


GOAL_PCT_8_HOSTS = 1.0
GOAL_SCRAPE_MS = 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40_000, help="GpuSamples for the per-event figure")
    args = parser.parse_args()
    per, timeline = per_gpu_sample(args.samples)
    print(f"GpuSample (8 GPUs): {per:.1f} µs per event through the exporter, of which the cause timeline "
          f"{timeline:.1f} µs")
    print(f"  at the cockpit's ~40 GpuSample/s at 8 hosts: {per * 40 / 1e4:.2f} % of one core")
    bare, attributed = per_level()
    print(f"LevelResult (C=64): {bare:.0f} µs without stragglers, {attributed:.0f} µs with 4 stragglers attributed")
    exporter = full_exporter()
    fmt, http, size, packed, series = scrape_figures(exporter)
    print(f"scrape, 8 hosts × 8 GPUs, 8 sweeps × 8 levels per host: {series} series, {size / 1024:.0f} KiB "
          f"({packed / 1024:.0f} KiB gzipped, as Prometheus asks for it), {fmt:.1f} ms to format, "
          f"{http:.1f} ms over HTTP (127.0.0.1)")
    pct = per * 40 / 1e4
    exit_on([verdict("exporter at 8 hosts' ~40 GpuSample/s", f"{pct:.2f} % of one core", f"<= {GOAL_PCT_8_HOSTS:g} %",
                     pct <= GOAL_PCT_8_HOSTS),
             verdict("a full scrape over HTTP", f"{http:.1f} ms", f"<= {GOAL_SCRAPE_MS:g} ms", http <= GOAL_SCRAPE_MS)])


if __name__ == "__main__":
    main()
