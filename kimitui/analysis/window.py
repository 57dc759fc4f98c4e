"""What the GPUs and the log did during a time window (a straggler's slowest gap).

The cockpit keeps bounded histories of :class:`GpuSample` and :class:`LogLine`
events; selecting a straggler asks for the window ``[gap_start, gap_end]`` and
gets the samples and lines inside it plus a per-GPU summary, so the operator
sees "utilisation dropped, PCIe spiked, GPU 3 ran hot" next to
"[EPLBManager] rebalance start".  No Textual here: replay, reports and tests
use the same lookup.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kimitui.events import GpuSample, LogLine


@dataclass(frozen=True)
class GpuWindowSummary:
    """One GPU across a window; ``None`` where the host did not report the field."""

    index: int
    samples: int
    util_min: float | None = None
    util_mean: float | None = None
    util_before: float | None = None
    """Mean utilisation in the equally long span before the window (the contrast)."""
    pcie_peak_kbps: float | None = None
    temp_max: float | None = None
    power_max: float | None = None
    throttle: tuple[str, ...] = ()


@dataclass(frozen=True)
class WindowView:
    """The samples and log lines inside ``[start, end]`` (padded) and a summary per GPU."""

    start: float
    end: float
    gpu_samples: list[GpuSample] = field(default_factory=list)
    log_lines: list[LogLine] = field(default_factory=list)
    gpus: list[GpuWindowSummary] = field(default_factory=list)

    @property
    def hottest_gpu(self) -> GpuWindowSummary | None:
        temps = [g for g in self.gpus if g.temp_max is not None]
        return max(temps, key=lambda g: g.temp_max or 0.0) if temps else None


class Windowed(Protocol):
    """What keeps the GPU samples and log lines to look a window up in (EventHistory, the cockpit's CompactHistory)."""

    def window(self, start: float, end: float, pad_s: float = 1.0) -> WindowView: ...


_Timed = TypeVar("_Timed", GpuSample, LogLine)


@dataclass
class _GpuSpan:
    """One GPU's readings gathered across a window, before they are summed up."""

    n: int = 0
    util: list[float] = field(default_factory=list)
    pcie: list[float] = field(default_factory=list)
    temp: list[float] = field(default_factory=list)
    power: list[float] = field(default_factory=list)
    thr: list[str] = field(default_factory=list)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class EventHistory:
    """Bounded, time-ordered rings of GPU samples and log lines for window lookups."""

    def __init__(self, max_gpu_samples: int = 6_000, max_log_lines: int = 20_000) -> None:
        self._gpu: deque[GpuSample] = deque(maxlen=max_gpu_samples)
        self._logs: deque[LogLine] = deque(maxlen=max_log_lines)

    def add(self, event: object) -> None:
        """Keep the event if it is a GPU sample or a log line; ignore anything else."""
        if isinstance(event, GpuSample):
            self._gpu.append(event)
        elif isinstance(event, LogLine):
            self._logs.append(event)

    def __len__(self) -> int:
        return len(self._gpu) + len(self._logs)

    @staticmethod
    def _slice(ring: deque[_Timed], start: float, end: float) -> list[_Timed]:
        items = list(ring)
        times = [e.t for e in items]
        if any(b < a for a, b in zip(times, times[1:])):  # out-of-order arrivals: sort once
            items.sort(key=lambda e: e.t)
            times = [e.t for e in items]
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_right(times, end)
        return items[lo:hi]

    def window(self, start: float, end: float, pad_s: float = 1.0) -> WindowView:
        """Everything in ``[start - pad_s, end + pad_s]`` and a per-GPU summary of it."""
        if end < start:
            start, end = end, start
        lo, hi = start - pad_s, end + pad_s
        samples = self._slice(self._gpu, lo, hi)
        before = self._slice(self._gpu, lo - (hi - lo), lo)
        lines = self._slice(self._logs, lo, hi)
        return WindowView(start=lo, end=hi, gpu_samples=samples, log_lines=lines,
                          gpus=summarize_gpus(samples, before))


def summarize_gpus(samples: list[GpuSample], before: list[GpuSample] | None = None) -> list[GpuWindowSummary]:
    """Per-GPU min/mean utilisation, PCIe peak, max temperature and power, throttle reasons."""
    per: dict[int, _GpuSpan] = {}
    for sample in samples:
        for r in sample.gpus:
            d = per.setdefault(r.index, _GpuSpan())
            d.n += 1
            if r.util_pct is not None:
                d.util.append(r.util_pct)
            if r.pcie_tx_kbps is not None or r.pcie_rx_kbps is not None:
                d.pcie.append((r.pcie_tx_kbps or 0.0) + (r.pcie_rx_kbps or 0.0))
            if r.temp_c is not None:
                d.temp.append(r.temp_c)
            if r.power_w is not None:
                d.power.append(r.power_w)
            for reason in r.throttle_reasons or []:
                if reason not in d.thr:
                    d.thr.append(reason)
    before_util: dict[int, list[float]] = {}
    for sample in before or []:
        for r in sample.gpus:
            if r.util_pct is not None:
                before_util.setdefault(r.index, []).append(r.util_pct)
    out = []
    for index in sorted(per):
        d = per[index]
        out.append(GpuWindowSummary(
            index=index,
            samples=d.n,
            util_min=min(d.util) if d.util else None,
            util_mean=_mean(d.util),
            util_before=_mean(before_util.get(index, [])),
            pcie_peak_kbps=max(d.pcie) if d.pcie else None,
            temp_max=max(d.temp) if d.temp else None,
            power_max=max(d.power) if d.power else None,
            throttle=tuple(d.thr),
        ))
    return out
