"""A tune's plan in words and time: what it will try, what it skips and why, and how long it should take.

The estimate is the sweep's own (:mod:`kimitui.analysis.sweep_eta`: the seeds' rates, faster on a
simulated host running ``time_scale`` x) times the sweeps a tune needs — the start's, one per
candidate, plus a repeat for about a third of them (a change the noise hides at first) — and a swap
per candidate, a swap back for each one not kept.
"""

from __future__ import annotations

from kimitui.analysis.sweep_eta import RateModel, duration, spec_seconds
from kimitui.tune.state import TunePlan

REAL_SWAP_S = 420.0
"""A swap of Kimi K2.6 on a real 8-GPU host: ~590 GB of weights to load, graphs to capture (the notes' ~7 min)."""
SIM_SWAP_S = 48.0
"""The simulated host's start-up at time-scale 1 (kimitui/sim/perf_model.py ``startup_plan``), plus the stop."""
REPEAT_SHARE = 1 / 3


def sweep_seconds(plan: TunePlan) -> float:
    return spec_seconds(plan.workload, RateModel.seeds(plan.sim_time_scale or 1.0))


def swap_seconds(plan: TunePlan, simulated: bool) -> float:
    return SIM_SWAP_S / (plan.sim_time_scale or 1.0) if simulated else REAL_SWAP_S


def estimate(plan: TunePlan, simulated: bool) -> tuple[float, int, int]:
    """(seconds, sweeps, swaps) for the whole plan."""
    n = len(plan.candidates) if plan.max_steps is None else min(plan.max_steps, len(plan.candidates))
    sweeps = 1 + n + round(n * REPEAT_SHARE * (plan.repeat_limit > 1))
    swaps = 1 + 2 * n
    seconds = sweeps * sweep_seconds(plan) + swaps * swap_seconds(plan, simulated)
    if plan.time_budget_s is not None:
        seconds = min(seconds, plan.time_budget_s)
    return seconds, sweeps, swaps


def grid_sweeps(plan: TunePlan) -> int:
    """Sweeps a full grid over the same candidates needs: every combination of the changes (per knob family
    one of its values or none), each profile swept once."""
    families: dict[str, int] = {}
    for c in plan.candidates:
        families[c.family] = families.get(c.family, 0) + 1
    profiles = 1
    for values in families.values():
        profiles *= values + 1
    return profiles


def plan_lines(plan: TunePlan, host: str, simulated: bool) -> list[str]:
    seconds, sweeps, swaps = estimate(plan, simulated)
    w = plan.workload
    size = f"{w.requests_per_level} requests" if w.requests_per_level else (
        f"{w.duration_s:.0f} s" if w.duration_s else "2C requests")
    objective = {"peak": "peak aggregate tok/s", "tokens_per_kj": "the most tokens per kJ of GPU energy (any level)",
                 "cost_per_mtok": "the lowest cost per million tokens (any level)"}.get(plan.objective, plan.objective)
    if plan.objective.startswith("level:"):
        objective = f"aggregate tok/s at C={plan.objective[6:]}"
    if plan.objective == "capacity" and plan.slo:
        objective = f"capacity at {plan.slo}"
    lines = [f"tune {host} from {plan.start}: one change per step against the best so far, objective {objective}",
             f"workload: C={','.join(map(str, w.levels))}, {w.mode}, {w.max_tokens} tokens, prompts {w.prompts}, "
             f"{size} per level; up to {plan.repeat_limit} sweeps per step while the verdict is within noise"]
    for i, c in enumerate(plan.candidates, 1):
        lines.append(f"  {i}. {c.label}  ({c.source})")
    if not plan.candidates:
        lines.append("  nothing to try")
    for s in plan.skipped:
        lines.append(f"  skipped: {s}")
    limits = [f"at most {plan.max_steps} step{'' if plan.max_steps == 1 else 's'}"] if plan.max_steps is not None else []
    if plan.time_budget_s is not None:
        limits.append(f"time budget {duration(plan.time_budget_s)}")
    scale = f" at time-scale {plan.sim_time_scale:g}" if simulated and plan.sim_time_scale else ""
    lines.append(f"estimated {duration(seconds)}{scale}: about {sweeps} sweeps and {swaps} swaps"
                 + (f" ({', '.join(limits)})" if limits else "")
                 + f"; a full grid over the same changes: {grid_sweeps(plan)} profiles to sweep")
    return lines
