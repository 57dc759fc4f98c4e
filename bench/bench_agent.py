"""GPU agent CPU cost with the fake NVML backend, 8 busy GPUs (goal: <= 0.5 % of one core at 4 Hz).

Run: .venv/bin/python bench/bench_agent.py [--window 10] [--intervals 0.25 0.1]
For each interval: start the real agent (fake backend, PCIe calls blocking 20 ms as on
hardware), let it warm up, then read its CPU time from /proc/PID/task/*/schedstat over a
fixed wall window (threads' schedstat), while a reader drains its stdout and a writer keeps the sim state fresh.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests.support.agentproc import start_agent, write_busy_state  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread, from /proc/PID/task/*/schedstat (ns; finer than the 10 ms utime tick)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return total / 1e9


def measure(interval: float, window: float, state: Path) -> tuple[float, int]:
    proc = start_agent("--interval", str(interval), state=state, scenario="pcie_delay=0.02")
    frames = 0
    stop = threading.Event()

    def drain() -> None:
        nonlocal frames
        assert proc.stdout is not None
        for _ in proc.stdout:
            frames += 1

    def keep_state_fresh() -> None:
        while not stop.wait(1.0):
            write_busy_state(state)

    threading.Thread(target=drain, daemon=True).start()
    threading.Thread(target=keep_state_fresh, daemon=True).start()
    try:
        time.sleep(2.0)  # startup (imports, probe) is not steady-state cost
        c0, f0, t0 = cpu_seconds(proc.pid), frames, time.monotonic()
        time.sleep(window)
        c1, f1, t1 = cpu_seconds(proc.pid), frames, time.monotonic()
    finally:
        stop.set()
        proc.kill()
        proc.wait()
    return (c1 - c0) / (t1 - t0) * 100.0, f1 - f0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--window", type=float, default=10.0, help="measurement window, seconds")
    ap.add_argument("--intervals", type=float, nargs="+", default=[0.25, 0.1])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "gpus.json"
        write_busy_state(state)
        for interval in args.intervals:
            pct, frames = measure(interval, args.window, state)
            print(f"agent --backend fake, 8 GPUs, --interval {interval}: {pct:.2f} % of one core "
                  f"({frames} frames in {args.window:.0f} s)")


if __name__ == "__main__":
    main()
