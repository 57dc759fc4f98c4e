"""A tune's plan and progress, on disk after every phase, so an interrupted tune resumes where it was.

One directory per tune under the state dir (``tune/<host>/<id>/``): ``state.json`` (this model,
written atomically), one recording per measured sweep (``step-03-r1.jsonl.gz``), the report and the
winner's profile file.  A step's record says which phase it reached; a resumed tune redoes a step
that had not been decided, from its swap.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kimitui.analysis.cost import CostRates
from kimitui.events import SweepSpec
from kimitui.paths import state_dir
from kimitui.private_files import DIR_MODE, private_dir, write_private

StepStatus = Literal["pending", "running", "kept", "reverted", "failed", "skipped"]
TuneStatus = Literal["planned", "running", "paused", "finished", "stopped", "interrupted", "failed"]


class TuneStateError(ValueError):
    """A state file that cannot be read: its path and what is wrong."""


class Candidate(BaseModel):
    """One change to try on top of the best profile so far: a knob, or one knob family (a drafter)."""

    model_config = ConfigDict(extra="forbid")

    label: str
    """How the operator reads it: ``enable_eplb true``, ``DFlash drafter``."""
    family: str
    settings: dict[str, Any]
    """Knob -> value, as a profile file sets them (env as ``env.NAME``)."""
    source: str = ""
    """Where it came from: ``profile ep8-eplb``, ``the seeds' next experiment``, ``--change``."""


class Measured(BaseModel):
    """One measured sweep: its recording and id, and its headline figures."""

    model_config = ConfigDict(extra="forbid")

    path: str
    sweep_id: str
    peak_tok_s: float | None = None
    peak_c: int | None = None


class StepRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    candidate: Candidate
    status: StepStatus = "pending"
    phase: str = ""
    """Where a running step is: ``swapping``, ``sweeping``, ``judging``, ``reverting``."""
    profile: str | None = None
    """The profile the step ran (a variant of ``against``)."""
    against: str | None = None
    """The best profile when the step started: what it was compared with."""
    runs: list[Measured] = Field(default_factory=list)
    verdict: str = ""
    """``improved``, ``regressed``, ``same``, ``unsure``, ``not_comparable`` (the comparison's overall)."""
    objective_change: str = ""
    """The objective's figure, best -> candidate, with its noise: ``peak 1538 -> 862 tok/s (-44 % ±3 %)``."""
    level_lines: list[str] = Field(default_factory=list)
    """Per level, what changed (``C=1 aggregate tok/s +22 % (improved, ±4 %)``)."""
    cause: str = ""
    """Why a regression regressed (the comparison's explanation), when the causes say."""
    reason: str = ""
    """Why it was kept, reverted, failed or skipped, in one sentence."""
    started: float | None = None
    ended: float | None = None


class TunePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: str
    """The starting profile (the host's baseline by default)."""
    candidates: list[Candidate]
    skipped: list[str] = Field(default_factory=list)
    """Changes not tried, each with why (``num_continuous_decode_steps 4: has no effect in this SGLang``)."""
    workload: SweepSpec
    objective: str = "peak"
    """``peak`` (peak aggregate tok/s), ``level:C`` (aggregate tok/s at C), ``capacity`` (C at the SLO),
    ``tokens_per_kj`` (the most tokens per kJ of GPU energy over the levels), ``cost_per_mtok`` (the lowest cost
    per million tokens at ``cost``)."""
    cost: dict[str, float | str] | None = None
    """The config's ``[cost]`` when the plan was made (``gpu_hour``, ``kwh``, ``currency``): a resumed tune prices
    its steps as its first did."""
    slo: str | None = None
    repeat_limit: int = 3
    """Sweeps of one candidate at most, while its verdict against the best is not beyond noise."""
    max_steps: int | None = None
    time_budget_s: float | None = None
    sim_time_scale: float | None = None

    def cost_rates(self) -> CostRates | None:
        """The prices of ``cost`` (None: none recorded)."""
        if not self.cost:
            return None
        gpu, kwh, cur = self.cost.get("gpu_hour"), self.cost.get("kwh"), self.cost.get("currency", "")
        return CostRates(float(gpu) if gpu is not None else None, float(kwh) if kwh is not None else None, str(cur))


class TuneState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tune_id: str
    host: str
    plan: TunePlan
    status: TuneStatus = "planned"
    best: str = ""
    best_settings: dict[str, Any] = Field(default_factory=dict)
    """What the best profile changes from the start (the winner file's settings)."""
    best_runs: list[Measured] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    started: float = Field(default_factory=time.time)
    elapsed_s: float = 0.0
    """Time spent running (summed over resumes)."""
    sweeps: int = 0
    swaps: int = 0
    note: str = ""
    """How it ended, or why it stopped."""
    winner_path: str | None = None
    report_path: str | None = None

    @property
    def current(self) -> StepRecord | None:
        return next((s for s in self.steps if s.status in ("pending", "running")), None)


def tunes_dir(host: str) -> Path:
    return state_dir() / "tune" / host


def new_tune_dir(host: str) -> tuple[str, Path]:
    """A fresh directory for a tune, named by its start time (``20261205-174200``)."""
    base = tunes_dir(host)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(100):
        tune_id = stamp if n == 0 else f"{stamp}-{n}"
        path = base / tune_id
        try:
            private_dir(base)
            path.mkdir(mode=DIR_MODE)
            os.chmod(path, DIR_MODE)
            return tune_id, path
        except FileExistsError:
            continue
    raise OSError(f"cannot make a tune directory under {base}")


def save(state: TuneState, directory: Path) -> Path:
    """Write ``state.json`` atomically (a crash leaves the old or the new file, never half of one), 0600."""
    return write_private(directory / "state.json", state.model_dump_json(indent=1))


def load(directory: Path) -> TuneState:
    path = directory / "state.json"
    try:
        return TuneState.model_validate_json(path.read_text())
    except OSError as exc:
        raise TuneStateError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise TuneStateError(f"{path}: {where or 'the file'}: {first.get('msg')}") from exc


def resumable(host: str, tune_id: str | None = None) -> Path | None:
    """The tune to resume on ``host``: ``tune_id``'s, else the newest not finished."""
    base = tunes_dir(host)
    if tune_id is not None:
        return base / tune_id if (base / tune_id / "state.json").exists() else None
    found: list[tuple[str, Path]] = []
    for d in base.glob("*/state.json") if base.exists() else []:
        try:
            status = json.loads(d.read_text()).get("status")
        except (OSError, ValueError):
            continue
        if status not in ("finished", "stopped"):
            found.append((d.parent.name, d.parent))
    return max(found)[1] if found else None
