"""The contract between the simulated SGLang server and the fake NVML.

The simulator (``kimitui.sim.server``) is the only thing that knows what the
"GPUs" are doing; the fake NVML module (``kimitui.sim.nvml``) only reads.  They
share a small JSON state file, rewritten atomically by the simulator a few
times per second, so the real agent code can run in another process (or over
SSH) against the fake NVML unchanged.

Location: ``$KIMITUI_SIM_STATE`` if set, else ``<state>/sim/gpus.json`` where
``<state>`` is the user's kimitui state dir (platformdirs' ``user_state_dir``:
``$XDG_STATE_HOME/kimitui``, by default ``~/.local/state/kimitui``), the same
place the launcher keeps the simulated host's run records.  It used to be
``/tmp/kimitui-sim-<uid>``, shared by everyone on a machine account; that old
place is ignored.
No file, or a file whose ``written_at`` is older than ``STALE_S``, or whose
server ``pid`` is dead, means no server runs: the GPUs are idle and empty.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import platformdirs
from pydantic import BaseModel, ConfigDict, Field

STALE_S = 5.0
NUM_GPUS = 8
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_MEMORY_MIB = 97_887.0  # 96 GB class card as NVML reports it
GPU_POWER_LIMIT_W = 600.0
"""The board power limit: the datasheet's 600 W (/work/shared/reference/gpu-anchors.md, section 3.5)."""
IDLE_POWER_W = 38.0
"""Modelled (no published figure in our references): an idle card with nothing in its memory, P8.
An idle GPU draws this, not 0 W, so the idle power measured before a sweep is a real card's kind of figure."""


class SimGpu(BaseModel):
    """What one simulated GPU is doing now."""

    model_config = ConfigDict(extra="ignore")

    index: int
    mem_used_mib: float = 0.0
    util_pct: float = 0.0
    mem_util_pct: float = 0.0
    power_w: float = IDLE_POWER_W
    temp_c: float = 32.0
    sm_clock_mhz: float = 180.0
    mem_clock_mhz: float = 405.0
    pcie_tx_kbps: float = 0.0
    pcie_rx_kbps: float = 0.0
    throttle_reasons: list[str] = Field(default_factory=list)
    pstate: int = 8
    pcie_gen: int = 5
    """The link's current PCIe generation and width: the board's maximum (Gen5 x16) unless a test degrades it."""
    pcie_width: int = 16
    pid: int | None = None
    """The 'scheduler' process using this GPU (the sim server's pid)."""
    proc_title: str | None = None
    """e.g. ``sglang::scheduler_TP3_EP3``."""
    lost: bool = False


class SimGpuState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    written_at: float
    pid: int | None = None
    profile: str | None = None
    phase: str = "idle"
    gpus: list[SimGpu]


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SIM_NAME_ENV = "KIMITUI_SIM_NAME"
"""Which simulated host this process belongs to, when one machine plays several (a fleet): each
has its own home ``<state>/kimitui/sim/hosts/NAME`` (GPU state, run records, swap lock).  Unset:
the embedded simulated host ``sim``, at ``<state>/kimitui/sim``."""


def sim_state_dir() -> Path:
    """The simulated host's home: under the user's own state dir, so two users never share a simulator."""
    base = Path(platformdirs.user_state_dir("kimitui")) / "sim"
    name = os.environ.get(SIM_NAME_ENV, "")
    return base / "hosts" / name if name and _SAFE_NAME.match(name) else base


def state_path() -> Path:
    env = os.environ.get("KIMITUI_SIM_STATE")
    if env:
        return Path(env)
    return sim_state_dir() / "gpus.json"


def shard_dir(main: Path | None = None) -> Path:
    """Where servers that own only some of the host's GPUs write their state: ``gpus.json.d/`` beside the
    host's ``gpus.json`` (one file per server; ``kimitui.sim.nvml`` merges them)."""
    main = main or state_path()
    return main.with_name(main.name + ".d")


def idle_state() -> SimGpuState:
    return SimGpuState(written_at=time.time(), gpus=[SimGpu(index=i) for i in range(NUM_GPUS)])


def write_state(state: SimGpuState, path: Path | None = None) -> None:
    """Atomically replace the state file."""
    path = path or state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(state.model_dump_json())
    os.replace(tmp, path)


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(path: Path | None = None, now: float | None = None) -> SimGpuState:
    """The current state, or idle GPUs when no live simulator writes it."""
    path = path or state_path()
    try:
        state = SimGpuState.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError):
        return idle_state()
    now = time.time() if now is None else now
    if now - state.written_at > STALE_S or not _alive(state.pid):
        return idle_state()
    return state
