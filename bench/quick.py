"""The quick benchmarks in one command, under 5 minutes: each figure beside its goal, PASS or FAIL (issue 33).

Run: .venv/bin/python bench/quick.py [--only NAME,...] [--list]

Runs each fast benchmark with short settings, one at a time (so none measures another's load), as a
subprocess with its own timeout, and reads the ``PASS|FAIL  name: figure  (goal: ...)`` lines each prints
(``benchutil.verdict``).  Prints them as one table with the load average before and after, and exits 1 when
any goal failed or a benchmark did not finish (a crash or a timeout is a FAIL: a regression shows the day
it happens).  Short settings make the figures noisier than a full run's; a FAIL here is worth a full run.

Left out (minutes each, or hardware this box may not have): bench_cockpit_soak, bench_cockpit_memory,
bench_fleet_cpu at 8 hosts, bench_replay_memory (builds a 200 MB recording), bench_report_causes (an hour's
recording), bench_agreement and bench_client's throughput (SGLang's bench_serving in its own venv),
attribution_accuracy, bench_tune, calibrate_sim, bench_nvml_real (a GPU host).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUDGET_S = 290.0
"""The whole run's wall-clock budget: a bench that would not fit in what is left is skipped (and said)."""


@dataclass(frozen=True)
class Quick:
    script: str
    args: tuple[str, ...]
    timeout_s: float


QUICK: tuple[Quick, ...] = (
    Quick("bench_logparse.py", ("--lines", "30000", "--worst", "3"), 60),
    Quick("bench_sse_chunk.py", (), 40),
    Quick("bench_profiles.py", (), 30),
    Quick("house_counts.py", (), 30),
    Quick("spec_model_table.py", ("--levels", "1,8"), 30),
    Quick("bench_fuzz.py", ("--cases", "1500"), 60),
    Quick("bench_export.py", ("--samples", "4000"), 45),
    Quick("bench_agent.py", ("--window", "4", "--intervals", "0.25", "--runs", "2", "--gpus", "8", "16"), 75),
    Quick("hosts.py", ("--runs", "30", "--lines", "20000"), 45),
    Quick("bench_recording.py", ("--size-only", "--first-use-minutes", "3"), 60),
    Quick("sim_streams.py", ("--concurrency", "64", "--tokens", "64", "--time-scale", "4"), 45),
    Quick("bench_gpu_panel.py", ("--frames", "30", "--gpus", "8", "64"), 45),
    Quick("bench_tui.py", ("--headless", "--seconds", "4", "--presses", "40", "--replay-seconds", "3",
                           "--warmup", "1"), 60),
    Quick("bench_swap.py", ("--swaps", "2", "--time-scale", "100"), 60),
    Quick("bench_fleet_cpu.py", ("--hosts", "1", "--window", "8"), 90),
)

_VERDICT = re.compile(r"^(PASS|FAIL)  (.+?): (.+)  \(goal: (.+?); load average [\d. ]+\)$")


@dataclass(frozen=True)
class Row:
    bench: str
    check: str
    figure: str
    goal: str
    result: str


def run_one(q: Quick) -> tuple[list[Row], float]:
    """The bench's verdict rows (a row of its own when it crashed, timed out or printed none), and its wall s."""
    name = q.script.removesuffix(".py")
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, str(HERE / q.script), *q.args], cwd=ROOT, capture_output=True,
                              text=True, timeout=q.timeout_s)
    except subprocess.TimeoutExpired:
        return [Row(name, "-", "-", f"finish in {q.timeout_s:g} s", "FAIL (timed out)")], time.monotonic() - t0
    wall = time.monotonic() - t0
    rows = [Row(name, m[2], m[3], m[4], m[1]) for m in map(_VERDICT.match, done.stdout.splitlines()) if m]
    if done.returncode != 0 and not any(r.result == "FAIL" for r in rows):
        said = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        rows.append(Row(name, "-", said[:70], "exit 0", f"FAIL (exit {done.returncode})"))
    elif not rows:
        rows.append(Row(name, "-", "no PASS/FAIL line printed", "a verdict", "FAIL"))
    return rows, wall


def table(rows: list[Row]) -> str:
    head = Row("bench", "check", "figure", "goal", "result")
    widths = [min(48, max(len(getattr(r, f)) for r in [head, *rows])) for f in ("bench", "check", "figure", "goal")]

    def line(r: Row) -> str:
        cells = [getattr(r, f)[:w].ljust(w) for f, w in zip(("bench", "check", "figure", "goal"), widths)]
        return "  ".join([*cells, r.result])

    return "\n".join([line(head), *(line(r) for r in rows)])


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated script names (without .py) to run")
    ap.add_argument("--list", action="store_true", help="print what would run, with its settings")
    args = ap.parse_args()
    chosen = [q for q in QUICK if not args.only or q.script.removesuffix(".py") in args.only.split(",")]
    if args.list:
        for q in chosen:
            print(f"{q.script:22} {' '.join(q.args):60} timeout {q.timeout_s:g} s")
        return
    print(f"bench/quick.py: {len(chosen)} benchmarks, one at a time; {load()} before", flush=True)
    start = time.monotonic()
    rows: list[Row] = []
    for q in chosen:
        left = BUDGET_S - (time.monotonic() - start)
        if left < q.timeout_s:
            rows.append(Row(q.script.removesuffix(".py"), "-", "-", "-", f"SKIPPED ({left:.0f} s of the budget left)"))
            continue
        got, wall = run_one(q)
        rows += got
        print(f"  {q.script:22} {wall:5.1f} s  " + ", ".join(r.result for r in got), flush=True)
    print()
    print(table(rows))
    failed = [r for r in rows if r.result.startswith("FAIL")]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} checks PASS (or skipped) in {time.monotonic() - start:.0f} s; "
          f"{load()} after")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
