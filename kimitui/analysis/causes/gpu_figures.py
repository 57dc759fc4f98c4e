"""What the GPUs did over a stretch, in figures and in words: the one computation every view prints.

Issue 29: a straggler's cause headline said "all 8 GPUs at 8–72 % utilisation" (the lowest to the
highest single reading over the stretch, edge samples included) over a detail body saying "fell to
8 % (from 49–54 %)" (each GPU's mean inside the gap, samples timed by arrival).  Now both read
:func:`gpu_figures` over samples placed on the host's clock (:func:`~.event_clock.sample_time`):

* inside: each GPU's mean utilisation over the samples taken in ``[a, b]`` (a stretch shorter than the
  sampling period has none: the first sample after it, which covers it, stands in);
* before: each GPU's mean over the equally long span before ``a`` (at least :data:`MIN_BEFORE_S`);
* the busiest PCIe direction inside.

:func:`gpu_words` says them once: ``all 8 GPUs fell from 49–54 % to 8 % utilisation, PCIe 21 GB/s``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kimitui.events import GpuReading

DROP_PCT = 10.0
"""A GPU whose mean utilisation inside is this many points under its mean before it "fell" (over: "rose")."""
MIN_BEFORE_S = 2.0
"""The span before a short stretch that its figures are held against, at least."""
COVER_S = 5.0
"""A stretch with no sample inside is read from the first sample at most this long after it."""
PCIE_SAID_KBPS = 1e6
"""PCIe traffic is worth a word from 1 GB/s."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GpuMoment:
    """One GPU sample as the figures need it: when (host clock), each GPU's utilisation, the busiest PCIe direction."""

    t: float
    index: tuple[int, ...]
    util: tuple[float | None, ...]
    pcie_max_kbps: float | None

    @property
    def gpus(self) -> int:
        return len(self.index)


def moment_of(gpus: Sequence[GpuReading], at: float) -> GpuMoment:
    """A sample's readings, kept small (a cause timeline holds thousands)."""
    pcie = [max(r.pcie_tx_kbps or 0.0, r.pcie_rx_kbps or 0.0) for r in gpus
            if r.pcie_tx_kbps is not None or r.pcie_rx_kbps is not None]
    return GpuMoment(at, tuple(r.index for r in gpus), tuple(r.util_pct for r in gpus), max(pcie) if pcie else None)


def in_span(items: Sequence[T], a: float, b: float, when: Callable[[T], float]) -> list[T]:
    """The items (time-ordered by ``when``) in ``[a, b]``; none there: the first after ``b`` within
    :data:`COVER_S` (NVML's utilisation averages over the span since the sample before, so it covers the stretch)."""
    lo = bisect.bisect_left(items, a, key=when)
    hi = bisect.bisect_right(items, b, key=when)
    if hi > lo:
        return [items[i] for i in range(lo, hi)]
    if hi < len(items) and when(items[hi]) - b <= COVER_S:
        return [items[hi]]
    return []


def before_span(a: float, b: float) -> tuple[float, float]:
    """The span a stretch ``[a, b]`` is held against: as long as it (at least :data:`MIN_BEFORE_S`), ending at ``a``."""
    return a - max(b - a, MIN_BEFORE_S), a


def _means(moments: Sequence[GpuMoment]) -> dict[int, float]:
    sums: dict[int, list[float]] = {}
    for m in moments:
        for i, u in zip(m.index, m.util):
            if u is not None:
                s = sums.setdefault(i, [0.0, 0.0])
                s[0] += u
                s[1] += 1
    return {i: s[0] / s[1] for i, s in sorted(sums.items())}


@dataclass(frozen=True)
class GpuFigures:
    """Each GPU's mean utilisation inside a stretch and before it; what every view says of a stretch's GPUs."""

    inside: dict[int, float]
    before: dict[int, float]
    gpus: int
    """GPUs the samples carried (reporting utilisation or not)."""
    samples: int
    pcie_max_kbps: float | None = None

    def fell(self, index: int) -> bool:
        was, now = self.before.get(index), self.inside.get(index)
        return was is not None and now is not None and now < was - DROP_PCT

    def rose(self, index: int) -> bool:
        was, now = self.before.get(index), self.inside.get(index)
        return was is not None and now is not None and now > was + DROP_PCT


def gpu_figures(moments: Sequence[GpuMoment], a: float, b: float) -> GpuFigures | None:
    """The figures of ``[a, b]`` from time-ordered moments; None without a sample for it."""
    inside = in_span(moments, a, b, _t)
    if not inside:
        return None
    b0, b1 = before_span(a, b)
    lo = bisect.bisect_left(moments, b0, key=_t)
    hi = bisect.bisect_left(moments, b1, key=_t)
    pcie = [m.pcie_max_kbps for m in inside if m.pcie_max_kbps is not None]
    return GpuFigures(_means(inside), _means([moments[i] for i in range(lo, hi)]), max(m.gpus for m in inside),
                      len(inside), max(pcie) if pcie else None)


def _t(m: GpuMoment) -> float:
    return m.t


def util_span(values: Sequence[float]) -> str:
    """``8 %`` / ``49–54 %``: the lowest to the highest, rounded."""
    lo, hi = round(min(values)), round(max(values))
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def _who(indices: Sequence[int], total: int) -> str:
    if total > 1 and len(indices) == total:
        return f"all {total} GPUs"
    if total == 1 and len(indices) == 1:
        return "the GPU"
    return f"GPU {','.join(str(i) for i in sorted(indices))}"


def gpu_words(fig: GpuFigures | None) -> str:
    """``all 8 GPUs fell from 49–54 % to 8 % utilisation``, ``GPU 3 fell from 90 % to 12 % utilisation, the others
    at 88–93 %``, ``all 8 GPUs stayed at 88–93 % utilisation``; ``, PCIe 21 GB/s`` where it moved much."""
    if fig is None or not fig.inside:
        return ""
    now, total = fig.inside, fig.gpus
    fell = [i for i in now if fig.fell(i)]
    rose = [i for i in now if fig.rose(i)]
    moved = fell if fell else rose
    verb = "fell" if fell else "rose"
    if moved:
        out = (f"{_who(moved, total)} {verb} from {util_span([fig.before[i] for i in moved])} "
               f"to {util_span([now[i] for i in moved])} utilisation")
        rest = [now[i] for i in now if i not in moved]
        if rest:
            out += f", the others at {util_span(rest)}"
    elif any(i in fig.before for i in now):
        out = f"{_who(list(now), total)} stayed at {util_span(list(now.values()))} utilisation"
    else:
        out = f"{_who(list(now), total)} at {util_span(list(now.values()))} utilisation"
    if fig.pcie_max_kbps is not None and fig.pcie_max_kbps >= PCIE_SAID_KBPS:
        out += f", PCIe {fig.pcie_max_kbps / 1e6:.0f} GB/s"
    return out
