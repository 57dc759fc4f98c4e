"""Does replaying a big recording stay flat in memory, open fast and seek fast?

Builds once (cached under ``platformdirs.user_cache_dir("kimitui")/bench``) a realistic recording of
about ``--mb`` MB plain (default 200): repeated first uses of the cockpit from ``bench_recording.py``
(a swap, the default sweep C = 1...256 with 512-token requests and their chunk offsets, 8 GPUs at 4 Hz,
the server log, /metrics, client health, 4 Hz progress), each shifted in time after the last, written
through a Session into the RecordingWriter as the cockpit does (format 2: 1 Hz progress, 0.1 ms
integer-delta offsets), both plain and ``.gz``.

The writer writes each file's replay index (``.NAME.idx``) when it closes it, as every recording's.
Then, in a fresh subprocess per file (so RSS is this work's alone), it opens the file with
``ReplayController`` (what ``kimitui replay FILE --speed X`` builds, less the TUI), replays it from
start to end at ``--speed`` (default 100) into the Session with a subscriber drained every 50 ms
(a UI's frame), sampling RSS every 0.1 s from a thread, then times 20 random seeks.  Printed: RSS
before/after open and the open's peak (against the plain size), RSS at the start / end / peak of the
replay with PASS/FAIL against +10 % of the RSS after open, open time with PASS/FAIL against 0.2 s (issue 33),
seek p50/max with PASS/FAIL against 0.2 s, how many parsed events the index held at the end (its cache
bound), and, in another fresh subprocess, what an open costs where there is no index yet (the scan; no
goal: it happens once per recording).  Exit 1 when any goal fails.

Run:  .venv/bin/python bench/bench_replay_memory.py [--mb 200] [--speed 100] [--rebuild] [--only plain|gz]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).absolute().parents[1]))
sys.path.insert(0, str(Path(__file__).absolute().parent))
from benchutil import rss_mb  # noqa: E402  # bench/ is on sys.path (above)

GROWTH_GOAL = 0.10
SEEK_GOAL_S = 0.2
N_SEEKS = 20


def peak_mb() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would carry the parent's peak across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError("no VmHWM in /proc/self/status")


# --------------------------------------------------------------------------- the recording


def cache_dir() -> Path:
    from platformdirs import user_cache_dir

    d = Path(user_cache_dir("kimitui")) / "bench"
    d.mkdir(parents=True, exist_ok=True)
    return d


def build(mb: float, rebuild: bool) -> tuple[Path, Path]:
    """The plain and gzip recordings of about ``mb`` MB plain (reused if they exist)."""
    from kimitui.recording import FORMAT_VERSION, RecordingWriter
    from kimitui.recording.writer import MEMBER_BYTES
    from kimitui.session import Session

    stem = cache_dir() / f"replay-{mb:g}MB-v{FORMAT_VERSION}-m{MEMBER_BYTES >> 10}K"  # as the writer writes now
    plain, gz = stem.with_suffix(".jsonl"), stem.with_suffix(".jsonl.gz")
    if plain.exists() and gz.exists() and not rebuild:
        return plain, gz
    from bench_recording import build_first_use

    for p in (plain, gz):
        p.unlink(missing_ok=True)
    session = Session()
    writers = [RecordingWriter(p, hosts=["ct200"], max_buffer=1 << 30, flush_interval=1e9) for p in (plain, gz)]
    for w in writers:
        session.add_sink(w)
    t0 = time.perf_counter()
    rep, minutes = 0, 18.0
    while writers[0].bytes_in < mb * 1e6:
        dt = rep * minutes * 60
        events = build_first_use(minutes, seed=2 + rep)
        next_flush = events[0].t + dt + 0.5
        for ev in events:
            upd: dict[str, object] = {"t": ev.t + dt}
            for name in ("sent", "intended_send", "max_gap_at"):
                v = getattr(ev, name, None)
                if isinstance(v, float):
                    upd[name] = v + dt
            if getattr(ev, "sweep_id", None):
                upd["sweep_id"] = f"{ev.sweep_id}-{rep}"  # type: ignore[attr-defined]
            ev = ev.model_copy(update=upd)
            if ev.t >= next_flush:  # the flusher's 0.5 s, in session time
                for w in writers:
                    w.flush()
                next_flush = ev.t + 0.5
            session.publish(ev)
            if writers[0].bytes_in >= mb * 1e6:
                break
        rep += 1
        print(f"  building: {rep} first uses, {writers[0].bytes_in / 1e6:.0f} MB plain "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    for w in writers:
        w.close()
    return plain, gz


# --------------------------------------------------------------------------- the measured child


async def child(path: Path, speed: float) -> dict[str, float]:
    from kimitui.recording import RecordingIndex
    from kimitui.replay import ReplayController

    out: dict[str, float] = {"before_open": rss_mb()}
    t, c = time.perf_counter(), time.process_time()
    index = RecordingIndex.open(path)
    out["open_s"] = time.perf_counter() - t
    out["open_cpu_s"] = time.process_time() - c
    out["after_open"] = rss_mb()
    out["open_peak"] = peak_mb()
    out["events"] = len(index)
    out["index_read"] = float(index.index_status.startswith("read from"))
    out["plain_mb"] = getattr(index, "text_bytes", path.stat().st_size) / 1e6  # (an index before the cache: the file)
    out["file_mb"] = path.stat().st_size / 1e6

    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(rss_mb())
            stop.wait(0.1)

    ctl = ReplayController(index, speed=speed)
    sub = ctl.session.subscribe("ui", maxsize=10_000)
    drained = 0

    async def ui() -> None:
        nonlocal drained
        while True:
            drained += len(sub.drain())
            await asyncio.sleep(0.05)

    ui_task = asyncio.create_task(ui())
    out["replay_start"] = rss_mb()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t = time.perf_counter()
    await ctl.start()
    await ctl.replayer.wait()
    out["replay_s"] = time.perf_counter() - t
    stop.set()
    sampler.join()
    out["replay_end"] = rss_mb()
    out["replay_peak"] = max(samples + [out["replay_end"]])
    out["published"] = ctl.replayer.published
    out["cached_end"] = getattr(index, "cached", -1)
    out["cache_bound"] = getattr(index, "cache_events", -1)
    out["parsed"] = getattr(index, "parsed", -1)

    rng = random.Random(16)
    seeks, seeks_cpu = [], []
    for _ in range(N_SEEKS):
        target = rng.uniform(index.start, index.end)
        t, c = time.perf_counter(), time.process_time()
        await ctl.seek(target)
        seeks.append(time.perf_counter() - t)
        seeks_cpu.append(time.process_time() - c)
        await asyncio.sleep(0.06)  # let the UI drain
        out.setdefault("after_first_seek", rss_mb())
    out["seek_p50_s"] = statistics.median(seeks)
    out["seek_max_s"] = max(seeks)
    out["seek_cpu_p50_s"] = statistics.median(seeks_cpu)
    out["seek_cpu_max_s"] = max(seeks_cpu)
    out["after_seeks"] = rss_mb()
    out["cached_after_seeks"] = getattr(index, "cached", -1)
    out["members_decoded"] = getattr(getattr(index, "_source", None), "decoded", -1)
    ui_task.cancel()
    await ctl.shutdown()
    out["drained"] = drained
    return out


def scan_child(path: Path) -> dict[str, float]:
    """What opening costs where there is no index yet (a recording from before, or its index deleted): the scan."""
    from kimitui.recording.scan import scan
    from kimitui.recording.source import open_source

    t, c = time.perf_counter(), time.process_time()
    scan(open_source(path))
    return {"scan_s": time.perf_counter() - t, "scan_cpu_s": time.process_time() - c, "scan_peak": peak_mb()}


def run_child(path: Path, speed: float, mode: str = "--child") -> dict[str, float]:
    cmd = [sys.executable, __file__, mode, str(path), "--speed", str(speed)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"child failed ({res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(name: str, r: dict[str, float], speed: float) -> bool:
    """Prints the figures, PASS/FAIL beside each goal's; whether every goal passed."""
    limit = r["after_open"] * (1 + GROWTH_GOAL)
    print(f"\n{name}: {r['file_mb']:.1f} MB on disk, {r['plain_mb']:.1f} MB plain, {r['events']:.0f} events; "
          f"replayed at {speed:g}x in {r['replay_s']:.1f} s ({r['published']:.0f} events published)")
    print(f"  {'':<28}{'RSS MB':>9}")
    print(f"  {'before open':<28}{r['before_open']:>9.1f}")
    print(f"  {'after open':<28}{r['after_open']:>9.1f}   open {r['open_s']:.2f} s ({r['open_cpu_s']:.2f} s CPU); "
          "peak during open "
          f"{r['open_peak']:.1f} MB = {(r['open_peak'] - r['before_open']) / r['plain_mb']:.2f}x the plain size "
          f"above the start")
    print(f"  {'replay start':<28}{r['replay_start']:>9.1f}")
    print(f"  {'replay end':<28}{r['replay_end']:>9.1f}   {(r['replay_end'] / r['after_open'] - 1) * 100:+.1f} % "
          f"of after open  {verdict(r['replay_end'] <= limit)} (goal <= +{GROWTH_GOAL * 100:.0f} %, {limit:.1f} MB)")
    print(f"  {'replay peak':<28}{r['replay_peak']:>9.1f}   {(r['replay_peak'] / r['after_open'] - 1) * 100:+.1f} % "
          f"of after open  {verdict(r['replay_peak'] <= limit)}")
    print(f"  {'after the first seek':<28}{r['after_first_seek']:>9.1f}   "
          f"{(r['after_first_seek'] / r['after_open'] - 1) * 100:+.1f} %  (a seek re-publishes a few thousand events "
          "at once; the UI holds them until its next frame)")
    print(f"  {'after 20 seeks':<28}{r['after_seeks']:>9.1f}   {(r['after_seeks'] / r['after_open'] - 1) * 100:+.1f} %")
    print(f"  seek over {N_SEEKS} random targets: p50 {r['seek_p50_s'] * 1000:.0f} ms, "
          f"max {r['seek_max_s'] * 1000:.0f} ms  "
          f"{verdict(r['seek_max_s'] <= SEEK_GOAL_S)} (goal <= {SEEK_GOAL_S * 1000:.0f} ms); CPU p50 "
          f"{r['seek_cpu_p50_s'] * 1000:.0f} ms, max {r['seek_cpu_max_s'] * 1000:.0f} ms "
          f"{verdict(r['seek_cpu_max_s'] <= SEEK_GOAL_S)} (wall > CPU when the host is shared)")
    print(f"  parsed events held: {r['cached_end']:.0f} at the end, {r['cached_after_seeks']:.0f} after the seeks "
          f"(bound {r['cache_bound']:.0f}); {r['parsed']:.0f} parses during the replay")
    print(f"  open: {r['open_s'] * 1000:.0f} ms  {verdict(r['open_s'] <= SEEK_GOAL_S)} "
          f"(goal <= {SEEK_GOAL_S * 1000:.0f} ms, issue 33; "
          f"{'with its index' if r.get('index_read') else 'NO INDEX: scanned'}); "
          f"load average {os.getloadavg()[0]:.2f}")
    if r.get("members_decoded", -1) >= 0:
        print(f"  gzip members decoded for the replay and the seeks: {r['members_decoded']:.0f}")
    if "scan_s" in r:
        print(f"  without its index (a recording from before, or the index deleted) open scans the file once: "
              f"{r['scan_s']:.2f} s ({r['scan_cpu_s']:.2f} s CPU, peak RSS {r['scan_peak']:.0f} MB), then writes it")
    return (r["replay_end"] <= limit and r["replay_peak"] <= limit and r["seek_max_s"] <= SEEK_GOAL_S
            and r["seek_cpu_max_s"] <= SEEK_GOAL_S and r["open_s"] <= SEEK_GOAL_S)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="plain size of the recording (MB)")
    ap.add_argument("--speed", type=float, default=100.0)
    ap.add_argument("--rebuild", action="store_true", help="build the cached recording again")
    ap.add_argument("--only", choices=("plain", "gz"))
    ap.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--scan-child", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(Path(args.child), args.speed))))
        return
    if args.scan_child:
        print(json.dumps(scan_child(Path(args.scan_child))))
        return
    plain, gz = build(args.mb, args.rebuild)
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
          + f" on {os.cpu_count()} CPUs (timings are wall clock)")
    ok = True
    for name, path in (("plain", plain), ("gz", gz)):
        if args.only in (None, name):
            r = run_child(path, args.speed)
            r.update(run_child(path, args.speed, "--scan-child"))
            ok = report(f"{name} {path}", r, args.speed) and ok
    print("\nload average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
