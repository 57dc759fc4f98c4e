"""Run the real GPU agent as a subprocess against the fake NVML, for tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kimitui.sim import gpustate

ROOT = Path(__file__).resolve().parents[2]


def write_busy_state(path: Path, *, pid: int | None = None, lost: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    """8 serving GPUs owned by ``pid`` (default: this process) with SGLang scheduler titles."""
    pid = os.getpid() if pid is None else pid
    gpus = [
        gpustate.SimGpu(
            index=i, mem_used_mib=85_000.0 + i, util_pct=90.0 + i, mem_util_pct=40.0, power_w=410.0 + i,
            temp_c=70.0 + i, sm_clock_mhz=2400.0, mem_clock_mhz=14000.0, pcie_tx_kbps=1000.0 * (i + 1),
            pcie_rx_kbps=2000.0 * (i + 1), throttle_reasons=["sw_power_cap"] if i == 5 else [], pstate=1,
            pid=pid, proc_title=f"sglang::scheduler_TP{i}_EP{i}", lost=i in lost,
        )
        for i in range(gpustate.NUM_GPUS)
    ]
    # The simulator rewrites this file a few times a second; a test writes it once, so it dates it
    # ahead to stay "fresh" (gpustate treats a file older than STALE_S as a dead simulator).
    gpustate.write_state(gpustate.SimGpuState(written_at=time.time() + 3600, pid=pid, profile="t", phase="serving",
                                              gpus=gpus), path)


def start_agent(*args: str, scenario: str = "", state: Path | None = None, stdin: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, "KIMITUI_FAKE_NVML": scenario, "PYTHONPATH": str(ROOT)}
    if state is not None:
        env["KIMITUI_SIM_STATE"] = str(state)
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "kimitui.telemetry.agent", "--backend", "fake", *args],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, cwd=ROOT,
    )


def frames(proc: subprocess.Popen[str], *, until: str = "bye", limit: int = 1000, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Read frames until one of type ``until`` (inclusive) or EOF."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while len(out) < limit and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        frame = json.loads(line)
        out.append(frame)
        if frame["type"] == until:
            break
    return out


def run_agent(*args: str, scenario: str = "", state: Path | None = None, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Run to ``--count`` and return every frame; stdin stays open (a closed stdin means 'exit')."""
    proc = start_agent(*args, scenario=scenario, state=state)
    try:
        got = frames(proc, timeout=timeout)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return got
