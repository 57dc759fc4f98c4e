"""Does the live cockpit stay flat over hours, and is a progress snapshot the same size at any C?

1. Memory (issue 16's goal: the cockpit's RSS over a 4-hour session with sweeps every 15
   minutes stays within +10 % of its size after the first sweep).  A dedicated subprocess
   runs the real ``Session``, ``RecordingWriter`` (gzip, flushed every 0.5 s of session time) and
   ``CockpitModel`` and feeds them a synthetic session as fast as it can: 8 GPUs at 4 Hz,
   processes every 2 s, /metrics at 1 Hz, SGLang decode lines (4/s while busy, with their
   log-derived ServerStats), and every 15 minutes the cockpit's default sweep (sustained,
   C = 1 ... 256, 2C requests of 512 chunks at the seeds' rates, progress at 4 Hz in the load
   process's compact form, client health at 1 Hz, a straggler per level).  Events are made
   lazily in time order (a heap merge of the streams), so the generator holds almost nothing.
   RSS (``/proc/self/statm``) is printed at start, after the first sweep, at the end and its
   peak after the first sweep, with PASS/FAIL against +10 %.  ``--model-rev REV`` runs the
   CockpitModel of a git revision instead (the before figure: ``--model-rev 4f2ce93^``).

2. Progress snapshot bytes (a recording line), the load process's CPU to build and write one
   (per in-flight request) and the cockpit's to parse, fold and place it in the spread, at
   C = 64, 256, 1024, 2048, now and as before issue 16 (every in-flight request listed).

Run:  .venv/bin/python bench/bench_cockpit_memory.py [--hours 4] [--model-rev REV] [--snapshots-only]
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import random
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kimitui.loadgen.sweep import compact_in_flight  # noqa: E402
from kimitui.events import (  # noqa: E402
    ClientHealth,
    Event,
    GpuProcess,
    GpuProcs,
    InFlight,
    LevelResult,
    LevelStarted,
    Percentiles,
    RequestResult,
    RequestStarted,
    ServerStats,
    Straggler,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.recording.writer import dump_line  # noqa: E402

if TYPE_CHECKING:  # the model class is loaded per revision at run time (``model_class``)
    from kimitui.tui.model.cockpit_state import CockpitModel

sys.path.insert(0, str(ROOT / "bench"))
from benchutil import module_at_revision, rss_mb  # type: ignore[import-not-found]  # noqa: E402  # bench/ is on sys.path (above)
from bench_recording import LEVELS, MAX_TOKENS, SEED_AGG_TOK_S, decode_line, gpu_sample  # type: ignore[import-not-found]  # noqa: E402  # bench/ is on sys.path (above), not a package mypy sees

SWEEP_EVERY_S = 900.0
T0 = 1_772_618_400.0


# --------------------------------------------------------------------------- the synthetic session
def plan_sweep(rng: random.Random, sweep_t0: float) -> list[tuple[int, float, float, list[tuple[float, float, float]]]]:
    """Per level: (C, start, end, [(sent, end, rate)...]) of a sustained 2C-request level."""
    levels = []
    lt = sweep_t0
    for c in LEVELS:
        per = SEED_AGG_TOK_S[c] / c
        slots = [lt + rng.uniform(0, 0.02) for _ in range(c)]
        reqs = []
        for j in range(2 * c):
            k = j % c
            rate = per * rng.uniform(0.85, 1.15)
            sent = slots[k]
            end = sent + rng.uniform(0.15, 0.4) * (1 + c / 64) + MAX_TOKENS / rate
            reqs.append((sent, end, rate))
            slots[k] = end + rng.uniform(0.0001, 0.0005)
        level_end = max(slots)
        levels.append((c, lt, level_end, reqs))
        lt = level_end + 0.5
    return levels


def sweep_events(n: int, rng: random.Random, plan, templates: list[list[int]]) -> Iterator[Event]:
    """One sweep's events in time order, each built only when it is its turn."""
    sid = f"sw-{n:04d}"
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=LEVELS, max_tokens=MAX_TOKENS)
    yield SweepStarted(t=plan[0][1], sweep_id=sid, spec=spec, profile=("ep8-tuned", "ep8-eplb")[n % 2])
    for c, lt, level_end, reqs in plan:
        yield LevelStarted(t=lt, sweep_id=sid, concurrency=c)
        slow = rng.randrange(len(reqs))
        items: list[tuple[float, int, int]] = []  # (t, what, index): 0 started, 1 result, 2 progress, 3 health
        for i, (sent, end, _) in enumerate(reqs):
            items.append((sent, 0, i))
            items.append((end, 1, i))
        t, k = lt + 0.25, 0
        while t < level_end:
            items.append((t, 2, k))
            if k % 4 == 0:
                items.append((t, 3, k))
            t += 0.25
            k += 1
        items.sort()
        done = 0
        for t, what, i in items:
            if what == 0:
                yield RequestStarted(t=t, sweep_id=sid, request_id=f"{sid}-c{c}-r{i:04d}", concurrency=c)
            elif what == 1:
                sent, end, rate = reqs[i]
                done += 1
                tpl = templates[i % len(templates)]
                scale = 1.0 / rate
                first = int(rng.uniform(1500, 4000) * (1 + c / 64))
                offs = [(first + d * scale) / 10.0 for d in tpl]  # 0.1 ms steps of the template, per this rate
                yield RequestResult(
                    t=end, sweep_id=sid, request_id=f"{sid}-c{c}-r{i:04d}", concurrency=c, ok=True, status=200,
                    intended_send=sent - 4e-5, sent=sent, ttfb_s=first / 1e4 - 0.004, ttft_s=first / 1e4,
                    e2e_s=end - sent, prompt_tokens=40, completion_tokens=MAX_TOKENS, tokens_from_usage=True,
                    chunks=MAX_TOKENS, decode_tok_s=rate, e2e_tok_s=MAX_TOKENS / (end - sent), tpot_s=1 / rate,
                    itl_p50_s=1 / rate, itl_p99_s=1.2 / rate, max_gap_s=3 / rate, max_gap_at=sent + 1.0,
                    chunk_offsets_ms=offs, finish_reason="length")
            elif what == 2:
                rows = [(f"{sid}-c{c}-r{j:04d}", t - s, min(MAX_TOKENS, int((t - s) * r)), r)
                        for j, (s, e, r) in enumerate(reqs) if s <= t < e]
                listed, cloud = compact_in_flight(rows)
                yield SweepProgress(t=t, sweep_id=sid, concurrency=c, done=done, in_flight=listed, cloud=cloud,
                                    running=len(rows), level_tokens=done * MAX_TOKENS, level_elapsed_s=round(t - lt, 3))
            else:
                yield ClientHealth(t=t, sweep_id=sid, dispatch_delay_p99_ms=0.2, loop_lag_ms=1.0, cpu_pct=30.0)
        per = SEED_AGG_TOK_S[c] / c
        p = Percentiles(p50=per, p90=per * 1.05, p99=per * 1.1, mean=per)
        s_sent = reqs[slow][0]
        yield LevelResult(t=level_end + 0.001, sweep_id=sid, concurrency=c, requests=2 * c, ok=2 * c,
                          wall_s=level_end - lt, output_tokens=2 * c * MAX_TOKENS, agg_tok_s=SEED_AGG_TOK_S[c],
                          steady_tok_s=SEED_AGG_TOK_S[c] * 1.02, ttft=p, tpot=p, itl=p, decode_tok_s=p, e2e_tok_s=p,
                          stragglers=[Straggler(request_id=f"{sid}-c{c}-r{slow:04d}", concurrency=c, decode_tok_s=per / 3,
                                                median_decode_tok_s=per, max_gap_s=9.0, gap_start=s_sent + 2,
                                                gap_end=s_sent + 11, reason="stall gap 9.0 s")])
    yield SweepResult(t=plan[-1][2] + 0.5, sweep_id=sid, levels=LEVELS, peak_tok_s=1538.0)


def telemetry(rng: random.Random, span: float, busy: list[tuple[float, float, int]]) -> Iterator[Event]:
    procs = [GpuProcess(gpu_index=i, pid=4242 + i, name="sglang::scheduler", used_mib=87_000.0) for i in range(8)]
    b = 0
    for i in range(int(span * 4)):
        t = T0 + i * 0.25
        while b < len(busy) and busy[b][1] < t:
            b += 1
        level = busy[b][2] if b < len(busy) and busy[b][0] <= t else 0
        yield gpu_sample(rng, t, i, level > 0)
        if i % 8 == 0:
            yield GpuProcs(t=t, procs=procs)
        if i % 4 == 0:
            yield ServerStats(t=t, source="metrics", running_reqs=float(level), queued_reqs=0.0,
                              token_usage=round(rng.random(), 4), gen_throughput=round(rng.uniform(0, 1600), 2))
        if level or i % 40 == 0:
            line = decode_line(rng, t, level)
            yield line
            yield ServerStats(t=t, source="log", running_reqs=float(level), queued_reqs=0.0,
                              token_usage=line.fields["token_usage"], gen_throughput=line.fields["gen_throughput"],
                              cuda_graph=True, num_tokens=float(line.fields["token"]))


def session_events(hours: float, seed: int = 16) -> Iterator[Event]:
    rng = random.Random(seed)
    span = hours * 3600
    templates = []
    for _ in range(16):  # chunk schedules in 0.1 ms steps at 1 tok/s, scaled per request
        acc, tpl = 0, []
        for _ in range(MAX_TOKENS):
            tpl.append(acc)
            acc += int(1e4 * rng.gauss(1.0, 0.03) * (6 if rng.random() < 0.002 else 1))
        templates.append(tpl)
    plans = [plan_sweep(rng, T0 + 30 + n * SWEEP_EVERY_S) for n in range(int(span // SWEEP_EVERY_S))]
    busy = [(lt, le, c) for plan in plans for c, lt, le, _ in plan]
    streams = [telemetry(random.Random(seed + 1), span, busy)]
    streams += [sweep_events(n, random.Random(seed + 2 + n), plan, templates) for n, plan in enumerate(plans)]
    for ev in heapq.merge(*streams, key=lambda e: e.t):
        if ev.t > T0 + span:
            return
        yield ev


# --------------------------------------------------------------------------- the child: real components
def load_model_class(rev: str | None):
    if rev is None:
        from kimitui.tui.model.cockpit_state import CockpitModel
        return CockpitModel
    return module_at_revision(rev, "kimitui/tui/model/cockpit_state.py", "model_rev").CockpitModel


def kept_for_compare(model: CockpitModel) -> dict[str, int]:
    """Counted without building the compare view's list (that would be new memory at the end)."""
    if hasattr(model, "_compare_events"):
        return {"sweep_events": len(model._compare_events),
                "request_results": sum(len(v) for v in model._requests.values())}
    events = model.sweep_events
    n = sum(1 for e in events if isinstance(e, RequestResult))
    return {"sweep_events": len(events) - n, "request_results": n}


def child(hours: float, rev: str | None) -> None:
    from kimitui.recording import RecordingWriter
    from kimitui.session import Session

    model_cls = load_model_class(rev)
    out: dict[str, object] = {"start_mb": rss_mb()}
    with tempfile.TemporaryDirectory() as tmp:
        session = Session("ct200")
        # flushed every 0.5 s of session time, as its flusher thread does in real time: fed faster than
        # real time, a started flusher would fall behind and its backlog would be the bench's, not the cockpit's
        writer = RecordingWriter(Path(tmp) / "session.jsonl.gz", hosts=["ct200"], flush_interval=1e9,
                                 max_buffer=1 << 30)
        session.add_sink(writer)
        sub = session.subscribe("ui", maxsize=200_000)
        model = model_cls(host="ct200")
        first: float | None = None
        peak = 0.0
        curve = []
        n = 0
        wall = time.perf_counter()
        next_drain = next_flush = T0
        for ev in session_events(hours):
            session.publish(ev)
            n += 1
            if ev.t >= next_drain:  # the app drains its subscription a few times a second
                model.apply(sub.drain())
                if ev.t >= next_flush:
                    writer.flush()
                    next_flush = ev.t + 0.5
                model.log_pending.clear()  # what the log panel does when it draws
                next_drain = ev.t + 0.25
            if isinstance(ev, SweepResult):
                model.apply(sub.drain())
                now = rss_mb()
                curve.append((round((ev.t - T0) / 3600, 2), round(now, 1)))
                if first is None:
                    first = now
                peak = max(peak, now)
            elif first is not None and n % 20_000 == 0:
                peak = max(peak, rss_mb())
        model.apply(sub.drain())
        writer.close()
        end = rss_mb()
        out.update(first_sweep_mb=first, end_mb=end, peak_mb=max(peak, end), events=n,
                   wall_s=time.perf_counter() - wall, curve=curve, file_mb=writer.path.stat().st_size / 1e6,
                   **kept_for_compare(model))
        gc.collect()
        out["end_after_gc_mb"] = rss_mb()
        with open("/proc/self/status") as f:
            out["hwm_mb"] = next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) * 1024 / 1e6
    print(json.dumps(out))


def print_memory(hours: float, rev: str | None) -> bool:
    cmd = [sys.executable, __file__, "--child", "--hours", str(hours)] + (["--model-rev", rev] if rev else [])
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(f"the child failed ({proc.returncode})")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    base = r["first_sweep_mb"]
    if base is None:
        raise SystemExit(f"no sweep finished in {hours:g} h (one every {SWEEP_EVERY_S / 3600:g} h): "
                         "pass --hours of at least 0.3")
    limit = base * 1.10
    ok = r["end_mb"] <= limit and r["peak_mb"] <= limit
    load = os.getloadavg()[0]
    which = f"CockpitModel of {rev}" if rev else "CockpitModel (this checkout)"
    print(f"cockpit memory over {hours:g} h, a sweep every {SWEEP_EVERY_S / 60:g} min ({which}, real Session and "
          f"RecordingWriter): {r['events']} events in {r['wall_s']:.0f} s ({time.perf_counter() - t:.0f} s with start), "
          f"load average {load:.2f}")
    print(f"  RSS start {r['start_mb']:.1f} MB, after the first sweep {base:.1f} MB, end {r['end_mb']:.1f} MB, "
          f"peak after the first sweep {r['peak_mb']:.1f} MB (end after gc {r['end_after_gc_mb']:.1f} MB, "
          f"VmHWM {r['hwm_mb']:.1f} MB)")
    print("  after each sweep (h, MB): " + ", ".join(f"{h:g}:{mb:.0f}" for h, mb in r["curve"]))
    print(f"  kept for the compare view: {r['sweep_events']} events + {r['request_results']} request results; "
          f"recording {r['file_mb']:.1f} MB ({r['file_mb'] / hours:.2f} MB/h: a sweep every 15 min, busier than "
          "bench_recording's first use)")
    print(f"  goal end and peak <= +10 % of after-first-sweep ({limit:.1f} MB): {'PASS' if ok else 'FAIL'} "
          f"(end {100 * (r['end_mb'] / base - 1):+.1f} %, peak {100 * (r['peak_mb'] / base - 1):+.1f} %)")
    return ok


# --------------------------------------------------------------------------- progress snapshots
def snapshot_rows(c: int, rng: random.Random) -> list[tuple[str, float, int, float | None]]:
    rows: list[tuple[str, float, int, float | None]] = []
    for i in range(c):
        el = rng.uniform(0.05, 90.0)
        rate = rng.gauss(6.0, 0.6) if el > 0.4 else None
        rows.append((f"sw-20260304-101500-7f3a1c-c{c}-r{i:05d}", el, int(el * (rate or 0)), rate))
    return rows


def spread_us(c: int, line: str, reps: int) -> float:
    """The cockpit's side of one snapshot: parse it, fold it, compute the spread's points."""
    from kimitui.events import LevelStarted, parse_event
    from kimitui.tui.model.cockpit_state import CockpitModel
    from kimitui.tui.model.spread_data import spread_points

    model = CockpitModel()
    spec = SweepSpec(url="http://x", model="m", levels=[c])
    model.apply([SweepStarted(sweep_id="sw", spec=spec), LevelStarted(sweep_id="sw", concurrency=c)])
    t = time.perf_counter()
    for _ in range(reps):
        model.apply([parse_event(line)])
        spread_points(model.sweep)
    return (time.perf_counter() - t) / reps * 1e6


def print_snapshots() -> None:
    rng = random.Random(7)
    print("progress snapshot (one recording line) by concurrency: now (16 listed + cloud) vs before (every request)")
    print(f"  {'C':>5} {'bytes now':>10} {'listed':>6} {'cells':>5} {'us/snapshot':>11} {'us/request':>10} "
          f"{'bytes before':>12} {'us/request before':>17} {'spread us':>11} {'spread before':>14}")
    first = None
    for c in (64, 256, 1024, 2048):
        rows = snapshot_rows(c, rng)
        reps = max(3, 2000 // c)
        t = time.perf_counter()
        for _ in range(reps):
            listed, cloud = compact_in_flight(rows)
            now = dump_line(SweepProgress(sweep_id="sw", concurrency=c, done=100, in_flight=listed, cloud=cloud,
                                          running=len(rows), level_tokens=1, level_elapsed_s=1.0))
        us_now = (time.perf_counter() - t) / reps * 1e6
        t = time.perf_counter()
        for _ in range(reps):
            full = [InFlight(request_id=rid, elapsed_s=round(el, 3), tokens=n, tok_s=round(r, 2) if r else None)
                    for rid, el, n, r in rows]
            before = dump_line(SweepProgress(sweep_id="sw", concurrency=c, done=100, in_flight=full,
                                             level_tokens=1, level_elapsed_s=1.0))
        us_before = (time.perf_counter() - t) / reps * 1e6
        draw_now = spread_us(c, dump_line(SweepProgress(sweep_id="sw", concurrency=c, in_flight=listed, cloud=cloud,
                                                        running=len(rows))), reps)
        draw_before = spread_us(c, before, reps)
        if first is None:
            first = (len(now), us_now, len(before))
        print(f"  {c:>5} {len(now):>10} {len(listed):>6} {len(cloud):>5} {us_now:>11.0f} {us_now / c:>10.2f} "
              f"{len(before):>12} {us_before / c:>17.2f} {draw_now:>11.0f} {draw_before:>14.0f}")
    assert first is not None
    print(f"  growth 64 -> 2048 (32x the requests): now {len(now) / first[0]:.2f}x bytes, CPU per in-flight request "
          f"{(us_now / 2048) / (first[1] / 64):.2f}x; before {len(before) / first[2]:.1f}x bytes  "
          f"(load average {os.getloadavg()[0]:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--model-rev", default=None, help="run the CockpitModel of this git revision (before figure)")
    ap.add_argument("--snapshots-only", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.hours, args.model_rev)
        return
    print_snapshots()
    if not args.snapshots_only:
        ok = print_memory(args.hours, args.model_rev)
        raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
