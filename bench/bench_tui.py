"""Cockpit cost under a firehose: process CPU and key-press-to-screen latency.

The firehose (issue 7): 8 GPUs at 10 Hz, 500 log lines/s, a 256-stream sweep
(progress snapshots with 256 in-flight requests at 5 Hz, 30 request results/s,
a level result every 10 s).  Events are built before the measured window, so
the figure is the TUI's cost (drain, fold, render, terminal output), not the
cost of making events.

Key latency: while the firehose runs, the bench presses ``p`` (pause/resume
the log, which changes the log's status line) every 0.15-0.35 s, ``--presses``
times (200: a p99 that is not just the maximum), and measures from the key
event to the first frame written after the app handled it.

Log lag (issue 15): from a log line being published to the log panel painting it (or a newer line;
``tests/support/loglag.py``), over the firehose-only window, and over a replay at 100x of a recording
with a 500 lines/s log (GPUs at 10 Hz, server stats at 1 Hz): p50/p99/max.  Goal: max <= 1 s.

Modes:
  python bench/bench_tui.py               # real terminal: runs the app inside tmux (160x50)
  python bench/bench_tui.py --headless    # in-process, no terminal output (a lower bound)
  python bench/bench_tui.py --busy 2      # both cores kept busy by two spinning processes meanwhile (issue 33)
  python bench/bench_tui.py --runs 5 --compare /tmp/head   # 5 runs, each followed by one of the
        # cockpit in /tmp/head (e.g. `git archive HEAD | tar -x -C /tmp/head`): interleaved, so
        # both see the same load on a shared machine (an older checkout needs tests/support/loglag.py)
Goals: CPU <= 20 % of one core under the firehose (issue 33; 25 % before), key latency p99 <= 100 ms, the
newest log line on screen within 1 s, live and in the 100x replay, and the replay keeping up (>= 95 % of its speed;
issue 33 asks 10x).  PASS/FAIL per goal on this checkout's median run; exit 1 on FAIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from rich.console import RenderableType
from textual.screen import Screen

ROOT = Path(os.environ.get("KIMITUI_BENCH_ROOT") or Path(__file__).resolve().parents[1])
"""Whose cockpit to measure: this checkout, or another (``--compare``) under the same bench."""
sys.path.insert(0, str(ROOT))

from kimitui.events import (  # noqa: E402
    Event,
    GpuReading,
    GpuSample,
    InFlight,
    LevelResult,
    LogLine,
    Percentiles,
    RequestResult,
    ServerStats,
    Straggler,
    SweepProgress,
    SweepStarted,
)
from kimitui.recording import write_recording  # noqa: E402
from kimitui.replay import ReplayController  # noqa: E402
from kimitui.tui.app import KimituiApp  # noqa: E402
from kimitui.tui.widgets.log_panel import LogPanel  # noqa: E402
from tests.support.fakecontrol import FakeController, caps, spec  # noqa: E402
from tests.support.loglag import LagFigures, LagProbe  # noqa: E402

TICK = 0.1
REPLAY_SPEED = 100.0
_TOKEN = re.compile(r"#token: (\d+)")


def token_seq(text: str) -> int:
    """The firehose's log lines count up in ``#token: N``: the lag probe's sequence number."""
    m = _TOKEN.search(text)
    return int(m.group(1)) if m else -1


def gpu_sample(rnd: random.Random, t: float, k: int) -> GpuSample:
    return GpuSample(t=t, seq=k, gpus=[GpuReading(
        index=i, util_pct=rnd.uniform(80, 99), mem_used_mib=87_000, mem_total_mib=97_887,
        power_w=rnd.uniform(400, 590), power_limit_w=600, temp_c=rnd.uniform(60, 80), sm_clock_mhz=2400,
        pcie_tx_kbps=rnd.uniform(1e3, 5e4), pcie_rx_kbps=rnd.uniform(1e3, 5e4), throttle_reasons=[])
        for i in range(8)])


def log_lines(rnd: random.Random, t: float, k: int) -> list[Event]:
    """One tick's 50 decode lines (500 lines/s), mostly info, a few warnings and errors."""
    out: list[Event] = []
    for j in range(50):
        sev: Literal["error", "warning", "info"] = (
            "error" if rnd.random() < 0.005 else ("warning" if rnd.random() < 0.02 else "info"))
        out.append(LogLine(t=t, raw=f"[TP{j % 8}] Decode batch. #running-req: 256, #token: {k * 50 + j}, "
                                    f"gen throughput (token/s): {rnd.uniform(1400, 1600):.2f}",
                           line_kind="decode", severity=sev))
    return out


def firehose(seconds: float, t0: float, seed: int = 1) -> list[list[Event]]:
    """One list of events per 100 ms tick."""
    rnd = random.Random(seed)
    ticks: list[list[Event]] = []
    tokens = 0
    for k in range(int(seconds / TICK)):
        t = t0 + k * TICK
        batch: list[Event] = [gpu_sample(rnd, t, k), *log_lines(rnd, t, k)]
        for j in range(3):
            batch.append(RequestResult(t=t, sweep_id="fh", request_id=f"r{k}-{j}", concurrency=256, ok=True,
                                       intended_send=t - 80, sent=t - 80, ttft_s=0.3, e2e_s=rnd.uniform(70, 90),
                                       completion_tokens=512, decode_tok_s=rnd.uniform(4, 8)))
        if k % 2 == 0:
            tokens += 1500
            batch.append(SweepProgress(t=t, sweep_id="fh", concurrency=256, done=k * 3, level_tokens=tokens,
                                       level_elapsed_s=k * TICK + 0.1, in_flight=[
                                           InFlight(request_id=f"f{i}", elapsed_s=(k * TICK + i * 0.3) % 85,
                                                    tokens=i * 2, tok_s=rnd.uniform(3, 8)) for i in range(256)]))
        if k % 10 == 0:
            batch.append(ServerStats(t=t, source="log", running_reqs=256, queued_reqs=rnd.randint(0, 9),
                                     token_usage=0.8, gen_throughput=rnd.uniform(1400, 1600), cuda_graph=True))
        if k % 100 == 50:
            c = 2 ** (k // 100 + 3)
            batch.append(LevelResult(t=t, sweep_id="fh", concurrency=c, requests=c, ok=c, agg_tok_s=c * 6.0,
                                     steady_tok_s=c * 6.2, ttft=Percentiles(p50=0.1, p99=0.3),
                                     tpot=Percentiles(p50=0.1, p99=0.2), decode_tok_s=Percentiles(p50=6, p99=8),
                                     stragglers=[Straggler(request_id=f"s{k}", concurrency=c, decode_tok_s=1.0,
                                                           max_gap_s=5.0, gap_start=t - 6, gap_end=t - 1)]))
        ticks.append(batch)
    return ticks


class FirehoseController(FakeController):
    """Publishes the pre-built firehose in real time from ``start()`` on."""

    def __init__(self, ticks: list[list[Event]]) -> None:
        super().__init__(initial=[caps(), SweepStarted(sweep_id="fh", spec=spec([8, 16, 32, 64, 128, 256]),
                                                       profile="ep8-tuned")])
        self.ticks = ticks
        self.published = 0

    async def start(self) -> None:
        await super().start()
        asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        start = time.monotonic()
        for k, batch in enumerate(self.ticks):
            delay = start + k * TICK - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.session.publish_many(batch)
            self.published += len(batch)


async def measure(app: KimituiApp, ctrl: FirehoseController, seconds: float, warmup: float,
                  presses: int) -> dict[str, float]:
    """Run inside the app: warm up, CPU over ``seconds`` of firehose, then ``presses`` key presses."""
    frames: list[float] = []
    original = app._display

    def display(screen: Screen[object], renderable: RenderableType | None) -> None:
        original(screen, renderable)
        if renderable is not None:
            frames.append(time.perf_counter())

    app._display = display  # type: ignore[method-assign]
    while not app.started:
        await asyncio.sleep(0.05)
    panel = app.query_one(LogPanel)
    probe = LagProbe(ctrl.session, panel.log_widget, token_seq)
    await asyncio.sleep(warmup)
    handled: list[float] = []
    toggle = panel.toggle_pause

    def timed_toggle() -> bool:
        result = toggle()
        handled.append(time.perf_counter())
        return result

    panel.toggle_pause = timed_toggle  # type: ignore[method-assign]
    # window 1: the firehose alone (what the cockpit costs while the operator watches)
    q0, qw0, lag0 = time.process_time(), time.monotonic(), time.perf_counter()
    await asyncio.sleep(seconds)
    quiet_cpu = 100 * (time.process_time() - q0) / (time.monotonic() - qw0)
    lag1 = time.perf_counter()
    await asyncio.sleep(0.6)  # the window's last lines get their tick to be painted
    lag = probe.figures(since=lag0, until=lag1)  # the keys' window pauses the log: not in it
    # window 2: the firehose while the operator presses keys
    pressed: list[float] = []
    rnd = random.Random(7)
    renders0, pub0 = app.renders, ctrl.published
    c0, w0 = time.process_time(), time.monotonic()
    while len(pressed) < presses:
        await asyncio.sleep(rnd.uniform(0.15, 0.35))  # an operator's pace; no busy polling
        pressed.append(time.perf_counter())
        app.simulate_key("p")
    cpu = time.process_time() - c0
    wall = time.monotonic() - w0
    published = ctrl.published - pub0
    renders = app.renders - renders0
    await asyncio.sleep(0.5)
    latencies, handling = [], []
    for p, h in zip(pressed, handled):
        frame = next((f for f in frames if f >= h), None)
        handling.append((h - p) * 1000)
        if frame is not None:
            latencies.append((frame - p) * 1000)
    lat = sorted(latencies)
    load = os.getloadavg()[0]
    return {
        "load": load,
        "cpu_pct": quiet_cpu,
        "cpu_keys_pct": 100 * cpu / wall,
        "wall_s": wall,
        "events_per_s": published / wall,
        "panel_redraws_per_s": renders / wall,
        "key_presses": len(lat),
        "key_p50_ms": statistics.median(lat),
        "key_p99_ms": percentile(lat, 99),
        "key_max_ms": lat[-1],
        "dropped": app.model.dropped,
        "handle_p50_ms": statistics.median(handling),
        "handle_p99_ms": percentile(sorted(handling), 99),
        **lag_row("log_lag", lag),
    }


def lag_row(prefix: str, lag: LagFigures) -> dict[str, float]:
    return {f"{prefix}_p50_ms": lag.p50_s * 1000, f"{prefix}_p99_ms": lag.p99_s * 1000,
            f"{prefix}_max_ms": lag.max_s * 1000, f"{prefix}_lines": lag.lines, f"{prefix}_unshown": lag.unshown}


STARTUP_S = 60.0
"""The recording's first minute: a server starting (a line every 0.1 s, all narrower than the panel),
as real recordings begin; the panel used to stop following when the wide lines came."""


def log_recording(path: Path, seconds: float, t0: float, seed: int = 2) -> Path:
    """A recording of a server's start-up, then a 500 lines/s log, GPUs at 10 Hz and server stats at
    1 Hz (no sweep: its 256-request snapshots would make a 100x recording hundreds of MB)."""
    rnd = random.Random(seed)
    events: list[Event] = [caps(t0)]
    startup = int(STARTUP_S / TICK)
    for k in range(startup + int(seconds / TICK)):
        t = t0 + k * TICK
        events.append(gpu_sample(rnd, t, k))
        if k < startup:
            events.append(LogLine(t=t, raw=f"[TP{k % 8}] Load weight: shard {k}", line_kind="plain"))
        else:
            events.extend(log_lines(rnd, t, k))
        if k % 10 == 0:
            events.append(ServerStats(t=t, source="log", running_reqs=256, queued_reqs=rnd.randint(0, 9),
                                      token_usage=0.8, gen_throughput=rnd.uniform(1400, 1600), cuda_graph=True))
    return write_recording(path, events)


async def measure_replay(app: KimituiApp, ctrl: ReplayController, seconds: float) -> dict[str, float]:
    """Inside the app: the log's lag over ``seconds`` of a replay at ``REPLAY_SPEED``, after the start-up."""
    while not app.started:
        await asyncio.sleep(0.05)
    probe = LagProbe(ctrl.session, app.query_one(LogPanel).log_widget, token_seq)
    while ctrl.position < ctrl.replayer.start_t + STARTUP_S:  # the start-up's narrow lines: not measured
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    c0, w0, lag0, pos0 = time.process_time(), time.monotonic(), time.perf_counter(), ctrl.position
    await asyncio.sleep(seconds)
    cpu, wall, pos1, until = time.process_time() - c0, time.monotonic() - w0, ctrl.position, time.perf_counter()
    await asyncio.sleep(1.0)  # what was published last has its tick to be painted
    return {"replay_cpu_pct": 100 * cpu / wall, "replay_speed_reached": (pos1 - pos0) / wall,
            "replay_dropped": app.model.dropped, **lag_row("replay_lag", probe.figures(since=lag0, until=until))}


def replay_seconds(seconds: float) -> float:
    return REPLAY_SPEED * (seconds + 4)  # the start, the measured window, the tail, a margin


async def headless_replay(seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = log_recording(Path(tmp) / "log500.jsonl", replay_seconds(seconds), time.time())
        ctrl = ReplayController(path, speed=REPLAY_SPEED)
        app = KimituiApp(ctrl)
        async with app.run_test(size=(160, 50)):
            result = await measure_replay(app, ctrl, seconds)
            await ctrl.shutdown()
            return result


def percentile(ordered: list[float], pct: float) -> float:
    """Nearest-rank percentile of sorted values (over 200 presses the p99 is the 198th, not the maximum)."""
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def firehose_seconds(seconds: float, warmup: float, presses: int) -> float:
    return seconds + warmup + presses * 0.36 + 5  # the slowest operator pace, and a margin
async def headless(seconds: float, warmup: float, presses: int) -> dict[str, float]:
    ticks = firehose(firehose_seconds(seconds, warmup, presses), time.time())
    ctrl = FirehoseController(ticks)
    app = KimituiApp(ctrl)
    async with app.run_test(size=(160, 50)):
        return await measure(app, ctrl, seconds, warmup, presses)


def child(out: str, seconds: float, warmup: float, presses: int, recording: str | None = None) -> None:
    """Run the app on this terminal (tmux) with the firehose (or a replay of ``recording`` at 100x)
    and write the figures to ``out``."""
    result: dict[str, float] = {}
    if recording is not None:
        replay = ReplayController(recording, speed=REPLAY_SPEED)
        app = KimituiApp(replay)

        async def drive() -> None:
            result.update(await measure_replay(app, replay, seconds))
            app.exit(0)
    else:
        ctrl = FirehoseController(firehose(firehose_seconds(seconds, warmup, presses), time.time()))
        app = KimituiApp(ctrl)

        async def drive() -> None:
            result.update(await measure(app, ctrl, seconds, warmup, presses))
            app.exit(0)

    app.call_later(lambda: app.run_worker(drive(), exit_on_error=True))
    app.run()
    Path(out).write_text(json.dumps(result))


def in_tmux(seconds: float, warmup: float, presses: int, root: Path | None = None,
            replay: bool = False) -> dict[str, float]:
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed; use --headless")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        sock = f"kimitui-bench-{os.getpid()}-{os.path.basename(tmp)}"  # a fresh server each run: no race with the last
        root = root or ROOT
        cmd = (f"exec {sys.executable} {Path(__file__).resolve()} --child {out} --seconds {seconds} "
               f"--warmup {warmup} --presses {presses}")
        if replay:
            cmd += f" --recording {log_recording(Path(tmp) / 'log500.jsonl', replay_seconds(seconds), time.time())}"
        subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "bench", "-x", "160", "-y", "50",
                        f"cd {root} && KIMITUI_BENCH_ROOT={root} COLORTERM=truecolor {cmd}"], check=True)
        try:
            deadline = time.monotonic() + firehose_seconds(seconds, warmup, presses) + 60
            while not os.path.exists(out) and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        if not os.path.exists(out):
            raise SystemExit("the cockpit in tmux produced no result")
        return json.loads(Path(out).read_text())


GOAL_CPU_PCT = 20.0
GOAL_KEY_P99_MS = 100.0
GOAL_LAG_MS = 1000.0


def verdicts(runs: list[dict[str, float]]) -> list[bool]:
    """PASS/FAIL per goal, on the median of this checkout's runs (a run's load spike is not the cockpit's)."""
    from benchutil import verdict  # bench/ is on sys.path (the script's own folder)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    n = f"median of {len(runs)} run{'s' if len(runs) > 1 else ''}"
    out = [verdict("cockpit CPU under the firehose", f"{med('cpu_pct'):.1f} % of a core ({n})",
                   f"<= {GOAL_CPU_PCT:g} %", med("cpu_pct") <= GOAL_CPU_PCT),
           verdict("key -> screen p99", f"{med('key_p99_ms'):.1f} ms ({n})", f"<= {GOAL_KEY_P99_MS:g} ms",
                   med("key_p99_ms") <= GOAL_KEY_P99_MS),
           verdict("log lag, live, max", f"{med('log_lag_max_ms'):.0f} ms ({n})", f"<= {GOAL_LAG_MS:g} ms",
                   med("log_lag_max_ms") <= GOAL_LAG_MS)]
    if all("replay_lag_max_ms" in r for r in runs):
        out.append(verdict(f"log lag, {REPLAY_SPEED:.0f}x replay, max", f"{med('replay_lag_max_ms'):.0f} ms ({n})",
                           f"<= {GOAL_LAG_MS:g} ms", med("replay_lag_max_ms") <= GOAL_LAG_MS))
        out.append(verdict(f"replay keeps up at {REPLAY_SPEED:.0f}x", f"{med('replay_speed_reached'):.0f}x ({n})",
                           f">= {0.95 * REPLAY_SPEED:.0f}x", med("replay_speed_reached") >= 0.95 * REPLAY_SPEED))
    return out


def report(r: dict[str, float], mode: str) -> None:
    print(f"kimitui cockpit under a firehose ({mode}, {r['wall_s']:.1f} s of keys, {r['events_per_s']:.0f} events/s: "
          f"8 GPUs @10 Hz, 500 log lines/s, 256-stream sweep)")
    print(f"  TUI process CPU: {r['cpu_pct']:.1f} % of one core   (goal <= {GOAL_CPU_PCT:g} %; firehose only)")
    print(f"                   {r['cpu_keys_pct']:.1f} % while a key is pressed every 0.15-0.35 s")
    print(f"  key -> screen:   p50 {r['key_p50_ms']:.1f} ms  p99 {r['key_p99_ms']:.1f} ms  max {r['key_max_ms']:.1f} ms"
          f"  over {r['key_presses']} presses   (goal p99 <= 100 ms)")
    print(f"  of which key -> handled: p50 {r['handle_p50_ms']:.1f} ms  p99 {r['handle_p99_ms']:.1f} ms")
    print(f"  panel redraws:   {r['panel_redraws_per_s']:.1f}/s   events dropped by the UI queue: {r['dropped']}")
    print(f"  log lag, live:   {lag_text(r, 'log_lag')}   (published -> painted; goal max <= 1000 ms)")
    if "replay_lag_max_ms" in r:
        print(f"  log lag, {REPLAY_SPEED:.0f}x replay: {lag_text(r, 'replay_lag')}   (500 lines/s recorded; "
              f"reached {r['replay_speed_reached']:.0f}x, CPU {r['replay_cpu_pct']:.0f} %, "
              f"{r['replay_dropped']} events dropped by the UI queue)")
    print(f"  load average:    {r.get('load', os.getloadavg()[0]):.2f} on {os.cpu_count()} CPUs")


def lag_text(r: dict[str, float], prefix: str) -> str:
    unshown = f", {r[prefix + '_unshown']:.0f} never painted" if r[prefix + "_unshown"] else ""
    return (f"p50 {r[prefix + '_p50_ms']:.0f} ms  p99 {r[prefix + '_p99_ms']:.0f} ms  max {r[prefix + '_max_ms']:.0f} ms"
            f"  over {r[prefix + '_lines']:.0f} lines{unshown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headless", action="store_true", help="in-process, no terminal (lower bound)")
    parser.add_argument("--seconds", type=float, default=10.0, help="firehose-only window for the CPU figure")
    parser.add_argument("--presses", type=int, default=200, help="key presses in the key-latency window")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--compare", type=Path, metavar="DIR",
                        help="another checkout (e.g. HEAD before a change): a run of it after each run (tmux only)")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--replay-seconds", type=float, default=8.0,
                        help=f"the window of the {REPLAY_SPEED:.0f}x replay's log lag (0: no replay)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N processes spinning on a core each while it measures (2: both cores busy)")
    parser.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--recording", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seconds if args.recording is None else args.replay_seconds, args.warmup,
              args.presses, args.recording)
        return
    mode = "headless" if args.headless else "tmux 160x50"
    if args.busy:
        mode += f", {args.busy} spinning processes beside it"
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            runs(args, mode)
        finally:
            for p in spinners:
                p.kill()
                p.wait()
        return
    runs(args, mode)


def runs(args: argparse.Namespace, mode: str) -> None:
    """``args.runs`` runs (each followed by the ``--compare`` checkout's), the table, PASS/FAIL; exit 1 on FAIL."""
    rows: list[tuple[int, str, dict[str, float]]] = []
    for k in range(args.runs):
        for who, root in [("this", None)] + ([("compare", args.compare.resolve())] if args.compare else []):
            if args.headless:
                r = asyncio.run(headless(args.seconds, args.warmup, args.presses))
                if args.replay_seconds > 0:
                    r.update(asyncio.run(headless_replay(args.replay_seconds)))
            else:
                r = in_tmux(args.seconds, args.warmup, args.presses, root)
                if args.replay_seconds > 0:
                    r.update(in_tmux(args.replay_seconds, args.warmup, args.presses, root, replay=True))
            rows.append((k + 1, who if root is None else str(root), r))
            if args.runs == 1 and not args.compare:
                report(r, mode)
                if not all(verdicts([r])):
                    sys.exit(1)
                return
            print(f"run {k + 1} {rows[-1][1]:<12} p50 {r['key_p50_ms']:6.1f}  p99 {r['key_p99_ms']:6.1f}  "
                  f"max {r['key_max_ms']:6.1f} ms over {r['key_presses']:.0f} presses  CPU {r['cpu_pct']:4.1f} %  "
                  f"log lag max {r['log_lag_max_ms']:.0f} ms  replay {r.get('replay_lag_max_ms', -1):.0f} ms  "
                  f"load {r['load']:.2f}", flush=True)
    print(f"\nkey -> screen ({mode}, firehose, a press every 0.15-0.35 s; goal p99 <= 100 ms)")
    print(f"{'run':>3} {'cockpit':<14} {'presses':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'CPU %':>6} "
          f"{'log lag':>8} {'replay':>7} {'load':>5}")
    for k, who, r in rows:
        print(f"{k:>3} {who[-14:]:<14} {r['key_presses']:>7.0f} {r['key_p50_ms']:>7.1f} {r['key_p99_ms']:>7.1f} "
              f"{r['key_max_ms']:>7.1f} {r['cpu_pct']:>6.1f} {r['log_lag_max_ms']:>8.0f} "
              f"{r.get('replay_lag_max_ms', -1):>7.0f} {r['load']:>5.2f}")
    print("(log lag, replay: the worst line's ms from published to painted; goal <= 1000)")
    if not all(verdicts([r for _, who, r in rows if who == "this"])):
        sys.exit(1)


if __name__ == "__main__":
    main()
