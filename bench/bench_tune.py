"""The autopilot on the simulated host, end to end, as an operator would run it (issue 19).

Runs ``kimitui tune`` (the real command, in a fresh home) from ``ep8-tuned`` with the default changes
on a simulated host at ``--time-scale`` (default 10): once straight through, once SIGKILLed at a
random step and resumed with ``kimitui tune --resume``.  It prints, per step, the change, its
outcome, the objective's change and the root cause of a regression; the wall time of the whole tune
at that time-scale; the sweeps it needed against a full grid over the same changes (every
combination, one sweep each, timed at the tune's own mean sweep and swap); that both runs end the
same (same best, same outcome per step); and that the best serves afterwards (``kimitui status``).
Goals, PASS/FAIL each (exit 1 on FAIL): killed and resumed ends as the straight run does, the best
serving afterwards; the tune needs fewer sweeps than the full grid (the autopilot's reason to be).

    .venv/bin/python bench/bench_tune.py                       # ~10 min on 2 cores
    .venv/bin/python bench/bench_tune.py --time-scale 20 --levels 1,16,64 --max-tokens 256
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for var, sub in [("TMPDIR", "tmp"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CONFIG_HOME", "config")]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / sub)
    for var in ("KIMITUI_SIM_STATE", "KIMITUI_CONFIG", "KIMITUI_PROFILES", "KIMITUI_STATE_DIR"):
        env.pop(var, None)
    return env


def _kimitui(env: dict[str, str], *args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kimitui", *args], env=env, text=True, cwd=env["TMPDIR"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]


def _state(home: Path) -> dict | None:
    found = sorted((home / "state" / "kimitui" / "tune" / "sim").glob("*/state.json"))
    return json.loads(found[-1].read_text()) if found else None


def tune(home: Path, args: argparse.Namespace, kill_at: int | None) -> tuple[dict, float, list[str]]:
    env = _env(home)
    flags = ["tune", "--time-scale", str(args.time_scale), "--json"]
    if args.levels:
        flags += ["--levels", args.levels]
    if args.max_tokens:
        flags += ["--max-tokens", str(args.max_tokens)]
    t0 = time.monotonic()
    notes: list[str] = []
    proc = _kimitui(env, *flags)
    if kill_at is not None:
        while proc.poll() is None:
            st = _state(home)
            if st and len(st["steps"]) >= kill_at and st["steps"][kill_at - 1]["status"] == "running" \
                    and st["steps"][kill_at - 1]["phase"].startswith("sweeping"):
                time.sleep(random.uniform(0.5, 3.0))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                notes.append(f"killed (SIGKILL) while step {kill_at} swept, {time.monotonic() - t0:.0f} s in")
                proc = _kimitui(env, "tune", "--resume", "--json")
                break
            time.sleep(0.2)
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kimitui tune exited {proc.returncode}:\n{err[-3000:]}")
    report = json.loads(out.strip().splitlines()[-1])
    status = subprocess.run([sys.executable, "-m", "kimitui", "status", "--json"], env=env, text=True,
                            capture_output=True, cwd=env["TMPDIR"], timeout=120)
    report["serving_after"] = json.loads(status.stdout).get("profile")
    subprocess.run([sys.executable, "-m", "kimitui", "stop", "--yes"], env=env, capture_output=True,
                   cwd=env["TMPDIR"], timeout=120)
    return report, wall, notes


def _print(title: str, report: dict, wall: float, notes: list[str]) -> None:
    print(f"\n{title}")
    for n in notes:
        print(f"  {n}")
    for s in report["steps"]:
        print(f"  {s['index']}. {s['change']:<22} {s['status']:<9} {s['objective'] or '-'}")
        if s["reason"]:
            print(f"       {s['reason']}")
        if s["cause"]:
            print(f"       root cause: {s['cause']}")
    print(f"  best {report['best']} (serving afterwards: {report['serving_after']}); {report['sweeps']} sweeps, "
          f"{report['swaps']} swaps; wall {wall:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-scale", type=float, default=10.0)
    ap.add_argument("--levels", default="", help="the tune's levels (default: kimitui tune's own, 1,16,64,256)")
    ap.add_argument("--max-tokens", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="kimitui-tune-bench-") as tmp:
        straight, wall, _ = tune(Path(tmp) / "straight", args, None)
        _print(f"kimitui tune from ep8-tuned, the default changes, simulated host at time-scale {args.time_scale:g}",
               straight, wall, [])
        kill_at = random.randint(1, len(straight["steps"]))
        resumed, wall2, notes = tune(Path(tmp) / "killed", args, kill_at)
        _print("the same, killed at a random step and resumed", resumed, wall2, notes)
    steps = [s for s in straight["steps"] if s["seconds"]]
    per_sweep = sum(s["seconds"] for s in steps) / max(1, sum(len(s["sweeps"]) for s in steps))
    grid = 1
    families: dict[str, int] = {}
    for s in straight["steps"]:
        fam = "drafter" if "speculative_algorithm" in s["settings"] else next(iter(s["settings"]))
        families[fam] = families.get(fam, 0) + 1
    for k in families.values():
        grid *= k + 1
    same = ([(s["change"], s["status"]) for s in straight["steps"]] == [(s["change"], s["status"]) for s in resumed["steps"]]
            and straight["best"] == resumed["best"] == straight["serving_after"] == resumed["serving_after"])
    print(f"\nsweeps: the tune {straight['sweeps']}, a full grid over the same {len(straight['steps'])} changes {grid} "
          f"(every combination once; at this tune's {per_sweep:.0f} s per swept step, about {grid * per_sweep:.0f} s "
          f"against the tune's {wall:.0f} s)")
    print(f"killed and resumed ends the same: {'yes' if same else 'NO'}")
    from benchutil import exit_on, verdict  # bench/ is on sys.path (the script's own folder)

    exit_on([verdict("killed and resumed, the same end and the best serving", "yes" if same else "no", "yes", same),
             verdict("sweeps the tune needed", f"{straight['sweeps']} against a grid of {grid}", f"< {grid}",
                     straight["sweeps"] < grid)])


if __name__ == "__main__":
    main()
