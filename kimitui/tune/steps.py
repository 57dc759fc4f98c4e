"""A step's verdict: the candidate's sweeps against the best's, on the tune's objective, beyond noise.

The comparison is ``kimitui report --vs``'s (:func:`kimitui.report.compare.compare`): the same
ratios, noise (repeats, else a bootstrap over requests, never under the figures' run-to-run floor)
and causes.  The objective decides keep or revert: ``peak`` (peak aggregate tok/s), ``level:C``
(aggregate tok/s at C), ``capacity`` (the highest C at which the SLO holds), ``tokens_per_kj`` (each side's most
tokens per kJ of GPU energy over its levels) or ``cost_per_mtok`` (each side's lowest cost per million tokens at
the configured ``[cost]``; issue 34).  A candidate whose
objective moved at least :data:`~kimitui.report.verdict.DEFAULT_MIN_EFFECT` but not beyond noise is
measured again (its repeats pooled) until it is, or the repeat limit is reached.

Evidence before verdicts: a step is kept only on *better*, reverted as a regression only on
*worse*; *same* reverts (it buys nothing); *unsure* — the interval reaches past ±5 % without
excluding no change, too few requests, a dominating straggler, or a level the client distorted —
decides nothing: the step is measured again where the noise is (:func:`remeasure_spec`) and, still
unsure at the repeat limit, reverted as "not judged".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from kimitui.capacity.answer import CapacityAnswer
from kimitui.capacity.search import capacity_from_levels
from kimitui.capacity.slo import parse_slo
from kimitui.analysis.cost import CostRates
from kimitui.report.compare import EFFICIENCY_FIGURES, Comparison, FigureComparison, best_level_figure, compare
from kimitui.events import SweepSpec
from kimitui.report.sweep_summary import LevelRow, SweepRun
from kimitui.report.verdict import DEFAULT_MIN_EFFECT

Decision = Literal["better", "worse", "same", "unsure", "not_comparable"]


@dataclass
class StepJudgement:
    decision: Decision
    comparison: Comparison
    objective_change: str
    level_lines: list[str] = field(default_factory=list)
    cause: str = ""
    where: str = ""
    """Where the candidate won or lost beyond noise, level by level (``improved at C=1 (+53 %)``)."""
    unsure: str = ""
    """For *unsure*: why the data cannot tell and what would settle it (the objective figure's words)."""
    settle_requests: int | None = None
    """For *unsure*: the requests per level that would settle it, when more requests can."""

    @property
    def decided(self) -> bool:
        return self.decision != "unsure"


def merge_runs(runs: list[SweepRun]) -> SweepRun:
    """One run whose levels hold every run's repeats (renumbered) and requests: repeats of one workload."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    merged = replace(first, levels={}, level_starts={}, losses={}, attributions={}, rebalances=[],
                     spec=first.spec.model_copy(update={"repeats": len(runs)}))
    rep: dict[int, int] = {}
    for run in runs:
        merged.attributions.update(run.attributions)
        merged.rebalances.extend(run.rebalances)
        for c, row in sorted(run.levels.items()):
            into = merged.levels.setdefault(c, LevelRow(c, spec=merged.spec, rates=row.rates,
                                                         gpus_hint=row.gpus_hint))
            into.requests.extend(row.requests)
            into.energy.extend(row.energy)  # in repeat order, as the repeats below
            for lv in row.repeats:
                n = rep.get(c, 0)
                rep[c] = n + 1
                into.repeats.append(lv.model_copy(update={"repeat": n}))
                if (c, lv.repeat) in run.losses:
                    merged.losses[(c, n)] = run.losses[(c, lv.repeat)]
                if (c, lv.repeat) in run.level_starts:
                    merged.level_starts[(c, n)] = run.level_starts[(c, lv.repeat)]
    return merged


def objective_figure(cmp: Comparison, objective: str) -> FigureComparison | None:
    """The figure the objective reads: the peak, the aggregate at ``level:C``, or the best level's efficiency."""
    if objective in EFFICIENCY_FIGURES:
        return best_level_figure(cmp, objective)
    if objective.startswith("level:"):
        c = int(objective.split(":", 1)[1])
        lv = cmp.level(c)
        if lv is None or not lv.judged:
            return None
        return next((f for f in lv.figures if f.figure == "agg_tok_s"), None)
    return cmp.peak


def judge_step(best: SweepRun, cand: SweepRun, objective: str, *, slo: str | None = None,
               min_effect: float = DEFAULT_MIN_EFFECT, seed: int = 0, rates: CostRates | None = None) -> StepJudgement:
    """Better, worse, the same, or not sure yet (a change as large as ``min_effect`` inside the noise);
    ``rates``: the prices of ``cost_per_mtok`` (both sides priced alike)."""
    if rates is not None:
        best.set_cost(rates)
        cand.set_cost(rates)
    cmp = compare(best, cand, min_effect=min_effect, seed=seed)
    lines = _level_lines(cmp)
    if cmp.verdict == "not_comparable":
        return StepJudgement("not_comparable", cmp, "not comparable: " + "; ".join(cmp.reasons), lines)
    if objective == "capacity" and slo:
        return _by_capacity(best, cand, slo, cmp, lines)
    fig = objective_figure(cmp, objective)
    if fig is None or fig.ratio is None:
        why = {"tokens_per_kj": " (no level has GPU power samples on both sides)",
               "cost_per_mtok": " (no level has a cost on both sides: [cost] prices and, for kwh, GPU power samples)",
               }.get(objective, "")
        return StepJudgement("not_comparable", cmp, f"{objective}: no judged figure{why}", lines)
    text = _change_text(fig, objective)
    where = _where(cmp)
    if fig.verdict == "improved":
        return StepJudgement("better", cmp, text, lines, "", where)
    if fig.verdict == "regressed":
        return StepJudgement("worse", cmp, text, lines, root_cause(cmp), where)
    if fig.verdict == "same":
        return StepJudgement("same", cmp, text, lines, "", where)
    client = cmp.client_line()
    why = fig.unsure_text if not fig.note.startswith("distorted") else (client.removeprefix("⚠ client: ") or fig.unsure_text)
    # the objective cannot be judged, yet a judged level may be worse: its cause is said with it (the step's
    # verdict reads "regressed" and must never stand without why)
    cause = root_cause(cmp) if cmp.verdict == "regressed" else ""
    return StepJudgement("unsure", cmp, text, lines, cause, where, unsure=why, settle_requests=fig.settle_requests)


def remeasure_spec(workload: SweepSpec, j: StepJudgement, objective: str, *, growth_cap: float = 4.0) -> SweepSpec:
    """The next sweep of an *unsure* step: only the levels the objective still cannot judge, with as many
    requests as would settle it (at most ``growth_cap`` times the last level's), the workload otherwise the same."""
    cmp = j.comparison
    if objective.startswith("level:"):
        levels = [int(objective.split(":", 1)[1])]
    else:
        figure = {"tokens_per_kj": "j_per_token"}.get(objective, objective if objective in EFFICIENCY_FIGURES
                                                      else "agg_tok_s")
        unsure = [lv.concurrency for lv in cmp.levels if lv.judged for f in lv.figures
                  if f.figure == figure and f.verdict == "unsure"]
        peaks = [c for c, _ in cmp.peak_at] if cmp.peak_at is not None else []
        levels = sorted(set(unsure) | set(peaks)) or list(workload.levels)
    have = max((max(lv.requests) for lv in cmp.levels if lv.concurrency in levels), default=0)
    want = j.settle_requests or 0
    n: int | None = max(have, workload.requests_per_level or 0) or None  # the floor's noise: same size, once more
    if want > have > 0:
        n = min(want, int(have * growth_cap))
    return workload.model_copy(update={"levels": [c for c in workload.levels if c in levels] or levels,
                                       "requests_per_level": n})


def root_cause(cmp: Comparison) -> str:
    """Why the candidate lost: a slower pace for every request (the change's own cost per step) and/or the
    stalls that explain what it lost beyond its own pace (``explained by 6 EPLB rebalances, 30 s in all``),
    with the knob that changed and the rebalances or drafter figures of each side."""
    parts: list[str] = []
    slower = [(lv.concurrency, f) for lv in cmp.levels if lv.judged for f in lv.figures
              if f.figure == "decode_tok_s_p50" and f.verdict == "regressed" and f.change_pct is not None]
    if slower:
        cs = ", ".join(str(c) for c, _ in slower)
        worst = min(f.change_pct or 0.0 for _, f in slower)
        parts.append(f"every request decoded slower at C={cs} (p50 down to {worst:+.0f} %): the change's own cost per step")
    why = cmp.explanation() if cmp.verdict == "regressed" else None
    if why:
        parts.append(f"what it lost beyond its own pace is {why}" if slower else why)
    elif not slower:
        parts.append("no stall explains it and no level decoded slower per request")
    if cmp.knob_diff:
        parts.append(cmp.knobs_text)
    parts += cmp.spec_and_eplb_lines()
    return "; ".join(parts)


def _where(cmp: Comparison) -> str:
    """``improved at C=1 (+53 %); regressed at C=16, 64 (-25 %, -23 %)`` from each level's aggregate."""
    out: list[str] = []
    for word in ("improved", "regressed"):
        hits = [(lv.concurrency, f) for lv in cmp.levels if lv.judged for f in lv.figures
                if f.figure == "agg_tok_s" and f.verdict == word and f.change_pct is not None]
        if hits:
            cs = ", ".join(str(c) for c, _ in hits)
            pcts = ", ".join(f"{f.change_pct:+.0f} %" for _, f in hits)
            out.append(f"{word} at C={cs} ({pcts})")
    return "; ".join(out)


def _change_text(fig: FigureComparison, objective: str) -> str:
    noise = f"±{fig.noise_pct:.0f} %" if fig.noise_pct is not None else "noise unknown"
    if objective == "tokens_per_kj":
        return (f"tokens per kJ {fig.a:,.0f} -> {fig.b:,.0f} ({fig.change_pct:+.0f} %, {noise}; {fig.note})")
    if objective == "cost_per_mtok":
        return (f"cost per M tokens {fig.a:,.3g} -> {fig.b:,.3g} ({fig.change_pct:+.0f} %, {noise}; {fig.note})")
    name = "peak" if objective == "peak" else f"C={fig.concurrency} aggregate"
    return f"{name} {fig.a:,.0f} -> {fig.b:,.0f} tok/s ({fig.change_pct:+.0f} %, {noise})"


def _level_lines(cmp: Comparison) -> list[str]:
    """Per compared level, the aggregate and p50 decode changes (where the candidate won or lost)."""
    out: list[str] = []
    for lv in cmp.levels:
        if not lv.judged:
            out.append(f"C={lv.concurrency}: not judged ({lv.not_judged})")
            continue
        figs = [f for f in lv.figures if f.figure in ("agg_tok_s", "decode_tok_s_p50")]
        out.append(f"C={lv.concurrency}: " + "; ".join(f.describe().split(" ", 1)[1] for f in figs))
    return out


def capacity_of(run: SweepRun, slo: str) -> CapacityAnswer:
    """The highest swept C at which ``slo`` holds (``kimitui capacity``'s rule on the levels the tune sweeps)."""
    levels = [(row.repeats[0], row.requests) for _, row in sorted(run.levels.items()) if row.repeats and row.valid]
    return capacity_from_levels(levels, parse_slo(slo))


def _by_capacity(best: SweepRun, cand: SweepRun, slo: str, cmp: Comparison, lines: list[str]) -> StepJudgement:
    """Capacity moves a whole level or not at all: more levels held is better, fewer worse, the same is the same
    (the tune's levels are its resolution)."""
    a, b = capacity_of(best, slo), capacity_of(cand, slo)
    if cmp.distorted_levels:
        text = f"capacity {a.answer} -> {b.answer} at {a.slo.describe()}"
        why = cmp.client_line().removeprefix("⚠ client: ")
        return StepJudgement("unsure", cmp, text, lines, "", _where(cmp), unsure=why)
    ca, cb = a.answer or 0.0, b.answer or 0.0

    def said(x: CapacityAnswer) -> str:
        return x.fmt_x(x.answer) if x.answer is not None else "none"

    text = f"capacity {said(a)} -> {said(b)} at {a.slo.describe()}"
    where = _where(cmp)
    if cb > ca:
        return StepJudgement("better", cmp, text, lines, "", where)
    if cb < ca:
        return StepJudgement("worse", cmp, text + f" ({b.sentence()})", lines, root_cause(cmp), where)
    return StepJudgement("same", cmp, text, lines, "", where)
