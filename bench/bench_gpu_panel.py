"""GPU panel render cost from 8 to 128 GPUs: per frame and per GPU, with its growth (issue 16).

Run: .venv/bin/python bench/bench_gpu_panel.py [--frames 200] [--size 160x50]
For each fleet size the panel, mounted in the cockpit, draws ``--frames`` frames through the
screen path (``render_lines``: line cache, strips, Textual's styles) in two cases: every GPU's
figures changed (a live 4 Hz tick with busy GPUs: the worst case) and one GPU changed.
Goal: cost per GPU flat from 8 to 128 GPUs (growth per GPU near 1.0x: PASS at <= 1.3x for the largest fleet
against the smallest, all GPUs changed; exit 1 on FAIL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.geometry import Region  # noqa: E402

from kimitui.events import GpuCaps, GpuReading, GpuSample, GpuStatic  # noqa: E402
from kimitui.tui.app import KimituiApp  # noqa: E402
from kimitui.tui.widgets.gpu_panel import GpuPanel  # noqa: E402
from tests.support.fakecontrol import SUPPORTED, FakeController  # noqa: E402

from benchutil import exit_on, verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

GOAL_GROWTH = 1.3
"""The largest fleet's cost per GPU against the smallest's: flat, give or take what a busy machine adds."""


def sample(n: int, seq: int, rnd: random.Random, only: int | None = None) -> GpuSample:
    return GpuSample(t=seq, seq=seq, gpus=[GpuReading(
        index=i, util_pct=rnd.uniform(60, 99) if only in (None, i) else 90.0, mem_used_mib=87_000 + 10 * i,
        mem_total_mib=97_887, power_w=rnd.uniform(400, 590) if only in (None, i) else 450.0, power_limit_w=600,
        temp_c=rnd.uniform(60, 80) if only in (None, i) else 65.0, sm_clock_mhz=2400, pcie_tx_kbps=2e4,
        pcie_rx_kbps=1e4, throttle_reasons=[]) for i in range(n)])


async def measure(n: int, frames: int, size: tuple[int, int]) -> dict[str, float]:
    rnd = random.Random(n)
    caps = GpuCaps(t=0, gpus=[GpuStatic(index=i, uuid=f"GPU-{i}", name="GPU", memory_total_mib=97_887,
                                        power_limit_w=600, supported=list(SUPPORTED)) for i in range(n)])
    ctrl = FakeController(initial=[caps] + [sample(n, k, rnd) for k in range(130)])
    app = KimituiApp(ctrl, tick=None)
    out: dict[str, float] = {}
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause(0.05)
        app.pump()
        await pilot.pause(0.05)
        panel = app.query_one(GpuPanel)
        region = Region(0, 0, panel.size.width, panel.size.height)
        out["lines"] = panel.size.height
        for case, only in (("all", None), ("one", 3)):
            for k in range(130):  # warm-up: the history holds this case's values only
                app.model.apply([sample(n, 200 + k, rnd, only)])
                panel._set_dirty()
                panel.render_lines(region)
            times = []
            built0 = getattr(panel, "rows_built", 0)  # absent before the line cache (to compare with HEAD)
            for k in range(frames):
                app.model.apply([sample(n, 200 + k, rnd, only)])
                t0 = time.perf_counter()
                panel._set_dirty()  # what refresh() does: the next frame draws the panel anew
                panel.render_lines(region)
                times.append(time.perf_counter() - t0)
            out[f"{case}_ms"] = statistics.median(times) * 1000
            out[f"{case}_built"] = (getattr(panel, "rows_built", 0) - built0) / frames
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--size", default="160x50", help="terminal size WxH")
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    rows = [(n, asyncio.run(measure(n, args.frames, (w, h)))) for n in args.gpus]
    base = rows[0][1]["all_ms"] / rows[0][0]
    print(f"GPU panel render, median of {args.frames} frames, terminal {w}x{h} "
          f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    print(f"{'GPUs':>5} {'lines':>5} {'all changed ms':>15} {'us/GPU':>7} {'growth/GPU':>10} "
          f"{'one changed ms':>15} {'lines rebuilt':>13}")
    for n, r in rows:
        per = r["all_ms"] / n
        print(f"{n:>5} {r['lines']:>5.0f} {r['all_ms']:>15.2f} {per * 1000:>7.0f} {per / base:>9.2f}x "
              f"{r['one_ms']:>15.2f} {r['one_built']:>13.1f}")
    n, last = rows[-1]
    growth = last["all_ms"] / n / base
    exit_on([verdict(f"GPU panel cost per GPU, {n} vs {rows[0][0]} GPUs", f"{growth:.2f}x", f"<= {GOAL_GROWTH}x",
                     growth <= GOAL_GROWTH)])


if __name__ == "__main__":
    main()
