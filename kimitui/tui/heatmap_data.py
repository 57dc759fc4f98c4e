"""The expert heatmap's cells: layers x GPU ranks, each GPU's load against its layer's mean.

From the newest :class:`~kimitui.events.ExpertLoad` windows (SGLang's ``sglang:eplb_gpu_physical_count``):
windows within :data:`WINDOW_S` of the newest are summed, so a window with few passes does not make
the map flicker.  61 layers do not fit a terminal's rows: consecutive layers are binned into ``rows``
bands (the band's load summed), and each band is labelled with its layer range.  A cell is the
GPU's share over the band's mean (1.0 = its fair share); a dense layer (no routed experts) is left
out.  No Textual here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from kimitui.events import ExpertLoad

WINDOW_S = 3.0
SHADES = " ░▒▓█"
"""Cells by how far over the fair share a GPU is (see :func:`shade`)."""


@dataclass(frozen=True)
class HeatBand:
    first_layer: int
    last_layer: int
    ratios: list[float]
    """Per GPU rank: its routed tokens over the band's mean per GPU (1.0 = even)."""

    @property
    def label(self) -> str:
        return f"L{self.first_layer}" if self.first_layer == self.last_layer else f"L{self.first_layer}–{self.last_layer}"

    @property
    def balance(self) -> float:
        """mean/max, SGLang's balancedness of the band."""
        top = max(self.ratios) if self.ratios else 0.0
        return 1.0 / top if top > 0 else 1.0


class HeatWindows:
    """The recent ExpertLoad windows (bounded), summed into one layers x GPUs map."""

    def __init__(self, keep: int = 64) -> None:
        self.windows: deque[ExpertLoad] = deque(maxlen=keep)

    def add(self, ev: ExpertLoad) -> None:
        self.windows.append(ev)

    def summed(self) -> dict[int, list[float]]:
        if not self.windows:
            return {}
        newest = self.windows[-1].t
        total: dict[int, list[float]] = {}
        for ev in self.windows:
            if newest - ev.t > WINDOW_S:
                continue
            for layer, row in zip(ev.layers, ev.counts):
                acc = total.setdefault(layer, [0.0] * len(row))
                for g, v in enumerate(row[: len(acc)]):
                    acc[g] += v
        return total


def bands(layers: dict[int, list[float]], rows: int) -> list[HeatBand]:
    """The MoE layers (any with load) binned into at most ``rows`` bands of consecutive layers."""
    moe = [(layer, row) for layer, row in sorted(layers.items()) if sum(row) > 0]
    if not moe or rows <= 0:
        return []
    per = -(-len(moe) // rows)
    out = []
    for i in range(0, len(moe), per):
        chunk = moe[i:i + per]
        width = max(len(r) for _, r in chunk)
        summed = [sum(r[g] for _, r in chunk if g < len(r)) for g in range(width)]
        mean = sum(summed) / width
        out.append(HeatBand(chunk[0][0], chunk[-1][0], [v / mean if mean else 0.0 for v in summed]))
    return out


def shade(ratio: float) -> tuple[str, str]:
    """(glyph, style) of one cell: under its share dim, near it green, over it yellow then red."""
    if ratio < 0.9:
        return SHADES[1], "blue"
    if ratio <= 1.1:
        return SHADES[2], "green"
    if ratio <= 1.3:
        return SHADES[3], "yellow"
    return SHADES[4], "bold red"


def hottest(band_list: Iterable[HeatBand]) -> tuple[int, float] | None:
    """(GPU rank, its mean ratio over all bands) of the most loaded GPU."""
    lst = list(band_list)
    if not lst:
        return None
    n = len(lst[0].ratios)
    means = [sum(b.ratios[g] for b in lst if g < len(b.ratios)) / len(lst) for g in range(n)]
    g = max(range(n), key=lambda i: means[i])
    return g, means[g]
