"""Energy, cost and the knee in a report (issue 34): the JSON fields, the table cells, the lines under a table.

One place for how these figures read, so Markdown, plain text, JSON and ``kimitui sweep``'s own table say
the same words (``render.py`` and ``commands/sweep.py`` call here).
"""

from __future__ import annotations

import math
from typing import Any

from kimitui.analysis.cost import CostRates
from kimitui.analysis.energy import LevelEnergy, WindowPower
from kimitui.analysis.knee import Knee
from kimitui.events import LevelResult
from kimitui.report.sweep_summary import LevelRow, SweepRun


def _clean(v: float | None, digits: int = 6) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, digits)


def energy_dict(row: LevelRow) -> dict[str, Any]:
    """A level's ``energy`` object (docs/report-json.md): figures are null with ``reason`` when not measured."""
    return {
        "gpus": row.gpus if row.energy else None,
        "mean_w": _clean(row.mean_w, 2),
        "peak_w": _clean(row.peak_w, 2),
        "energy_j": _clean(sum(e.energy_j for e in row.energy if e.energy_j is not None), 2)
        if row.energy and all(e.energy_j is not None for e in row.energy) else None,
        "j_per_token": _clean(row.j_per_token),
        "j_per_token_steady": _clean(row.j_per_token_steady),
        "tokens_per_kj": _clean(row.tokens_per_kj, 3),
        "tok_s_per_kw": _clean(row.tokens_per_kj, 3),
        "marginal_j_per_token": _clean(row.marginal_j_per_token),
        "coverage": _clean(min((e.agg.coverage for e in row.energy if e.agg.coverage is not None), default=None), 4),
        "reason": row.energy_reason,
    }


def cost_dict(row: LevelRow) -> dict[str, Any] | None:
    """A level's ``cost`` object, or null when no ``[cost]`` is configured."""
    cost = row.cost
    if cost is None:
        return None
    return {"per_mtok": _clean(cost.per_mtok), "gpu_per_mtok": _clean(cost.gpu_per_mtok),
            "energy_per_mtok": _clean(cost.energy_per_mtok), "currency": cost.currency or None,
            "reason": cost.reason}


def idle_dict(idle: WindowPower | None) -> dict[str, Any] | None:
    """The sweep's ``idle_power`` object: all GPUs' mean power before it, or why it was not measured."""
    if idle is None:
        return None
    return {"mean_w": _clean(idle.mean_w, 2), "gpus": idle.gpus or None, "start": idle.start, "end": idle.end,
            "seconds": round(idle.seconds, 3), "reason": idle.reason}


def knee_dict(knee: Knee) -> dict[str, Any]:
    """The sweep's ``knee`` object (docs/sweeps.md says how it is found)."""
    return {"status": knee.status, "concurrency": _clean(knee.concurrency, 2), "gain": _clean(knee.gain, 4),
            "tpot_rise": _clean(knee.tpot_rise, 4), "ttft_rise": _clean(knee.ttft_rise, 4),
            "until": _clean(knee.until, 2), "reason": knee.reason, "left_out": list(knee.left_out),
            "line": knee.line()}


# --------------------------------------------------------------------------- table cells


def shows_energy(run: SweepRun) -> bool:
    """Whether a level table gets the energy columns: some level has them, or a cost is configured."""
    return run.has_energy or run.rates is not None


def energy_header(run: SweepRun) -> list[str]:
    return ["J/token", "tok/s/kW"] + (["cost/Mtok"] if run.rates is not None else [])


def energy_cells(run: SweepRun, row: LevelRow) -> list[str]:
    """``0.84``, ``1,190``, ``0.61 USD`` (or ``—`` each where not measured / not configured)."""
    j, per_kw = row.j_per_token, row.tokens_per_kj
    cells = ["—" if j is None else f"{j:.3g}" if j < 10 else f"{j:,.1f}",
             "—" if per_kw is None else f"{per_kw:,.0f}"]
    if run.rates is not None:
        cost = row.cost
        v = cost.per_mtok if cost is not None else None
        cells.append("—" if v is None else f"{v:,.2f}" + (f" {cost.currency}" if cost is not None and cost.currency
                                                          else ""))
    return cells


def energy_lines(run: SweepRun) -> list[str]:
    """Under a level table: idle power and the marginal energy, why a level has no figures, the knee."""
    out: list[str] = []
    idle = run.idle
    if idle is not None and idle.mean_w is not None:
        marginal = [(row.concurrency, m) for row in run.ordered_levels
                    if row.valid and (m := row.marginal_j_per_token) is not None]
        extra = ""
        if marginal:
            c, m = min(marginal, key=lambda cm: cm[1])
            extra = f"; marginal energy above idle, lowest at C={c}: {m:.3g} J/token"
        out.append(f"idle power before the sweep: {idle.mean_w:,.0f} W over {idle.gpus} GPUs "
                   f"({idle.seconds:.0f} s){extra}")
    elif idle is not None and shows_energy(run):
        out.append(f"idle power not measured: {idle.reason}")
    if shows_energy(run):
        missing = [f"C={row.concurrency}: {row.energy_reason}" for row in run.ordered_levels
                   if row.j_per_token is None and row.energy_reason]
        if missing:
            out.append("no energy figures at " + "; ".join(missing[:3]) + (" ..." if len(missing) > 3 else ""))
    elif run.levels:
        why = next((row.energy_reason for row in run.ordered_levels if row.energy_reason), "")
        out.append(f"energy: not measured ({why})" if why else "energy: not measured")
    if run.rates is not None:
        cost = next((lc for row in run.ordered_levels if (lc := row.cost) is not None and lc.reason), None)
        cur = f" {run.rates.currency}" if run.rates.currency else ""
        parts = [f"{run.rates.gpu_hour:g}{cur} per GPU-hour" if run.rates.gpu_hour is not None else "",
                 f"{run.rates.kwh:g}{cur} per kWh" if run.rates.kwh is not None else ""]
        out.append("cost per million output tokens at " + " + ".join(p for p in parts if p)
                   + (f" ({cost.reason})" if cost is not None else ""))
    out.append(run.knee.line())
    return out


# --------------------------------------------------------------------------- one level result (kimitui sweep)


def one_level(lv: LevelResult, energy: LevelEnergy | None, rates: CostRates | None) -> LevelRow:
    """A level result and its energy as a one-repeat row, so ``kimitui sweep`` says what the report says."""
    return LevelRow(lv.concurrency, repeats=[lv], energy=[energy] if energy is not None else [], rates=rates)


def level_energy_line(lv: LevelResult, energy: LevelEnergy | None, rates: CostRates | None) -> str:
    """``energy: 3,980 W mean (4,100 peak) over 8 GPUs, 2.49 J/token (steady 2.41), 402 tok/s per kW;
    cost 3.04 USD/Mtok``, or why there are none."""
    row = one_level(lv, energy, rates)
    if row.j_per_token is None or energy is None:
        text = f"energy: not measured ({row.energy_reason})"
    else:
        steady = f" (steady {energy.j_per_token_steady:.3g})" if energy.j_per_token_steady is not None else ""
        peak = f" ({energy.peak_w:,.0f} peak)" if energy.peak_w is not None else ""
        per_kw = f", {row.tokens_per_kj:,.0f} tok/s per kW" if row.tokens_per_kj is not None else ""
        text = (f"energy: {energy.mean_w:,.0f} W mean{peak} over {energy.gpus} GPUs, "
                f"{row.j_per_token:.3g} J/token{steady}{per_kw}")
    cost = row.cost
    if cost is not None:
        text += f"; cost {cost.text()}" + (f" ({cost.reason})" if cost.reason else "")
    return text
