"""The GPU agent's real code against this machine's real NVML for 60 s: is every field it reports right?

Run on a GPU host: .venv/bin/python bench/bench_nvml_real.py [--seconds 60] [--interval 0.25] [--json OUT]

The agent (kimitui/telemetry/agent.py) is what kimitui ships to a GPU host and reads every
tick from; everywhere else it runs over kimitui's fake ``libnvidia-ml`` (kimitui/sim/nvml.py),
which shares its author's reading of NVML.  This runs the agent itself, as kimitui does
(``python -m kimitui.telemetry.agent --backend pynvml``, its JSON lines on stdout), and
checks what it streams against NVML read directly by this process:

- every field of every GPU is either announced in ``caps.supported`` and present in (nearly)
  every tick, or listed in ``caps.unsupported`` with NVML's reason: none silently missing,
  none reported without being announced;
- each value lies in its range, in its unit (MiB, W, degrees C, MHz, KB/s, %): memory total
  equal to NVML's, used <= total; power near NVML's milliwatts / 1000 and the limit equal to
  the enforced limit; clocks <= the GPU's maximum clocks and near NVML's own reading; PCIe
  generation and width <= the link's maximum;
- the clock-event reasons: every name the agent sends is a known reason, and every bit NVML
  sets (read here once a second) has a name in the agent's table, so no reason is dropped;
- ticks arrive at the asked interval with consecutive ``seq``, process lists come, no
  ``error`` frame, a ``bye`` at the end and exit status 0.

Prints one table row per GPU and field (samples, min / median / max, the check) and
PASS or FAIL (exit 0 / 1).  Without an NVIDIA GPU (no pynvml, no driver, no device) it
says so in one line and exits 2.  ``--fake`` runs the same checks over the fake driver of
the simulated host (for checking this script on a machine without a GPU; not a result).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kimitui.telemetry.agent import CLOCK_REASON_BITS, MIB, NvmlBackend  # noqa: E402

EXIT_PASS, EXIT_FAIL, EXIT_NO_GPU = 0, 1, 2
PRESENCE = 0.95
"""A supported field must be in at least this share of a GPU's ticks."""
NEAR = 0.35
"""Agent median within this fraction of the direct reading's median (both move: a unit error is x1000)."""

UNITS = {"util_pct": "%", "mem_util_pct": "%", "mem_used_mib": "MiB", "mem_total_mib": "MiB", "power_w": "W",
         "power_limit_w": "W", "temp_c": "°C", "sm_clock_mhz": "MHz", "mem_clock_mhz": "MHz",
         "throttle_reasons": "names", "pstate": "P", "pcie_gen": "gen", "pcie_width": "lanes",
         "pcie_tx_kbps": "KB/s", "pcie_rx_kbps": "KB/s"}
EXPECTED = [f for fields in NvmlBackend.GROUP_FIELDS.values() for f in fields] + [
    "power_limit_w", "pcie_tx_kbps", "pcie_rx_kbps"]
"""Every field the agent can report for a GPU (its own table, plus the static limit and the PCIe pair)."""


def gpu_absent(fake: bool) -> str | None:
    """Why this machine has no NVIDIA GPU to check; None when NVML sees at least one."""
    if fake:
        return None
    try:
        import pynvml
    except ImportError as exc:
        return f"pynvml is not installed ({exc})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded...
        return f"NVML does not start ({type(exc).__name__}: {exc})"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()
    return None if count else "NVML sees no GPU"


@dataclass
class Reference:
    """What this process reads from NVML itself, beside the agent."""

    mem_total_mib: dict[int, float] = field(default_factory=dict)
    power_limit_w: dict[int, float] = field(default_factory=dict)
    max_sm_mhz: dict[int, float] = field(default_factory=dict)
    max_mem_mhz: dict[int, float] = field(default_factory=dict)
    max_pcie_gen: dict[int, int] = field(default_factory=dict)
    max_pcie_width: dict[int, int] = field(default_factory=dict)
    power_w: dict[int, list[float]] = field(default_factory=dict)
    sm_clock_mhz: dict[int, list[float]] = field(default_factory=dict)
    reason_bits: dict[int, int] = field(default_factory=dict)
    """Every clock-event reason bit NVML set during the run (OR of the masks read)."""
    errors: list[str] = field(default_factory=list)


def _try(ref: Reference, what: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # NotSupported on this board: the agent must then say unsupported
        ref.errors.append(f"{what}: {type(exc).__name__}")
        return None


def read_static(nv: Any, ref: Reference) -> list[Any]:
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    for i, h in enumerate(handles):
        mem = _try(ref, f"GPU {i} memory", nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            ref.mem_total_mib[i] = mem.total / MIB
        for store, what, fn, args, scale in (
            (ref.power_limit_w, "power limit", nv.nvmlDeviceGetEnforcedPowerLimit, (h,), 1000.0),
            (ref.max_sm_mhz, "max SM clock", nv.nvmlDeviceGetMaxClockInfo, (h, nv.NVML_CLOCK_SM), 1.0),
            (ref.max_mem_mhz, "max memory clock", nv.nvmlDeviceGetMaxClockInfo, (h, nv.NVML_CLOCK_MEM), 1.0),
        ):
            value = _try(ref, f"GPU {i} {what}", fn, *args)
            if value is not None:
                store[i] = value / scale
        gen = _try(ref, f"GPU {i} max PCIe gen", nv.nvmlDeviceGetMaxPcieLinkGeneration, h)
        width = _try(ref, f"GPU {i} max PCIe width", nv.nvmlDeviceGetMaxPcieLinkWidth, h)
        if gen is not None:
            ref.max_pcie_gen[i] = int(gen)
        if width is not None:
            ref.max_pcie_width[i] = int(width)
    return handles


def sample_loop(nv: Any, handles: list[Any], ref: Reference, stop: threading.Event) -> None:
    """Once a second: power, SM clock and the raw clock-event mask of every GPU, read directly."""
    reasons = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
               or nv.nvmlDeviceGetCurrentClocksThrottleReasons)
    while not stop.wait(1.0):
        for i, h in enumerate(handles):
            for store, fn, args, scale in ((ref.power_w, nv.nvmlDeviceGetPowerUsage, (h,), 1000.0),
                                           (ref.sm_clock_mhz, nv.nvmlDeviceGetClockInfo, (h, nv.NVML_CLOCK_SM), 1.0)):
                try:
                    store.setdefault(i, []).append(fn(*args) / scale)
                except Exception:
                    pass
            try:
                ref.reason_bits[i] = ref.reason_bits.get(i, 0) | int(reasons(h))
            except Exception:
                pass


def run_agent(seconds: float, interval: float, fake: bool,
              env: dict[str, str]) -> tuple[list[dict[str, Any]], int, str]:
    """The agent as kimitui runs it, for ``seconds``; every frame it printed, its exit status, its stderr."""
    count = max(1, round(seconds / interval))
    argv = [sys.executable, "-u", "-m", "kimitui.telemetry.agent", "--backend", "fake" if fake else "pynvml",
            "--no-stdin", "--interval", str(interval), "--count", str(count)]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=seconds * 3 + 60)
    frames = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return frames, proc.returncode, proc.stderr


@dataclass
class Row:
    gpu: int
    name: str
    unit: str
    seen: str
    low: str
    mid: str
    high: str
    verdict: str
    ok: bool


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}"


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= NEAR * max(abs(b), 1.0)


def check_field(i: int, name: str, values: list[Any], ticks: int, ref: Reference) -> Row:
    """One GPU's one field over the run."""
    unit = UNITS.get(name, "")
    seen = f"{len(values)}/{ticks}"
    if len(values) < PRESENCE * ticks:
        return Row(i, name, unit, seen, "", "", "", f"announced but in only {len(values)} of {ticks} ticks", False)
    if name == "throttle_reasons":
        names = sorted({n for v in values for n in (v or [])})
        bad = [n for n in names if n not in CLOCK_REASON_BITS]
        return Row(i, name, unit, seen, "", ",".join(names) or "(none)", "",
                   f"unknown names {bad}" if bad else "known names", not bad)
    if name == "pstate":
        bad_p = [v for v in values if v is not None and not (isinstance(v, int) and 0 <= v <= 15)]
        states = [v for v in values if isinstance(v, int)]
        return Row(i, name, unit, seen, f"P{min(states)}" if states else "-", "", f"P{max(states)}" if states else "-",
                   f"out of P0..P15: {bad_p[:3]}" if bad_p else "P0..P15 or unknown", not bad_p)
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) != len(values):
        return Row(i, name, unit, seen, "", "", "", "a value that is not a number", False)
    low, mid, high = min(nums), statistics.median(nums), max(nums)
    problems: list[str] = []
    bounds: dict[str, tuple[float, float | None]] = {
        "util_pct": (0, 100), "mem_util_pct": (0, 100), "mem_used_mib": (0, ref.mem_total_mib.get(i)),
        "mem_total_mib": (1024, 1 << 22), "power_w": (1, 2 * ref.power_limit_w.get(i, 1000)),
        "power_limit_w": (25, 3000), "temp_c": (5, 110), "sm_clock_mhz": (0, ref.max_sm_mhz.get(i)),
        "mem_clock_mhz": (0, ref.max_mem_mhz.get(i)), "pcie_gen": (1, ref.max_pcie_gen.get(i, 6)),
        "pcie_width": (1, ref.max_pcie_width.get(i, 32)), "pcie_tx_kbps": (0, 2.6e8), "pcie_rx_kbps": (0, 2.6e8),
    }
    lo, hi = bounds.get(name, (float("-inf"), None))
    if low < lo or (hi is not None and high > hi + 1e-6):
        problems.append(f"outside {_fmt(lo)}..{_fmt(hi) if hi is not None else 'inf'}")
    for key, direct in (("mem_total_mib", ref.mem_total_mib.get(i)), ("power_limit_w", ref.power_limit_w.get(i))):
        if name == key and direct is not None and abs(mid - direct) > max(1.0, 0.02 * direct):
            problems.append(f"NVML says {_fmt(direct)}")
    for key, series in (("power_w", ref.power_w.get(i)), ("sm_clock_mhz", ref.sm_clock_mhz.get(i))):
        if name == key and series and not _near(mid, statistics.median(series)):
            problems.append(f"NVML's median {_fmt(statistics.median(series))}")
    verdict = "; ".join(problems) if problems else ("in range" + (", matches NVML" if name in (
        "mem_total_mib", "power_limit_w", "power_w", "sm_clock_mhz") else ""))
    return Row(i, name, unit, seen, _fmt(low), _fmt(mid), _fmt(high), verdict, not problems)


def check(frames: list[dict[str, Any]], status: int, ref: Reference, seconds: float,
          interval: float) -> tuple[list[Row], list[str]]:
    """(a row per GPU and field, the run-level failures)."""
    failures: list[str] = []
    kinds = [f.get("type") for f in frames]
    caps = next((f for f in frames if f.get("type") == "caps"), None)
    if caps is None:
        return [], [f"no caps frame (exit {status}); frames: {kinds[:5]}"]
    for key in ("driver", "nvml_version", "cuda_version"):
        if not caps.get(key):
            failures.append(f"caps.{key} is empty")
    ticks = [f for f in frames if f.get("type") == "tick"]
    seqs = [t["seq"] for t in ticks]
    if seqs != list(range(len(seqs))):
        failures.append("tick seq not consecutive from 0")
    if len(ticks) < 0.8 * seconds / interval:
        failures.append(f"{len(ticks)} ticks in the run, expected about {seconds / interval:.0f}")
    if ticks:
        span = ticks[-1]["t"] - ticks[0]["t"]
        if len(ticks) > 1 and span > 1.5 * seconds:
            failures.append(f"ticks spread over {span:.0f} s for a {seconds:.0f} s run")
    if not any(k == "procs" for k in kinds):
        failures.append("no procs frame")
    failures += [f"agent error: {f.get('message')} {f.get('detail', '')}".strip() for f in frames
                 if f.get("type") == "error"]
    if kinds[-1:] != ["bye"]:
        failures.append("no bye frame at the end")
    if status != 0:
        failures.append(f"agent exit status {status}")
    rows: list[Row] = []
    for gpu in caps["gpus"]:
        i = gpu["index"]
        supported, unsupported = set(gpu.get("supported", [])), dict(gpu.get("unsupported", {}))
        mine = [row for t in ticks for row in t["gpus"] if row["index"] == i]
        for name in EXPECTED:
            if name in supported:
                rows.append(check_field(i, name, [r[name] for r in mine if name in r], len(mine), ref))
            elif name in unsupported:
                rows.append(Row(i, name, UNITS.get(name, ""), "-", "", "", "", f"unsupported: {unsupported[name]}",
                                True))
            else:
                rows.append(Row(i, name, UNITS.get(name, ""), "-", "", "", "", "SILENTLY MISSING", False))
        stray = sorted({k for r in mine for k in r} - supported - {"index"})
        if stray:
            failures.append(f"GPU {i}: fields reported but not announced in caps: {stray}")
        known = 0
        for bit in CLOCK_REASON_BITS.values():
            known |= bit
        undecoded = ref.reason_bits.get(i, 0) & ~known
        if undecoded:
            failures.append(f"GPU {i}: NVML set clock-event bits the agent cannot name: {undecoded:#x}")
        decoded = sorted(n for n, b in CLOCK_REASON_BITS.items() if ref.reason_bits.get(i, 0) & b)
        rows.append(Row(i, "reason bits (direct)", "mask", "-", "", f"{ref.reason_bits.get(i, 0):#x}", "",
                        ("decoded: " + ",".join(decoded)) if decoded else "no bit set", not undecoded))
    return rows, failures


def table(rows: list[Row]) -> str:
    head = ("GPU", "field", "unit", "seen", "min", "median", "max", "check")
    cells = [head] + [(str(r.gpu), r.name, r.unit, r.seen, r.low, r.mid, r.high,
                       ("ok   " if r.ok else "FAIL ") + r.verdict) for r in rows]
    widths = [max(len(c[k]) for c in cells) for k in range(len(head) - 1)]
    return "\n".join("  ".join(c[k].ljust(widths[k]) for k in range(len(head) - 1)) + "  " + c[-1] for c in cells)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=0.25, help="the agent's tick interval (its default)")
    ap.add_argument("--fake", action="store_true", help="the simulated host's fake NVML (checks this script only)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows and failures here")
    args = ap.parse_args(argv)
    absent = gpu_absent(args.fake)
    if absent:
        print(f"bench_nvml_real: no NVIDIA GPU on this machine ({absent}); nothing to check")
        return EXIT_NO_GPU
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        if args.fake:
            from kimitui.sim import nvml as fake_nvml
            from tests.support.agentproc import write_busy_state

            state = Path(tmp) / "gpus.json"
            write_busy_state(state)
            env["KIMITUI_SIM_STATE"] = os.environ["KIMITUI_SIM_STATE"] = str(state)
            fake_nvml.install()
        import pynvml

        pynvml.nvmlInit()
        ref = Reference()
        handles = read_static(pynvml, ref)
        stop = threading.Event()
        sampler = threading.Thread(target=sample_loop, args=(pynvml, handles, ref, stop), daemon=True)
        sampler.start()
        t0 = time.monotonic()
        frames, status, stderr = run_agent(args.seconds, args.interval, args.fake, env)
        stop.set()
        sampler.join(5)
        pynvml.nvmlShutdown()
    rows, failures = check(frames, status, ref, args.seconds, args.interval)
    caps = next((f for f in frames if f.get("type") == "caps"), {})
    print(f"{'FAKE NVML (not a result) ' if args.fake else ''}agent over {caps.get('backend')}: "
          f"driver {caps.get('driver')}, NVML {caps.get('nvml_version')}, CUDA {caps.get('cuda_version')}, "
          f"{len(caps.get('gpus', []))} GPU(s), {sum(1 for f in frames if f.get('type') == 'tick')} ticks in "
          f"{time.monotonic() - t0:.0f} s; features {caps.get('features')}")
    for gpu in caps.get("gpus", []):
        print(f"  GPU {gpu['index']}: {gpu.get('name')} {gpu.get('uuid')}")
    print(table(rows))
    if ref.errors:
        print("direct NVML reads that failed here (the bounds they give go unchecked): " + "; ".join(ref.errors))
    bad_rows = [r for r in rows if not r.ok]
    for f in failures:
        print(f"FAIL {f}")
    if stderr.strip():
        print("agent stderr:\n" + stderr[-2000:])
    ok = not failures and not bad_rows and bool(rows)
    if args.json:
        args.json.write_text(json.dumps({"pass": ok, "failures": failures, "rows": [r.__dict__ for r in rows],
                                         "caps": caps}, indent=1))
    print("PASS" if ok else f"FAIL ({len(bad_rows)} field(s), {len(failures)} run-level)")
    return EXIT_PASS if ok else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
