"""A tune's report (markdown and JSON, in its folder) and its winner: a profile file extending the start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kimitui.analysis.sweep_eta import duration
from kimitui.profiles import ProfileError, load_profile
from kimitui.private_files import write_private
from kimitui.profiles.diff import show_value
from kimitui.tune.state import TuneState


def winner(state: TuneState, directory: Path, dirs: list[str]) -> Path | None:
    """Copy the best profile's file (it ``extends`` the start with every kept change) into the tune's
    folder as ``winner.toml``; None when the start stayed best."""
    if not state.best or state.best == state.plan.start:
        return None
    try:
        source = load_profile(state.best, dirs).source_path
    except (ProfileError, OSError):
        return None
    if source is None:
        return None
    return write_private(directory / "winner.toml", source.read_bytes())


def to_json(state: TuneState) -> dict[str, Any]:
    return {
        "tune_id": state.tune_id, "host": state.host, "status": state.status, "note": state.note,
        "start": state.plan.start, "best": state.best, "best_changes": state.best_settings,
        "objective": state.plan.objective, "slo": state.plan.slo,
        "workload": state.plan.workload.model_dump(mode="json", exclude={"url"}),
        "elapsed_s": round(state.elapsed_s, 1), "sweeps": state.sweeps, "swaps": state.swaps,
        "skipped": state.plan.skipped, "winner_path": state.winner_path,
        "steps": [{"index": s.index, "change": s.candidate.label, "settings": s.candidate.settings,
                   "source": s.candidate.source, "profile": s.profile, "against": s.against, "status": s.status,
                   "verdict": s.verdict, "objective": s.objective_change, "levels": s.level_lines,
                   "cause": s.cause, "reason": s.reason, "sweeps": [m.model_dump() for m in s.runs],
                   "seconds": round(s.ended - s.started, 1) if s.started and s.ended else None}
                  for s in state.steps],
    }


def to_markdown(state: TuneState) -> str:
    plan = state.plan
    out = [f"# kimitui tune {state.tune_id} on {state.host}", "",
           f"- start: `{plan.start}`; best: **`{state.best}`**" + (" (the start stayed best)" if state.best == plan.start else ""),
           f"- objective: {plan.objective}" + (f" at {plan.slo}" if plan.slo else ""),
           f"- workload: C={','.join(map(str, plan.workload.levels))}, {plan.workload.mode}, "
           f"{plan.workload.max_tokens} tokens, prompts {plan.workload.prompts}",
           f"- {state.status}" + (f": {state.note}" if state.note else "")
           + f"; {duration(state.elapsed_s)}, {state.sweeps} sweeps, {state.swaps} swaps", ""]
    if state.best_settings:
        out += ["## The winner against the start", ""]
        out += [f"- `{k}`: {show_value(v)}" for k, v in state.best_settings.items()]
        if state.winner_path:
            out += ["", f"Profile file: `{state.winner_path}` (extends `{plan.start}`)."]
        out.append("")
    if plan.sim_time_scale:
        out += [f"On the simulated host at time-scale {plan.sim_time_scale:g}: every tok/s is {plan.sim_time_scale:g} x "
                "the modelled host's (ratios and verdicts are not affected).", ""]
    out += ["## Steps", "", "| # | change | profile | against | outcome | objective | why |", "|---|---|---|---|---|---|---|"]
    for s in state.steps:
        out.append(f"| {s.index} | {s.candidate.label} | `{s.profile or '-'}` | `{s.against or '-'}` | {s.status} | "
                   f"{s.objective_change or '-'} | {(s.reason or '-').replace('|', '/')} |")
    out.append("")
    for s in state.steps:
        if not s.level_lines and not s.reason:
            continue
        out += [f"### {s.index}. {s.candidate.label} ({s.candidate.source})", "", f"{s.status}: {s.reason}", ""]
        if s.cause:
            out += [f"Root cause: {s.cause}", ""]
        out += [f"- {line}" for line in s.level_lines]
        out += [f"- recording: `{m.path}` (sweep {m.sweep_id})" for m in s.runs]
        out.append("")
    if plan.skipped:
        out += ["## Not tried", ""] + [f"- {s}" for s in plan.skipped] + [""]
    return "\n".join(out)


def write(state: TuneState, directory: Path, dirs: list[str]) -> Path:
    """report.md and report.json in the tune's folder (and winner.toml); returns the markdown's path."""
    path = winner(state, directory, dirs)
    state.winner_path = str(path) if path is not None else None
    md = write_private(directory / "report.md", to_markdown(state))
    write_private(directory / "report.json", json.dumps(to_json(state), indent=1))
    state.report_path = str(md)
    return md
