"""The autopilot as the cockpit shows it: a line for the header, rows for its screen (no Textual here)."""

from __future__ import annotations

from kimitui.analysis.sweep_eta import duration
from kimitui.events import TuneProgress, TuneStepView

ACTIVE = frozenset({"running", "paused"})
STATUS_STYLE = {"kept": "bold green", "reverted": "yellow", "failed": "bold red", "skipped": "dim",
                "running": "bold cyan", "pending": "dim"}


def tune_active(tp: TuneProgress | None) -> bool:
    return tp is not None and tp.status in ACTIVE


def tune_line(tp: TuneProgress) -> str:
    """``autopilot 3/5 moe_dense_tp_size 1: sweeping · best ep8-dflash · kept 1, reverted 2 · a: steer``."""
    n = len(tp.steps)
    done = [s for s in tp.steps if s.status in ("kept", "reverted", "failed", "skipped")]
    counts = ", ".join(f"{word} {k}" for word in ("kept", "reverted", "failed", "skipped")
                       if (k := sum(1 for s in done if s.status == word)))
    cur = tp.steps[tp.step - 1] if tp.step is not None and 0 < tp.step <= n else None
    if tp.status == "paused":
        where = "paused" + (f" after {cur.label}" if cur is not None else "")
    elif cur is not None:
        where = f"{len(done) + 1}/{n} {cur.label}: {cur.phase or 'starting'}"
    elif tp.status in ACTIVE:
        where = tp.phase or "measuring the start"
    else:
        where = tp.status + (f" ({tp.note})" if tp.note else "")
    parts = [f"autopilot {where}", f"best {tp.best}"] + ([counts] if counts else [])
    if tp.status in ACTIVE:
        parts.append("a: steer")
    return " · ".join(parts)


def step_rows(tp: TuneProgress) -> list[tuple[str, str, str, str, str, str]]:
    """(#, change, profile, outcome, objective, why) per step, the step under way marked."""
    rows = []
    for s in tp.steps:
        outcome = s.status if s.status != "running" else f"▶ {s.phase or 'running'}"
        rows.append((str(s.index), s.label, s.profile or "-", outcome, s.objective_change or "-", _why(s)))
    return rows


def _why(s: TuneStepView) -> str:
    if s.cause and s.status == "reverted":
        return f"{s.reason}; {s.cause}" if s.reason else s.cause
    return s.reason or ""


def summary(tp: TuneProgress) -> str:
    """The screen's title line."""
    objective = "peak aggregate tok/s" if tp.objective == "peak" else tp.objective
    return (f"Autopilot {tp.tune_id}: {tp.status}, from {tp.start}, best so far {tp.best} "
            f"(objective {objective}, {duration(tp.elapsed_s)} so far)")
