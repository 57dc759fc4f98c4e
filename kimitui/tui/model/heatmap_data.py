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
from collections.abc import Iterable, Mapping
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


def expert_parallel(args: Mapping[str, object] | None) -> bool:
    """Does the server run its MoE experts across GPUs (0.5.23 ``ep_size`` > 1, or EPLB on)?

    Names from ``/server_info`` as SGLang 0.5.23 serves its ServerArgs (``arg_groups/fields/parallel.py``
    ``ep_size``, ``arg_groups/fields/exec_.py`` ``enable_eplb``): the footer offers the heatmap key then.
    """
    if not args:
        return False
    ep = args.get("ep_size")
    return (isinstance(ep, int) and ep > 1) or args.get("enable_eplb") is True


HEATMAP_ENV = "SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"


def why_no_heatmap(args: Mapping[str, object] | None, balance_seen: bool) -> str:
    """Why there is no heatmap yet, and what in the profile turns it on, from the running server's args.

    SGLang 0.5.23 fills ``sglang:eplb_gpu_physical_count`` in ``eplb/expert_distribution.py``
    ``_handle_metric_eplb_heatmap`` only when the balancedness report is on
    (``expert_balancedness_report_mode`` != off, ``runtime_context.py`` ``reports_expert_balancedness``)
    and ``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL`` > 0 in the server's environment; it is served on
    ``/metrics`` (``enable_metrics``) and is per GPU rank only with expert parallelism.
    """
    turn_on = (f'  expert_balancedness_report_mode = "both"\n  env = {{ {HEATMAP_ENV} = "10" }}\n'
               "  enable_metrics = true   (ep8-eplb has all three)")
    if args is None:
        return "no heatmap yet: the server's /server_info is not read yet (it is, a few seconds after it serves)."
    if not expert_parallel(args):
        return ("no heatmap: the running server has no expert parallelism (ep_size 1, EPLB off), so every GPU "
                "holds a slice of every expert and there is no per-GPU expert load. A profile with ep_size = 8 "
                f"and, for the heatmap:\n{turn_on}")
    mode = args.get("expert_balancedness_report_mode")
    if mode in (None, "off"):
        return (f"no heatmap: expert_balancedness_report_mode is {mode or 'off'}, so SGLang does not count "
                f"expert load per GPU. In the profile:\n{turn_on}")
    if args.get("enable_metrics") is False:
        return f"no heatmap: enable_metrics is off, so /metrics serves nothing. In the profile:\n{turn_on}"
    said = " (the balance below comes from its report)" if balance_seen else ""
    return (f"no heatmap yet{said}: SGLang exports it only with {HEATMAP_ENV} > 0 in the server's "
            f"environment (its /server_info cannot say whether it is set). In the profile:\n"
            f'  env = {{ {HEATMAP_ENV} = "10" }}\n'
            "or wait: the first window comes with the first forward passes after the poller's first scrape.")
