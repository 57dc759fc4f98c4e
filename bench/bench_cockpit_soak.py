"""Does the real cockpit stay flat under the log firehose, sweep after sweep (issue 30)?

The real ``KimituiApp`` runs headless (Textual's Pilot, 160x50) over a controller that publishes, at
realistic rates and in real time, what a simulated host with ``decode_log_interval = 1`` sends:

* 8 GPUs at ``--gpu-hz`` (8), processes every 2 s, ``/metrics`` at 1 Hz, ``/server_info`` every 10 s;
* SGLang Decode lines at ``--log-rate`` lines/s (400), each parsed by the log follower's own
  ``to_event``/``to_stats`` (a LogLine and its ServerStats, as the live follower publishes them);
* back-to-back sweeps (``--levels`` 1,8,32,64,128,256 in ``--sweep-s`` 12 s each, a new sweep 0.5 s after
  the last: the 53 sweeps in 10 minutes of the issue's run): request starts and results (512 chunk
  offsets each), progress at 4 Hz in the load process's compact form, client health at 1 Hz, a
  straggler per level, the sweep's result; the controller says ``busy`` while a sweep runs, as the live one
  does, so the app re-checks its keys (and the footer rebuilds) at every sweep's start and end.

Every ``--sample-s`` (60) it prints RSS (``/proc/self/statm``), the live objects (``sys.getallocatedblocks``:
a leak grows them, the allocator's high water under load does not), the events published and dropped,
and with ``--tracemalloc`` the traced heap and the lines whose allocations grew most since the end of
the warm-up.  At the end: the figures after warm-up (``--warmup-min``, 20 by default: the 20-minute
straggler window and the 30-minute GPU notes fill at 8 Hz within it; shorter runs warm up for a third),
the slope of a least-squares line through them, and PASS/FAIL.

Goal (issue 16's, now under the firehose): RSS after warm-up stays within +10 % of its size at the end
of warm-up at every later sample, and the live objects (what a leak grows) projected to 4 hours stay
within +10 %.  The RSS carried on to 4 hours at the later half's slope is printed too, for information:
on a loaded machine RSS rises in steps during bursts of load (the allocator keeps its high water) and
then stays flat, which a linear projection mistakes for a leak.

Run:  .venv/bin/python bench/bench_cockpit_soak.py [--minutes 60] [--tracemalloc] [--speed 1]
``--speed S`` runs event time S times faster than the wall clock (a probe to find what grows; the
verdict is meant for ``--speed 1``, what a cockpit sees).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import random
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from kimitui.events import (  # noqa: E402
    ClientHealth,
    Event,
    GpuProcess,
    GpuProcs,
    LevelResult,
    LevelStarted,
    Percentiles,
    RequestResult,
    RequestStarted,
    ServerInfo,
    ServerStats,
    Straggler,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.loadgen.sweep import compact_in_flight  # noqa: E402
from kimitui.sim.logfmt import decode_line  # noqa: E402
from kimitui.sglang.log import to_event, to_stats  # noqa: E402
from kimitui.tui.app import KimituiApp  # noqa: E402
from tests.support.fakecontrol import FakeController, caps  # noqa: E402
from benchutil import rss_mb  # type: ignore[import-not-found]  # noqa: E402  # bench/ is on sys.path (above)
from bench_recording import gpu_sample  # type: ignore[import-not-found]  # noqa: E402

GOAL_PCT = 10.0
"""Issue 16's goal: RSS after warm-up within +10 % of its size at the end of warm-up, over 4 hours."""
TICK = 0.1
MAX_TOKENS = 512
AGG_TOK_S = {1: 65.0, 8: 250.0, 32: 600.0, 64: 900.0, 96: 1100.0, 128: 1250.0, 192: 1450.0, 256: 1538.0}
HOST = "sim"


# --------------------------------------------------------------------------- the streams (lazy, time-ordered)
def telemetry(rng: random.Random, t0: float, gpu_hz: float, log_rate: float) -> Iterator[Event]:
    """GPUs, processes, /metrics, /server_info and the Decode firehose, forever, in time order."""
    procs = [GpuProcess(gpu_index=i, pid=4242 + i, name="sglang::scheduler", used_mib=87_000.0, rank=f"TP{i}_EP{i}")
             for i in range(8)]
    info_args: dict[str, str | int | float | bool | None] = {f"arg_{k:03d}": (k * 7) % 100 for k in range(120)}
    info_args.update(sim=True, sim_time_scale=40.0, decode_log_interval=1, tp_size=8, ep_size=8)
    step = 1.0 / max(gpu_hz, log_rate, 1.0)
    next_gpu = next_log = t0
    k = seq = 0
    t = t0
    while True:
        if t >= next_gpu:
            yield gpu_sample(rng, t, seq, True)
            seq += 1
            next_gpu += 1.0 / gpu_hz
        whole = round((t - t0) / step)
        if whole % round(1.0 / step) == 0:  # once a second
            s = int(t - t0)
            yield ServerStats(t=t, host=HOST, source="metrics", running_reqs=64.0, queued_reqs=0.0,
                              token_usage=round(rng.random(), 4), gen_throughput=round(rng.uniform(0, 1600), 2))
            if s % 2 == 0:
                yield GpuProcs(t=t, host=HOST, procs=procs)
            if s % 10 == 0:
                yield ServerInfo(t=t, host=HOST, url="http://127.0.0.1:30000", version="0.5.23", args=dict(info_args))
        while next_log <= t:
            k += 1
            raw = (time.strftime("[%Y-%m-%d %H:%M:%S TP0 EP0] ", time.localtime(next_log))
                   + decode_line(running=rng.randint(1, 256), kv_tokens=rng.randint(1000, 200_000),
                                 token_usage=rng.random(), cuda_graph=True, gen_throughput=rng.uniform(50, 1600),
                                 queue=0))
            line = to_event(raw, host=HOST, source="sglang.log", cursor=f"{k}", t=next_log)
            yield line
            stats = to_stats(line, host=HOST, t=line.t)
            if stats is not None:
                yield stats
            next_log += 1.0 / log_rate
        t += step


def sweep_events(n: int, rng: random.Random, t0: float, levels: list[int], sweep_s: float) -> Iterator[Event]:
    """One sweep of ``sweep_s`` seconds: every level's starts, results, progress, health, level result."""
    sid = f"soak-{n:05d}"
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=levels, max_tokens=MAX_TOKENS)
    yield SweepStarted(t=t0, host=HOST, sweep_id=sid, spec=spec, profile=("ep8-tuned", "ep8-eplb")[n % 2])
    level_s = sweep_s / len(levels)
    for li, c in enumerate(levels):
        lt = t0 + li * level_s + 0.01
        end_t = lt + level_s - 0.05
        yield LevelStarted(t=lt, host=HOST, sweep_id=sid, concurrency=c)
        rate = AGG_TOK_S.get(c, 1500.0) / c
        reqs = []  # (sent, end) of 2C requests, C at a time
        for j in range(2 * c):
            wave = j // c
            sent = lt + wave * (end_t - lt) / 2 + rng.uniform(0, 0.02)
            reqs.append((sent, min(end_t, sent + rng.uniform(0.3, 0.5) * (end_t - lt))))
        slow = rng.randrange(len(reqs))
        items: list[tuple[float, int, int]] = [(s, 0, i) for i, (s, _) in enumerate(reqs)]
        items += [(e, 1, i) for i, (_, e) in enumerate(reqs)]
        tk = lt + 0.25
        while tk < end_t:
            items.append((tk, 2, 0))
            if round((tk - lt) / 0.25) % 4 == 0:
                items.append((tk, 3, 0))
            tk += 0.25
        items.sort()
        done = 0
        for t, what, i in items:
            rid = f"{sid}-c{c}-r{i:04d}"
            if what == 0:
                yield RequestStarted(t=t, host=HOST, sweep_id=sid, request_id=rid, concurrency=c)
            elif what == 1:
                sent, end = reqs[i]
                done += 1
                first = rng.uniform(0.05, 0.2)
                per = (end - sent - first) / MAX_TOKENS
                offs = [round((first + d * per) * 1000, 1) for d in range(MAX_TOKENS)]
                yield RequestResult(
                    t=end, host=HOST, sweep_id=sid, request_id=rid, concurrency=c, ok=True, status=200,
                    intended_send=sent, sent=sent, ttfb_s=first - 0.004, ttft_s=first, e2e_s=end - sent,
                    prompt_tokens=40, completion_tokens=MAX_TOKENS, tokens_from_usage=True, chunks=MAX_TOKENS,
                    decode_tok_s=1 / per, e2e_tok_s=MAX_TOKENS / (end - sent), tpot_s=per, itl_p50_s=per,
                    itl_p99_s=1.2 * per, max_gap_s=3 * per, max_gap_at=sent + first, chunk_offsets_ms=offs,
                    finish_reason="length")
            elif what == 2:
                rows = [(f"{sid}-c{c}-r{j:04d}", t - s, min(MAX_TOKENS, int((t - s) * rate)), rate)
                        for j, (s, e) in enumerate(reqs) if s <= t < e]
                listed, cloud = compact_in_flight(rows)
                yield SweepProgress(t=t, host=HOST, sweep_id=sid, concurrency=c, done=done, in_flight=listed,
                                    cloud=cloud, running=len(rows), level_tokens=done * MAX_TOKENS,
                                    level_elapsed_s=round(t - lt, 3))
            else:
                yield ClientHealth(t=t, host=HOST, sweep_id=sid, dispatch_delay_p99_ms=0.2, loop_lag_ms=1.0,
                                   cpu_pct=30.0)
        agg = AGG_TOK_S.get(c, 1500.0)
        p = Percentiles(p50=rate, p90=rate * 1.05, p99=rate * 1.1, mean=rate)
        s_sent, s_end = reqs[slow]
        yield LevelResult(t=end_t + 0.001, host=HOST, sweep_id=sid, concurrency=c, requests=2 * c, ok=2 * c,
                          wall_s=end_t - lt, output_tokens=2 * c * MAX_TOKENS, agg_tok_s=agg, steady_tok_s=agg * 1.02,
                          ttft=p, tpot=p, itl=p, decode_tok_s=p, e2e_tok_s=p,
                          stragglers=[Straggler(request_id=f"{sid}-c{c}-r{slow:04d}", concurrency=c,
                                                decode_tok_s=rate / 3, median_decode_tok_s=rate, max_gap_s=0.1,
                                                gap_start=s_sent + 0.1, gap_end=s_sent + 0.2,
                                                reason="stall gap 0.1 s")])
    yield SweepResult(t=t0 + sweep_s, host=HOST, sweep_id=sid, levels=levels, peak_tok_s=max(AGG_TOK_S.values()))


def sweeps(rng: random.Random, t0: float, levels: list[int], sweep_s: float) -> Iterator[Event]:
    """Back-to-back sweeps, forever: the next one 0.5 s after the last one's result."""
    n = 0
    while True:
        yield from sweep_events(n, rng, t0 + n * (sweep_s + 0.5), levels, sweep_s)
        n += 1


def soak_events(t0: float, gpu_hz: float, log_rate: float, levels: list[int], sweep_s: float,
                seed: int = 30) -> Iterator[Event]:
    return heapq.merge(telemetry(random.Random(seed), t0, gpu_hz, log_rate),
                       sweeps(random.Random(seed + 1), t0 + 5.0, levels, sweep_s), key=lambda e: e.t)


# --------------------------------------------------------------------------- the controller and the run
class SoakController(FakeController):
    """Publishes the soak's events as their time comes (event time = ``speed`` x the wall clock)."""

    def __init__(self, events: Iterator[Event], t0: float, speed: float) -> None:
        super().__init__(initial=[caps(t0)])
        self.events = events
        self.t0 = t0
        self.speed = speed
        self.published = 0
        self._pending: Event | None = None
        self._sweeping = False

    @property
    def busy(self) -> str | None:
        """``sweep`` while one runs, as the live controller says: the app re-checks its keys at each change."""
        return "sweep" if self._sweeping else None

    async def start(self) -> None:
        await super().start()
        asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        start = time.monotonic()
        while True:
            await asyncio.sleep(TICK)
            now = self.t0 + (time.monotonic() - start) * self.speed
            batch: list[Event] = []
            if self._pending is not None:
                if self._pending.t > now:
                    continue
                batch.append(self._pending)
                self._pending = None
            for ev in self.events:
                if ev.t > now:
                    self._pending = ev
                    break
                batch.append(ev)
            self.session.publish_many(batch)
            self.published += len(batch)
            for ev in batch:
                if isinstance(ev, (SweepStarted, SweepResult)):
                    self._sweeping = isinstance(ev, SweepStarted)


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minute, MB) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


async def soak(args: argparse.Namespace) -> tuple[list[tuple[float, float, float]], list[tuple[float, float]]]:
    levels = [int(x) for x in args.levels.split(",")]
    t0 = time.time()
    ctrl = SoakController(soak_events(t0, args.gpu_hz, args.log_rate, levels, args.sweep_s), t0, args.speed)
    app = KimituiApp(ctrl)
    samples: list[tuple[float, float, float]] = []  # (minute, RSS MB, traced MB)
    blocks: list[tuple[float, float]] = []  # (minute, live objects in thousands): growth that is not fragmentation
    warm_snap: tracemalloc.Snapshot | None = None
    async with app.run_test(size=(160, 50)):
        start = time.monotonic()
        print(f"{'min':>6} {'RSS MB':>8} {'heap MB':>8} {'kblocks':>8} {'events':>10} {'dropped':>8} {'sweeps':>6} "
              f"{'load':>5}", flush=True)
        while True:
            elapsed = (time.monotonic() - start) / 60
            heap = tracemalloc.get_traced_memory()[0] / 1e6 if args.tracemalloc else float("nan")
            samples.append((elapsed, rss_mb(), heap))
            blocks.append((elapsed, sys.getallocatedblocks() / 1e3))
            sw = app.model.sweep
            print(f"{elapsed:6.1f} {samples[-1][1]:8.1f} {heap:8.1f} {blocks[-1][1]:8.0f} {ctrl.published:10d} "
                  f"{app.model.dropped:8d} "
                  f"{int(sw.sweep_id.split('-')[-1]) + 1 if sw else 0:6d} {os.getloadavg()[0]:5.2f}", flush=True)
            if args.tracemalloc and warm_snap is None and elapsed >= args.warmup_min:
                warm_snap = tracemalloc.take_snapshot()
            elif args.tracemalloc and warm_snap is not None:
                top = tracemalloc.take_snapshot().compare_to(warm_snap, "lineno")[:args.top]
                for st in top:
                    print(f"         {st.size_diff / 1e6:+7.2f} MB {st.count_diff:+8d}  {st.traceback}", flush=True)
            if elapsed >= args.minutes:
                break
            await asyncio.sleep(max(1.0, args.sample_s - (time.monotonic() - start) % args.sample_s))
        await ctrl.shutdown()
    return samples, blocks


def verdict(samples: list[tuple[float, float, float]], blocks: list[tuple[float, float]], warmup_min: float,
            args: argparse.Namespace) -> bool:
    after = [(m, rss) for m, rss, _ in samples if m >= warmup_min - 1e-6]
    if len(after) < 2:
        print(f"too short: no samples after the {warmup_min:.0f}-minute warm-up")
        return False
    base = after[0][1]
    peak = max(r for _, r in after)
    slope = slope_per_min(after)
    # the trend now: the slope of the later half, projected from the last sample to 4 hours (a store that
    # fills more slowly than the warm-up, then stops, is bounded; one that still grows at the end is not)
    late = [(m, r) for m, r in after if m >= (after[0][0] + after[-1][0]) / 2]
    late_slope = slope_per_min(late)
    four_h = after[-1][1] - base + max(late_slope, 0.0) * max(240 - after[-1][0], 0.0)
    grew = 100 * (after[-1][1] - base) / base
    peak_pct = 100 * (peak - base) / base
    proj_pct = 100 * four_h / base
    objects = [(m, b) for m, b in blocks if m >= warmup_min - 1e-6]
    obj_slope = slope_per_min(objects)
    obj_proj = 100 * max(obj_slope, 0.0) * (240 - warmup_min) / objects[0][1]
    # RSS never gives back what the allocator took in a burst (a loaded machine's backlog); the live objects
    # are what a leak grows: judged on both, every RSS sample and the objects' 4-hour projection
    ok = peak_pct <= GOAL_PCT and obj_proj <= GOAL_PCT
    load = os.getloadavg()
    print(f"\ncockpit soak: {samples[-1][0]:.0f} min, 8 GPUs @ {args.gpu_hz:g} Hz, {args.log_rate:g} Decode lines/s "
          f"(+ their ServerStats), back-to-back sweeps {args.levels} of {args.sweep_s:g} s, speed {args.speed:g}x")
    print(f"  RSS: start {samples[0][1]:.1f} MB, after the {warmup_min:.0f}-min warm-up {base:.1f} MB, "
          f"end {after[-1][1]:.1f} MB ({grew:+.1f} %), peak after warm-up {peak:.1f} MB ({peak_pct:+.1f} %)")
    print(f"  slope after warm-up: {slope:+.3f} MB/min ({60 * slope:+.1f} MB/h); in the later half "
          f"{late_slope:+.3f} MB/min; projected to 4 h from the end at that rate: {four_h:+.1f} MB ({proj_pct:+.1f} %)")
    print(f"  live objects after warm-up: {objects[0][1]:.0f}k -> {objects[-1][1]:.0f}k blocks "
          f"({100 * (objects[-1][1] - objects[0][1]) / objects[0][1]:+.1f} %), slope {obj_slope:+.2f}k/min, "
          f"projected to 4 h {obj_proj:+.1f} %")
    if args.tracemalloc:
        heap = [(m, h) for m, _, h in samples if m >= warmup_min - 1e-6]
        print(f"  traced heap after warm-up: {heap[0][1]:.1f} -> {heap[-1][1]:.1f} MB, "
              f"slope {slope_per_min(heap):+.3f} MB/min")
    print(f"  goal: every RSS sample within +{GOAL_PCT:.0f} % of the post-warm-up RSS, and the live objects "
          f"projected to 4 h within +{GOAL_PCT:.0f} % (the RSS projection above is for information: it carries on "
          f"the allocator's high water from bursts of load) -> {'PASS' if ok else 'FAIL'}")
    print(f"  load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--warmup-min", type=float, default=None,
                        help="minutes before the figure is judged (default: 20, or a third of a shorter run)")
    parser.add_argument("--sample-s", type=float, default=60.0)
    parser.add_argument("--gpu-hz", type=float, default=8.0)
    parser.add_argument("--log-rate", type=float, default=400.0, help="Decode lines per second")
    parser.add_argument("--levels", default="1,8,32,64,128,256")
    parser.add_argument("--sweep-s", type=float, default=12.0, help="seconds per sweep (back to back)")
    parser.add_argument("--speed", type=float, default=1.0, help="event time per wall second (a probe)")
    parser.add_argument("--tracemalloc", action="store_true", help="trace the heap; print the top growth")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    if args.warmup_min is None:
        args.warmup_min = min(20.0, args.minutes / 3)
    if args.tracemalloc:
        tracemalloc.start(1)
    samples, blocks = asyncio.run(soak(args))
    sys.exit(0 if verdict(samples, blocks, args.warmup_min, args) else 1)


if __name__ == "__main__":
    main()
