"""What NVML says about a slow stretch: throttled clocks, one GPU slower than the rest, saturated PCIe.

Each :class:`~kimitui.events.GpuSample` covers the span since the one before it (NVML's utilisation is
an average over its sampling window).  A sample flags:

* **GPU throttling**: a clock-event reason that slows the clock (HW slowdown, thermal slowdown, power
  brake), or the software power cap with the SM clock 20 % or more under what that GPU ran at busy;
* **one slow GPU**: among three or more busy GPUs, one whose SM clock is 20 % or more under the
  others' median with no slowdown reason, or one pinned near 100 % while the others fell 35 points
  under it (they wait for it in every all-to-all);
* **PCIe saturation**: a GPU moving 70 % or more of its link's bandwidth in one direction (the
  link's current generation and width, Gen5 x16 when not reported).

The bar for each is deliberately high: the attribution only calls a state a cause where it held in
the stretch and not around it, and ordinary load (the power cap under a full batch, the EPLB rank
that runs a little hotter) must not read as a cause.
"""

from __future__ import annotations

import statistics
from collections import deque

from kimitui.analysis.causes.episodes import Episode, EpisodeRun
from kimitui.analysis.causes.gpu_figures import GpuFigures, GpuMoment, gpu_figures, gpu_words, moment_of
from kimitui.events import GpuReading

SLOWDOWN_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
CLOCK_DROP = 0.8
"""A clock under this fraction of its reference counts as slowed."""
PINNED_UTIL = 90.0
PINNED_MARGIN = 35.0
BUSY_UTIL = 20.0
PCIE_SATURATED = 0.7
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
"""Usable GB/s per lane and direction, by PCIe generation."""
IDLE_UTIL = 5.0
"""Every GPU at or under this while requests are running: the server stood still (a stuck scheduler)."""
RUNNING_FRESH_S = 30.0
"""How long the scheduler's last ``#running-req`` stays the figure a GPU sample is read against."""
MAX_SPAN_S = 5.0
"""A sample covers at most this much before it (after a pause in sampling, the gap is unknown)."""


def link_kbps(gen: int | None, width: int | None) -> float:
    """A link's bandwidth per direction in NVML's KB/s."""
    return LANE_GBPS.get(gen or 5, LANE_GBPS[5]) * (width or 16) * 1e6


def gpu_set(indices: list[int], total: int) -> str:
    """``all 8 GPUs`` / ``GPU 3`` / ``GPU 0,2``."""
    if total > 1 and len(indices) == total:
        return f"all {total} GPUs"
    return f"GPU {','.join(str(i) for i in sorted(indices))}"


class GpuSources:
    """Folds placed GPU samples into throttle, slow-GPU and PCIe episodes, and keeps their moments."""

    def __init__(self, lists: dict[str, list[Episode]], keep_moments: int = 20_000) -> None:
        self._throttle = EpisodeRun("gpu_throttle", 0.0, lists["gpu_throttle"])
        self._slow = EpisodeRun("slow_gpu", 0.0, lists["slow_gpu"])
        self._pcie = EpisodeRun("pcie_saturation", 0.0, lists["pcie_saturation"])
        self._idle = EpisodeRun("server_unhealthy", 0.0, lists["server_unhealthy"])
        self.running: tuple[float, float] | None = None
        """(when, how many) from the scheduler's last Decode or Prefill line."""
        self._ref_clock: dict[int, float] = {}
        self._last: float | None = None
        self.moments: deque[GpuMoment] = deque(maxlen=keep_moments)

    def add(self, gpus: list[GpuReading], at: float) -> None:
        start = self._last if self._last is not None and 0 < at - self._last <= MAX_SPAN_S else at - 1.0
        self._last = at
        utils = [r.util_pct for r in gpus if r.util_pct is not None]
        self.moments.append(moment_of(gpus, at))
        self._flag(self._throttle, self._throttled(gpus), start, at)
        self._flag(self._slow, self._slow_one(gpus), start, at)
        self._flag(self._pcie, self._saturated(gpus), start, at)
        self._flag(self._idle, self._stood_still(utils, at), start, at)
        for r in gpus:  # the reference: the fastest clock each GPU ran at while busy and unthrottled
            if r.sm_clock_mhz and (r.util_pct or 0.0) >= BUSY_UTIL and not SLOWDOWN_REASONS & set(r.throttle_reasons or ()):
                self._ref_clock[r.index] = max(self._ref_clock.get(r.index, 0.0), r.sm_clock_mhz)

    @staticmethod
    def _flag(run: EpisodeRun, found: tuple[str, dict[str, float | str]] | None, start: float, at: float) -> None:
        if found is None:
            run.idle()
        else:
            run.observe(start, at, found[0], **found[1])

    def _throttled(self, gpus: list[GpuReading]) -> tuple[str, dict[str, float | str]] | None:
        hit, clocks, temps = [], [], []
        reasons: set[str] = set()
        for r in gpus:
            slow = SLOWDOWN_REASONS & set(r.throttle_reasons or ())
            ref = self._ref_clock.get(r.index)
            capped = ("sw_power_cap" in (r.throttle_reasons or ()) and ref and r.sm_clock_mhz is not None
                      and r.sm_clock_mhz < CLOCK_DROP * ref)
            if slow or capped:
                hit.append(r.index)
                reasons |= slow or {"sw_power_cap"}
                if r.sm_clock_mhz is not None:
                    clocks.append(r.sm_clock_mhz)
                if r.temp_c is not None:
                    temps.append(r.temp_c)
        if not hit:
            return None
        said = f"{gpu_set(hit, len(gpus))} {', '.join(sorted(reasons))}"
        refs = [self._ref_clock[i] for i in hit if i in self._ref_clock]
        if clocks:
            said += f", SM clock {min(clocks):.0f} MHz" + (f" (from {max(refs):.0f})" if refs else "")
        if temps:
            said += f", {max(temps):.0f} °C"
        return said, {"gpus": ",".join(map(str, hit))}

    def _stood_still(self, utils: list[float], at: float) -> tuple[str, dict[str, float | str]] | None:
        """All GPUs idle while the scheduler had requests running: weaker evidence than /health (a stall
        cause only where nothing the server said explains the stretch)."""
        run = self.running
        if not utils or max(utils) > IDLE_UTIL or run is None or run[1] < 1 or not 0 <= at - run[0] <= RUNNING_FRESH_S:
            return None
        n = len(utils)
        return (f"{'all ' + str(n) + ' GPUs' if n > 1 else 'the GPU'} idle (≤ {IDLE_UTIL:.0f} %) with {run[1]:.0f} "
                f"request{'s' if run[1] != 1 else ''} running: the scheduler stood still", {"weak": 1.0})

    def _slow_one(self, gpus: list[GpuReading]) -> tuple[str, dict[str, float | str]] | None:
        busy = [r for r in gpus if (r.util_pct or 0.0) >= BUSY_UTIL and not SLOWDOWN_REASONS & set(r.throttle_reasons or ())]
        if len(busy) < 3:
            return None
        clocked = [r for r in busy if r.sm_clock_mhz]
        if len(clocked) >= 3:
            low = min(clocked, key=lambda r: r.sm_clock_mhz or 0.0)
            others = statistics.median(r.sm_clock_mhz or 0.0 for r in clocked if r is not low)
            if (low.sm_clock_mhz or 0.0) < CLOCK_DROP * others:
                return self._slow_said(low, busy, f"SM clock {low.sm_clock_mhz:.0f} MHz against {others:.0f}")
        top = max(busy, key=lambda r: r.util_pct or 0.0)
        rest = statistics.median(r.util_pct or 0.0 for r in busy if r is not top)
        if (top.util_pct or 0.0) >= PINNED_UTIL and rest <= (top.util_pct or 0.0) - PINNED_MARGIN:
            return self._slow_said(top, busy, f"{top.util_pct:.0f} % busy while the others ran at {rest:.0f} %")
        return None

    @staticmethod
    def _slow_said(gpu: GpuReading, busy: list[GpuReading], what: str) -> tuple[str, dict[str, float | str]]:
        temps = [r.temp_c for r in busy if r is not gpu and r.temp_c is not None]
        said = f"GPU {gpu.index} {what}"
        if gpu.temp_c is not None and temps and gpu.temp_c >= statistics.median(temps) + 5:
            said += f", {gpu.temp_c:.0f} °C (others {statistics.median(temps):.0f})"
        return said, {"gpus": str(gpu.index)}

    @staticmethod
    def _saturated(gpus: list[GpuReading]) -> tuple[str, dict[str, float | str]] | None:
        hit, peak, cap = [], 0.0, 0.0
        for r in gpus:
            moved = max(r.pcie_tx_kbps or 0.0, r.pcie_rx_kbps or 0.0)
            limit = link_kbps(r.pcie_gen, r.pcie_width)
            if moved >= PCIE_SATURATED * limit:
                hit.append(r.index)
                if moved > peak:
                    peak, cap = moved, limit
        if not hit:
            return None
        return (f"{gpu_set(hit, len(gpus))} PCIe at {peak / 1e6:.0f} GB/s of {cap / 1e6:.0f} GB/s",
                {"gpus": ",".join(map(str, hit))})

    def figures(self, a: float, b: float) -> GpuFigures | None:
        """Each GPU's mean utilisation over ``[a, b]`` (host clock) and before it (:mod:`.gpu_figures`)."""
        return gpu_figures(self.moments, a, b)

    def note(self, a: float, b: float) -> str:
        """What the GPUs did over ``[a, b]``: ``all 8 GPUs fell from 88–93 % to 8–11 % utilisation, PCIe 21 GB/s``."""
        return gpu_words(self.figures(a, b))
