"""How big is an hour of a session, and how fast do we open and seek it?

First, bytes per hour of a realistic session: a first use of the cockpit (18 minutes: the
swap to ep8-tuned, then the cockpit's default sweep, sustained, C = 1 ... 256, 2C requests of
512 tokens per level at the seeds' rates: 65 tok/s at C=1, 1538 tok/s aggregate at C=256), with
8 GPUs at the agent's rates (4 Hz samples, processes every 2 s), SGLang's log (a decode line per
40 decode steps per DP rank, each also a log-derived ServerStats), /metrics at 1 Hz, client
health at 1 Hz and sweep progress at 4 Hz carrying every in-flight request.  A request's
chunks come one per forward pass of its batch (the simulator's model: a step time with 3 %
jitter, plus network and read jitter of 0.3 ms on average, and a rare 6x stall).  It is written
through a Session into the RecordingWriter as the cockpit does (a flush every 0.5 s of session
time) and printed as MB per hour: format 1 (float chunk offsets, every progress, gzipped on
close) against format 2 (what the writer writes now), plain and compressed, against the goal
of 10 MB per hour (issue 16); progress is what the load process sends now (16 requests listed,
the rest binned), and once more as it was (every in-flight request) for the before figure.

Then one hour of synthetic but realistically shaped events (8 GPUs at 4 Hz,
server log lines, /metrics stats at 1 Hz, and a sweep of levels up to 256
streams with per-request chunk offsets and 4 Hz progress snapshots), records
them through a Session into a RecordingWriter, then measures:

* the sink cost per event (what ``publish`` pays for recording),
* the file size (gzip, written while recording) — goal <= 20 MB per hour,
* the time to close (which writes the replay index), to open the index, to seek (middle, end)
  and to jump to a straggler — goal <= 1 s for open + seek,
* the time for a full ``read_recording`` (every event validated), for reference.

Each goal's figure is printed PASS/FAIL (with the load average); exit 1 on FAIL.

Run:  .venv/bin/python bench/bench_recording.py [--minutes 60] [--first-use-minutes 18] [--size-only]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import gzip
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kimitui.events import (  # noqa: E402
    ClientHealth,
    Event,
    GpuProcess,
    GpuProcs,
    ProfileState,
    ProfileSwitch,
    RequestStarted,
    SwapProgress,
    GpuReading,
    GpuSample,
    InFlight,
    LevelResult,
    LevelStarted,
    LogLine,
    Percentiles,
    RequestResult,
    ServerStats,
    Straggler,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.loadgen.sweep import compact_in_flight  # noqa: E402
from kimitui.events import dump_event  # noqa: E402
from kimitui.recording import RecordingIndex, RecordingWriter, read_recording  # noqa: E402
from kimitui.replay import Replayer  # noqa: E402
from kimitui.report import compare, summarize  # noqa: E402
from kimitui.session import Session  # noqa: E402

from benchutil import exit_on, verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

LEVELS = [1, 8, 32, 64, 96, 128, 192, 256]
MAX_TOKENS = 512


def gpu_sample(rng: random.Random, t: float, seq: int, busy: bool) -> GpuSample:
    gpus = []
    for i in range(8):
        util = float(rng.randint(85, 100) if busy else rng.randint(0, 3))
        gpus.append(GpuReading(
            index=i, uuid=f"GPU-5f3c2a{i:02d}-1d2e-4f5a-9b8c-7d6e5f4a3b{i:02d}", util_pct=util,
            mem_util_pct=float(rng.randint(20, 60)), mem_used_mib=float(87_000 + rng.randint(0, 400)),
            mem_total_mib=97_887.0, power_w=round(rng.uniform(380, 600) if busy else rng.uniform(60, 90), 3),
            power_limit_w=600.0, temp_c=float(rng.randint(55, 78)), sm_clock_mhz=float(rng.choice([2280, 2310, 2340])),
            mem_clock_mhz=14_001.0, pcie_tx_kbps=float(rng.randint(1_000, 900_000)),
            pcie_rx_kbps=float(rng.randint(1_000, 900_000)), throttle_reasons=[] if rng.random() > 0.05 else ["sw_power_cap"],
            pstate=0))
    return GpuSample(t=t, seq=seq, host_t=t - 0.002, gpus=gpus)


def decode_line(rng: random.Random, t: float, running: int) -> LogLine:
    thr = round(rng.uniform(50, 1600), 2)
    tok = rng.randint(1000, 200_000)
    usage = round(tok / 900_000, 2)
    raw = (f"[2026-03-04 10:{int(t) // 60 % 60:02d}:{int(t) % 60:02d} DP0 TP0 EP0] Decode batch, #running-req: {running}, "
           f"#token: {tok}, token usage: {usage}, cuda graph: True, gen throughput (token/s): {thr}, #queue-req: 0, ")
    return LogLine(t=t, raw=raw, line_kind="decode", source="sglang.service", cursor=f"s=abc;i={int(t * 1000):x}",
                   fields={"running_req": running, "token": tok, "token_usage": usage, "cuda_graph": True,
                           "gen_throughput": thr, "queue_req": 0})


def build_hour(minutes: float, seed: int = 1) -> list[Event]:
    """Telemetry for the whole span, a sweep of 8 levels through the middle part."""
    rng = random.Random(seed)
    t0 = 1_772_618_400.0
    span = minutes * 60
    sweep_t0 = t0 + span * 0.2
    level_s = min(90.0, span * 0.6 / len(LEVELS))
    sweep_end = sweep_t0 + level_s * len(LEVELS)
    events: list[Event] = []
    # telemetry
    for i in range(int(span * 4)):
        t = t0 + i * 0.25
        busy = sweep_t0 <= t <= sweep_end
        events.append(gpu_sample(rng, t, i, busy))
        if i % 4 == 0:
            events.append(ServerStats(t=t, running_reqs=float(rng.randint(0, 256)) if busy else 0.0, queued_reqs=0.0,
                                      token_usage=round(rng.random(), 4), gen_throughput=round(rng.uniform(0, 1600), 2)))
        if busy or i % 40 == 0:  # SGLang logs a decode line every ~40 decode steps when busy
            events.append(decode_line(rng, t, rng.randint(0, 256) if busy else 0))
    # the sweep
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=LEVELS, max_tokens=MAX_TOKENS,
                     duration_s=level_s)
    events.append(SweepStarted(t=sweep_t0, sweep_id="sw1", spec=spec, profile="ep8-tuned"))
    req = 0
    for li, c in enumerate(LEVELS):
        lt0 = sweep_t0 + li * level_s
        events.append(LevelStarted(t=lt0, sweep_id="sw1", concurrency=c))
        per = 65.0 / (1 + c / 40)
        e2e = MAX_TOKENS / per
        n_req = max(c, int(c * level_s / e2e))
        for k in range(int(level_s * 4)):  # 4 Hz progress snapshot with every in-flight request
            t = lt0 + k * 0.25
            fl = [InFlight(request_id=f"sw1-{c}-{j}", elapsed_s=round(rng.uniform(0, e2e), 3),
                           tokens=rng.randint(0, MAX_TOKENS), tok_s=round(rng.uniform(per * 0.8, per * 1.2), 2))
                  for j in range(c)]
            events.append(SweepProgress(t=t, sweep_id="sw1", concurrency=c, done=k, in_flight=fl,
                                        level_tokens=k * c * 10, level_elapsed_s=round(k * 0.25, 3)))
        stragglers = []
        for j in range(n_req):
            req += 1
            sent = lt0 + rng.uniform(0, level_s - e2e if level_s > e2e else 0)
            rate = per * rng.uniform(0.9, 1.1)
            offs, acc = [], rng.uniform(150, 400)
            for _ in range(MAX_TOKENS):
                offs.append(round(acc, 3))
                acc += rng.expovariate(rate / 1000)
            end = sent + offs[-1] / 1000
            events.append(RequestResult(
                t=end, sweep_id="sw1", request_id=f"sw1-{c}-{j}", concurrency=c, ok=True, status=200,
                intended_send=sent, sent=sent + 0.0004, ttfb_s=round(offs[0] / 1000 - 0.01, 6), ttft_s=round(offs[0] / 1000, 6),
                e2e_s=round(offs[-1] / 1000, 6), prompt_tokens=rng.randint(20, 60), completion_tokens=MAX_TOKENS,
                tokens_from_usage=True, chunks=MAX_TOKENS, decode_tok_s=round(rate, 3), e2e_tok_s=round(rate * 0.95, 3),
                tpot_s=round(1 / rate, 6), itl_p50_s=round(1 / rate, 6), itl_p99_s=round(3 / rate, 6),
                max_gap_s=round(5 / rate, 6), max_gap_at=sent + 1.0, chunk_offsets_ms=offs))
            if j == 0 and c == 1:
                stragglers.append(Straggler(request_id=f"sw1-{c}-{j}", concurrency=c, decode_tok_s=7.7,
                                            median_decode_tok_s=63.0, max_gap_s=9.8, gap_start=sent + 5, gap_end=sent + 14.8))
        p = Percentiles(p50=per, p90=per * 1.05, p99=per * 1.1, mean=per)
        events.append(LevelResult(t=lt0 + level_s, sweep_id="sw1", concurrency=c, requests=n_req, ok=n_req,
                                  wall_s=level_s, output_tokens=n_req * MAX_TOKENS, agg_tok_s=per * c,
                                  steady_tok_s=per * c * 1.02, ttft=p, tpot=p, itl=p, decode_tok_s=p, e2e_tok_s=p,
                                  stragglers=stragglers))
    events.append(SweepResult(t=sweep_end, sweep_id="sw1", levels=LEVELS, peak_tok_s=1538.0))
    events.sort(key=lambda e: e.t)
    return events


SEED_AGG_TOK_S = {1: 65.0, 8: 250.0, 32: 600.0, 64: 900.0, 96: 1100.0, 128: 1250.0, 192: 1450.0, 256: 1538.0}
"""Aggregate tok/s of ep8-tuned by concurrency: 65 at C=1, 345 at C=16, a 1538 peak (the field notes)."""
GOAL_MB_PER_HOUR = 10.0
"""Issue 16: a first use of the cockpit, compressed, per hour."""
"""Issue 16: <= 10 MB/h compressed on the first use, chunk timing still to 0.1 ms (was 20)."""


def build_first_use(minutes: float = 18.0, seed: int = 2, compact_progress: bool = True) -> list[Event]:
    """A first use of the cockpit: the swap to ep8-tuned, then its default sweep (see the module doc).

    ``compact_progress=False`` builds progress as the load process sent it before issue 16
    (every in-flight request listed), for the before/after figure.
    """
    rng = random.Random(seed)
    t0 = 1_772_618_400.0
    span = minutes * 60
    events: list[Event] = [ProfileState(t=t0, profile="ep8-tuned", state="starting")]
    for k, phase in enumerate(("stop", "launch", "weights", "cuda_graph", "ready")):
        events.append(SwapProgress(t=t0 + k * 20, profile="ep8-tuned", phase=phase, message=f"{phase}..."))
    events.append(ProfileSwitch(t=t0 + 100, to_profile="ep8-tuned", outcome="ok", phases={"weights": 61.0}))
    events.append(ProfileState(t=t0 + 100, profile="ep8-tuned", state="serving"))
    sweep_t0 = t0 + 150
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=LEVELS, max_tokens=MAX_TOKENS)
    events.append(SweepStarted(t=sweep_t0, sweep_id="sw-7f3a", spec=spec, profile="ep8-tuned"))
    busy: list[tuple[float, float, int]] = []  # (start, end, concurrency)
    lt = sweep_t0
    for c in LEVELS:
        per = SEED_AGG_TOK_S[c] / c
        e2e = MAX_TOKENS / per
        events.append(LevelStarted(t=lt, sweep_id="sw-7f3a", concurrency=c))
        slots = [lt + rng.uniform(0, 0.02) for _ in range(c)]
        running: list[tuple[float, float, str, float]] = []  # (sent, end, id, rate)
        for j in range(2 * c):  # sustained: each slot sends its next request when the last ends
            k = j % c
            sent = slots[k]
            rate = per * rng.uniform(0.85, 1.15)
            rid = f"sw-7f3a-c{c}-r{j:04d}"
            us, acc = [], int(rng.uniform(150_000, 400_000) * (1 + c / 64))
            step_us = 1e6 / rate  # one token per forward pass of the whole batch (the sim's model)
            for _ in range(MAX_TOKENS):
                us.append(acc)
                gap = step_us * rng.gauss(1.0, 0.03) + rng.expovariate(1 / 300)  # + network/read jitter
                acc += int(gap * (6 if rng.random() < 0.002 else 1))  # a rare stall
            offs = [u / 1000 for u in us]  # floored to the microsecond, as bench.client.to_result does
            end = sent + us[-1] / 1e6 + 0.0003
            gaps = [(b - a) / 1e6 for a, b in zip(us, us[1:])]
            gi = max(range(len(gaps)), key=gaps.__getitem__)
            events.append(RequestStarted(t=sent, sweep_id="sw-7f3a", request_id=rid, concurrency=c))
            events.append(RequestResult(
                t=end, sweep_id="sw-7f3a", request_id=rid, concurrency=c, ok=True, status=200,
                intended_send=sent - 0.00004, sent=sent, ttfb_s=us[0] / 1e6 - 0.004, ttft_s=us[0] / 1e6,
                e2e_s=end - sent, prompt_tokens=rng.randint(20, 60), completion_tokens=MAX_TOKENS,
                tokens_from_usage=True, chunks=MAX_TOKENS, decode_tok_s=(MAX_TOKENS - 1) / ((us[-1] - us[0]) / 1e6),
                e2e_tok_s=MAX_TOKENS / (end - sent), tpot_s=(end - sent - us[0] / 1e6) / (MAX_TOKENS - 1),
                itl_p50_s=sorted(gaps)[len(gaps) // 2], itl_p99_s=sorted(gaps)[int(len(gaps) * 0.99)],
                max_gap_s=gaps[gi], max_gap_at=sent + us[gi] / 1e6, chunk_offsets_ms=offs, finish_reason="length"))
            running.append((sent, end, rid, rate))
            slots[k] = end + rng.uniform(0.0001, 0.0005)
        level_end = max(slots)
        n = 0
        t = lt + 0.25
        while t < level_end:  # 4 Hz progress: every in-flight request (before) or the load process's compact form
            rows = [(rid, t - sent, min(MAX_TOKENS, int((t - sent) * rate)), rate * rng.uniform(0.95, 1.05))
                    for sent, end, rid, rate in running if sent <= t < end]
            if compact_progress:
                fl, cloud = compact_in_flight(rows)
            else:
                fl = [InFlight(request_id=rid, elapsed_s=round(el, 3), tokens=n, tok_s=round(r, 2))
                      for rid, el, n, r in rows]
                cloud = []
            done = sum(1 for r in running if r[1] <= t)
            events.append(SweepProgress(t=t, sweep_id="sw-7f3a", concurrency=c, done=done, in_flight=fl,
                                        level_tokens=done * MAX_TOKENS + sum(r[2] for r in rows),
                                        level_elapsed_s=round(t - lt, 3),
                                        running=len(rows) if compact_progress else None, cloud=cloud))
            if n % 4 == 0:
                events.append(ClientHealth(t=t, sweep_id="sw-7f3a", dispatch_delay_p99_ms=round(rng.uniform(0.05, 0.4), 3),
                                           loop_lag_ms=round(rng.uniform(0.1, 2.0), 3), cpu_pct=round(rng.uniform(5, 60), 1)))
            n += 1
            t += 0.25
        events.append(SweepProgress(t=level_end, sweep_id="sw-7f3a", concurrency=c, done=2 * c, in_flight=[],
                                    level_tokens=2 * c * MAX_TOKENS, level_elapsed_s=round(level_end - lt, 3)))
        p = Percentiles(p50=per, p90=per * 1.05, p99=per * 1.1, mean=per)
        events.append(LevelResult(t=level_end + 0.001, sweep_id="sw-7f3a", concurrency=c, requests=2 * c, ok=2 * c,
                                  wall_s=level_end - lt, output_tokens=2 * c * MAX_TOKENS, agg_tok_s=SEED_AGG_TOK_S[c],
                                  steady_tok_s=SEED_AGG_TOK_S[c] * 1.02, ttft=p, tpot=p, itl=p, decode_tok_s=p,
                                  e2e_tok_s=p))
        busy.append((lt, level_end, c))
        lt = level_end + 0.5
    events.append(SweepResult(t=lt, sweep_id="sw-7f3a", levels=LEVELS, peak_tok_s=1538.0))
    # telemetry over the whole session
    procs = [GpuProcess(gpu_index=i, pid=4242 + i, name="sglang::scheduler", used_mib=87_000.0) for i in range(8)]
    for i in range(int(span * 4)):
        t = t0 + i * 0.25
        level = next((c for a, b, c in busy if a <= t <= b), 0)
        events.append(gpu_sample(rng, t, i, level > 0))
        if i % 8 == 0:
            events.append(GpuProcs(t=t, procs=procs))
        if i % 4 == 0:
            events.append(ServerStats(t=t, source="metrics", running_reqs=float(level), queued_reqs=0.0,
                                      token_usage=round(rng.random(), 4), gen_throughput=round(rng.uniform(0, 1600), 2),
                                      num_tokens=float(rng.randint(0, 200_000)), cache_hit_rate=round(rng.random(), 4)))
        if level or i % 40 == 0:  # a decode line per 40 decode steps per DP rank when busy (8 ranks, ~4/s in all)
            line = decode_line(rng, t, level)
            events.append(line)
            events.append(ServerStats(t=t, source="log", running_reqs=float(level), queued_reqs=0.0,
                                      token_usage=line.fields["token_usage"], gen_throughput=line.fields["gen_throughput"],
                                      cuda_graph=True, num_tokens=float(line.fields["token"])))
    events.sort(key=lambda e: e.t)
    return [e for e in events if e.t <= t0 + span]


def measure_size(events: list[Event], minutes: float, tmp: Path) -> dict[str, float]:
    """MB per hour: format 1 (dump_event lines, gzipped at close) and format 2 (the writer, plain and gzip)."""
    per_h = 60.0 / minutes
    plain1 = "".join(dump_event(e) + "\n" for e in events).encode()
    out = {"v1_plain": len(plain1) / 1e6 * per_h, "v1_gzip": len(gzip.compress(plain1, 6)) / 1e6 * per_h}
    del plain1
    for name in ("v2.jsonl", "v2.jsonl.gz"):
        session = Session()
        writer = RecordingWriter(tmp / name, hosts=["ct200"], max_buffer=1 << 30, flush_interval=1e9)
        session.add_sink(writer)
        next_flush = events[0].t + 0.5
        t = time.process_time()
        for ev in events:
            if ev.t >= next_flush:  # the flusher's 0.5 s, in session time
                writer.flush()
                next_flush = ev.t + 0.5
            session.publish(ev)
        path = writer.close()
        out[f"{name}_cpu_s"] = time.process_time() - t
        out[name] = path.stat().st_size / 1e6 * per_h
        out["progress_dropped"] = writer.progress_dropped
    return out


def print_size(minutes: float) -> bool:
    t = time.perf_counter()
    events = build_first_use(minutes)
    kinds: dict[str, list[int]] = {}
    for e in events:
        k = kinds.setdefault(e.kind, [0, 0])
        k[0] += 1
        k[1] += len(dump_event(e)) + 1
    print(f"first use of the cockpit: {len(events)} events over {minutes:g} min, built in {time.perf_counter() - t:.1f} s")
    print("  plain bytes (format 1) by kind: " + ", ".join(
        f"{k}={n} ({b / 1e6:.1f} MB)" for k, (n, b) in sorted(kinds.items(), key=lambda kv: -kv[1][1])))
    with tempfile.TemporaryDirectory() as tmp:
        r = measure_size(events, minutes, Path(tmp))
    print(f"  format 1 (float offsets, 4 Hz progress, gzip on close): {r['v1_plain']:.1f} MB/h plain, "
          f"{r['v1_gzip']:.1f} MB/h gzip")
    print(f"  format 2 (0.1 ms integer-delta offsets, 1 Hz progress, gzip -9 while recording, a sync flush per 0.5 s): "
          f"{r['v2.jsonl']:.1f} MB/h plain, {r['v2.jsonl.gz']:.2f} MB/h gzip "
          f"({int(r['progress_dropped'])} progress snapshots left out of the file)")
    with tempfile.TemporaryDirectory() as tmp:
        before = measure_size(build_first_use(minutes, compact_progress=False), minutes, Path(tmp))
    print(f"  the same with progress as before issue 16 (every in-flight request listed): "
          f"{before['v2.jsonl']:.1f} MB/h plain, {before['v2.jsonl.gz']:.2f} MB/h gzip")
    print(f"  recorder CPU (publish + serialise + compress): {r['v2.jsonl.gz_cpu_s'] / (minutes * 60) * 100:.2f} % "
          f"of one core at the session's rate")
    return verdict("first use, compressed", f"{r['v2.jsonl.gz']:.2f} MB/h", f"<= {GOAL_MB_PER_HOUR:g} MB/h",
                   r["v2.jsonl.gz"] <= GOAL_MB_PER_HOUR)


async def measure_replay(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    t, c = time.perf_counter(), time.process_time()
    index = RecordingIndex.open(path)
    out["open_index_s"] = time.perf_counter() - t
    out["open_index_cpu_s"] = time.process_time() - c
    session = Session()
    sub = session.subscribe("ui", maxsize=100_000)
    rep = Replayer(session, index, speed=1.0, start_paused=True)
    await rep.start()
    mid = (index.start + index.end) / 2
    for name, target in (("seek_middle_s", mid), ("seek_end_s", index.end), ("seek_middle_again_s", mid)):
        t, c = time.perf_counter(), time.process_time()
        await rep.seek(target)
        out[name] = time.perf_counter() - t
        out[name.replace("_s", "_cpu_s")] = time.process_time() - c
        out[name.replace("_s", "_events")] = len(sub.drain())
    await rep.seek(index.start)
    sub.drain()
    t = time.perf_counter()
    await rep.jump("straggler")
    out["jump_straggler_s"] = time.perf_counter() - t
    await rep.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--first-use-minutes", type=float, default=18.0)
    ap.add_argument("--size-only", action="store_true", help="only the first use's bytes per hour")
    args = ap.parse_args()

    checks = [print_size(args.first_use_minutes)]
    if args.size_only:
        exit_on(checks)
        return

    t = time.perf_counter()
    events = build_hour(args.minutes)
    print(f"built {len(events)} events for {args.minutes:g} min in {time.perf_counter() - t:.1f} s")
    kinds: dict[str, int] = {}
    for e in events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    print("  " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))

    with tempfile.TemporaryDirectory() as tmp:
        session = Session()
        # the flusher thread is not started: sink cost alone, then the flush cost alone
        writer = RecordingWriter(Path(tmp) / "hour.jsonl.gz", hosts=["sim"], max_buffer=1 << 30, flush_interval=1e9)
        session.add_sink(writer)
        t = time.perf_counter()
        worst = 0.0
        for ev in events:
            t1 = time.perf_counter()
            session.publish(ev)
            worst = max(worst, time.perf_counter() - t1)
        sink_s = time.perf_counter() - t
        t = time.perf_counter()
        writer.flush()
        flush_s = time.perf_counter() - t
        raw_mb = writer.bytes_in / 1e6
        n = len(events)
        print(f"publish with the recorder as sink: {sink_s / n * 1e6:.2f} us/event mean, worst {worst * 1e6:.0f} us")
        print(f"flush (serialise + compress + write, one flush of everything): {flush_s / n * 1e6:.1f} us/event -> {flush_s / (args.minutes * 60) * 100:.2f} % "
              f"of one core at this session's event rate ({n / (args.minutes * 60):.1f} events/s)")
        del events
        gc.collect()
        t = time.perf_counter()
        final = writer.close()
        close_s = time.perf_counter() - t
        gz_mb = final.stat().st_size / 1e6
        per_hour = gz_mb * 60 / args.minutes
        print(f"size: {raw_mb:.1f} MB plain -> {gz_mb:.2f} MB gzip ({per_hour:.2f} MB per hour; goal <= 20)")
        checks.append(verdict("an hour with a sweep, gzip", f"{per_hour:.2f} MB/h", "<= 20 MB/h", per_hour <= 20))
        print(f"close (end the gzip stream, write the replay index .NAME.idx): {close_s:.2f} s")
        r = asyncio.run(measure_replay(final))
        print(f"open index: {r['open_index_s']:.3f} s wall, {r['open_index_cpu_s']:.3f} s CPU")
        print(f"seek middle: {r['seek_middle_s']:.3f} s wall, {r['seek_middle_cpu_s']:.3f} s CPU "
              f"({r['seek_middle_events']:.0f} events re-published); "
              f"end: {r['seek_end_s']:.3f} s ({r['seek_end_events']:.0f}); "
              f"middle again (parsed cache warm): {r['seek_middle_again_s']:.3f} s")
        print(f"open + first seek: {r['open_index_s'] + r['seek_middle_s']:.3f} s wall, "
              f"{r['open_index_cpu_s'] + r['seek_middle_cpu_s']:.3f} s CPU (goal <= 1; wall > CPU when the host is shared)")
        cpu_s = r["open_index_cpu_s"] + r["seek_middle_cpu_s"]
        checks.append(verdict("open + first seek, CPU", f"{cpu_s:.3f} s", "<= 1 s", cpu_s <= 1))
        print(f"jump to straggler: {r['jump_straggler_s']:.3f} s")
        t = time.perf_counter()
        rec = read_recording(final)
        print(f"full read_recording (every event validated): {time.perf_counter() - t:.2f} s, "
              f"{len(rec.events)} events, {len(rec.skipped)} skipped")
        del rec
        t, c = time.perf_counter(), time.process_time()
        summary = summarize(final)
        cmp = compare(summary.sweeps[0], summary.sweeps[0])
        n_req = sum(len(r.requests) for r in summary.sweeps[0].levels.values())
        print(f"report (kimitui report A --vs A): summarize + compare, seeded bootstrap over {n_req} requests in "
              f"{len(cmp.levels)} levels: {time.perf_counter() - t:.2f} s wall, {time.process_time() - c:.2f} s CPU")
    exit_on(checks)


if __name__ == "__main__":
    main()
