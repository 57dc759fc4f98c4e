"""Cost per million output tokens at a level's throughput (issue 34): pure arithmetic, no I/O.

The operator states prices in the config (``[cost] gpu_hour = 2.10``, ``kwh = 0.18``, an optional
``currency = "USD"``; :class:`kimitui.config.CostConfig`):

* **GPU time** per million tokens = ``gpu_hour`` x GPUs / (tokens per hour) x 10^6, at the level's
  seed-comparable aggregate rate: what renting (or amortising) the GPUs costs while they make those tokens.
* **Energy** per million tokens = ``kwh`` x (J per token x 10^6 / 3.6 x 10^6 J per kWh), from the level's
  aggregate J per token (:mod:`kimitui.analysis.energy`): the GPUs' own draw, not the host's or cooling's.
* **Total** = the sum of what is configured (an owner who pays both amortisation and power sets both; a
  cloud price per GPU-hour already includes power, so set only ``gpu_hour`` there).

A part that is configured but cannot be computed (no GPU count, no power samples) is None with a reason;
nothing is configured: no cost at all (``None`` from :func:`level_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

J_PER_KWH = 3.6e6
MILLION = 1e6


@dataclass(frozen=True)
class CostRates:
    """Prices per GPU-hour and per kWh (either may be None), and the currency's label."""

    gpu_hour: float | None = None
    kwh: float | None = None
    currency: str = ""

    @property
    def configured(self) -> bool:
        return self.gpu_hour is not None or self.kwh is not None


@dataclass(frozen=True)
class LevelCost:
    """Cost per million output tokens at one level: its GPU-time and energy parts and their total."""

    gpu_per_mtok: float | None
    energy_per_mtok: float | None
    currency: str = ""
    gpu_configured: bool = False
    energy_configured: bool = False
    reason: str = ""
    """Why a configured part is missing (``energy: no GPU samples ...``); empty when every part is there."""

    @property
    def per_mtok(self) -> float | None:
        """The total of the configured parts; None when a configured part is missing (never a partial sum)."""
        parts = [(self.gpu_configured, self.gpu_per_mtok), (self.energy_configured, self.energy_per_mtok)]
        if any(on and v is None for on, v in parts) or not any(on for on, _ in parts):
            return None
        return sum(v for on, v in parts if on and v is not None)

    def text(self, digits: int = 2) -> str:
        """``0.84 USD/Mtok`` or ``-`` (with no unit when no currency was named: ``0.84 /Mtok``)."""
        v = self.per_mtok
        if v is None:
            return "-"
        return f"{v:.{digits}f} {self.currency}/Mtok" if self.currency else f"{v:.{digits}f} /Mtok"


def gpu_cost_per_mtok(gpu_hour: float, gpus: int, tok_s: float) -> float:
    """Currency per million output tokens for ``gpus`` GPUs at ``gpu_hour`` each, making ``tok_s``."""
    return gpu_hour * gpus / (tok_s * 3600.0) * MILLION


def energy_cost_per_mtok(kwh: float, j_per_token: float) -> float:
    """Currency per million output tokens at ``kwh`` per kWh and ``j_per_token``."""
    return kwh * j_per_token * MILLION / J_PER_KWH


def level_cost(rates: CostRates | None, *, tok_s: float | None, gpus: int | None,
               j_per_token: float | None) -> LevelCost | None:
    """The level's cost per million output tokens; None when no price is configured."""
    if rates is None or not rates.configured:
        return None
    why: list[str] = []
    gpu = energy = None
    if rates.gpu_hour is not None:
        if not tok_s or tok_s <= 0:
            why.append("GPU time: the level has no throughput")
        elif not gpus:
            why.append("GPU time: the number of GPUs is unknown (no GPU samples, no tp_size)")
        else:
            gpu = gpu_cost_per_mtok(rates.gpu_hour, gpus, tok_s)
    if rates.kwh is not None:
        if j_per_token is None:
            why.append("energy: no J per token (no GPU power samples cover the level)")
        else:
            energy = energy_cost_per_mtok(rates.kwh, j_per_token)
    return LevelCost(gpu, energy, rates.currency, rates.gpu_hour is not None, rates.kwh is not None,
                     "; ".join(why))
