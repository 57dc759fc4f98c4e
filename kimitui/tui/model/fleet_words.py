"""What the fleet strip and the ``G`` view say, host by host and GPU by GPU, as plain words.

The figures are chosen and worded here (testable alone); :mod:`kimitui.tui.renderables.fleet_render`
only lays them out and colours them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kimitui.tui.model.gpu_state import NODE_STRIDE
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.fleet_state import FleetRow
from kimitui.tui.model.gpu_summary import Piece, throttle_piece


@dataclass(frozen=True)
class GpuWords:
    """One GPU's row in the ``G`` view; ``sampled`` False: no reading yet, only its name and rank."""

    name: str
    rank: str
    sampled: bool
    util_pct: float | None = None
    """What the bar fills to."""
    util: str = ""
    mem: str = ""
    power: str = ""
    temp: str = ""
    throttle: Piece | None = None
    """As the GPU panel says it (idle clocks are no slowdown): (words, ``bad`` or ``warn``)."""


def tok_s_words(row: FleetRow) -> str:
    return f"{row.gen_tok_s:,.0f} tok/s" if row.gen_tok_s is not None else "- tok/s"


def util_words(row: FleetRow) -> str:
    return f"{row.util_pct:.0f} %" if row.util_pct is not None else "-"


def errors_words(row: FleetRow) -> str:
    return f"{row.errors} error{'s' if row.errors != 1 else ''}" if row.errors else ""


def gpu_words(model: CockpitModel) -> list[GpuWords]:
    """The host's GPUs in index order; another node's GPUs are named by its host in the rank column."""
    out: list[GpuWords] = []
    for index in sorted(model.gpus):
        row = model.gpus[index]
        r = row.reading
        name, rank = f"  GPU{index % NODE_STRIDE}", row.rank or ""
        if r is None:
            out.append(GpuWords(name, rank, sampled=False))
            continue
        mem = (f"{r.mem_used_mib / 1024:.0f}/{r.mem_total_mib / 1024:.0f} GiB"
               if r.mem_used_mib is not None and r.mem_total_mib is not None else "-")
        out.append(GpuWords(
            name, rank, sampled=True, util_pct=r.util_pct,
            util=f"{r.util_pct:.0f}%" if r.util_pct is not None else "-", mem=mem,
            power=f"{r.power_w:.0f} W" if r.power_w is not None else "-",
            temp=f"{r.temp_c:.0f}°C" if r.temp_c is not None else "-",
            throttle=throttle_piece(r.throttle_reasons),
        ))
    return out
