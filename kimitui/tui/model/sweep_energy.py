"""The cockpit's energy figures: each level's power from the GPU samples beside it, the idle power, the prices.

The same folder the report and ``kimitui sweep`` use (:class:`kimitui.analysis.energy.EnergyFolder`), fed the
GPU samples and the sweep's events as they are folded; a level's figures arrive once a sample past its
window does (a second or so after its result).  The prices (``[cost]``) are set by the app from the config;
none set: no cost anywhere.  Plain data for the levels table, the curve and the compare view.
"""

from __future__ import annotations

from kimitui.analysis.cost import CostRates, LevelCost, level_cost
from kimitui.analysis.energy import EnergyFolder, LevelEnergy, WindowPower
from kimitui.events import Event, GpuSample, LevelResult, LevelStarted, RequestResult, SweepStarted
from kimitui.report.sweep_summary import SweepRun

ENERGY_EVENTS = (GpuSample, SweepStarted, LevelStarted, RequestResult, LevelResult)
"""What the folder reads (every other event passes it by)."""


class SweepEnergy:
    """Energy figures per (sweep, C, repeat), the idle power per sweep, and the configured prices."""

    def __init__(self) -> None:
        self.folder = EnergyFolder()
        self.rates: CostRates | None = None
        """``[cost]`` from the config (the app sets it); None: no cost column, no cost row."""

    def add(self, ev: Event) -> list[LevelEnergy]:
        """Fold ``ev``; the levels whose figures became final with it."""
        if not isinstance(ev, ENERGY_EVENTS):
            return []
        return self.folder.add(ev)

    def level(self, sweep_id: str, concurrency: int, repeat: int = 0) -> LevelEnergy | None:
        return self.folder.level(sweep_id, concurrency, repeat)

    def idle(self, sweep_id: str) -> WindowPower | None:
        return self.folder.idle_of(sweep_id)

    def forget(self, sweep_ids: list[str]) -> None:
        """The compare book no longer keeps these sweeps: nor does the folder their figures (a session of many
        sweeps stays flat, issue 30)."""
        gone = set(sweep_ids)
        for key in [k for k in self.folder.levels if k[0] in gone]:
            del self.folder.levels[key]
        for sweep_id in gone:
            self.folder.idle.pop(sweep_id, None)

    def attach(self, run: SweepRun) -> None:
        """Give ``run`` (rebuilt from the compare book, which keeps no GPU samples) each level's energy, the idle
        power and the prices this folder has, as the report's ``sweeps_of`` does from a recording; a level whose
        figures are not final yet has none (its row says no GPU samples cover it)."""
        run.idle = self.idle(run.sweep_id)
        for row in run.levels.values():
            row.energy = [e for r in row.repeats if (e := self.level(run.sweep_id, row.concurrency, r.repeat))]
        run.set_cost(self.rates)

    def cost(self, level: LevelResult, energy: LevelEnergy | None) -> LevelCost | None:
        """The level's cost per million output tokens at its aggregate throughput; None when no price is set."""
        if self.rates is None:
            return None
        return level_cost(self.rates, tok_s=level.agg_tok_s, gpus=energy.gpus if energy is not None else None,
                          j_per_token=energy.j_per_token if energy is not None else None)


def j_text(j: float | None) -> str:
    """J per token in three figures: ``2.53``, ``27.4``, ``0.471``."""
    if j is None:
        return "-"
    return f"{j:.3f}" if j < 1 else f"{j:.2f}" if j < 10 else f"{j:.1f}" if j < 100 else f"{j:.0f}"


def per_kw_text(v: float | None) -> str:
    """tok/s per kW: whole numbers above 10."""
    return "-" if v is None else (f"{v:.1f}" if v < 10 else f"{v:.0f}")


def watts_text(w: float | None) -> str:
    return "-" if w is None else (f"{w / 1000:.2f} kW" if w >= 1000 else f"{w:.0f} W")
