"""The straggler window's memory: GPU samples and log lines of the last minutes, held as what it shows.

A straggler opened now is explained by what the GPUs and the log did around it; keeping those
events whole grew the cockpit by tens of megabytes, so this keeps just the shown fields.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections import deque
from typing import TypeAlias, TypeVar

from kimitui.analysis.causes.event_clock import sample_time
from kimitui.analysis.window import WindowView, summarize_gpus
from kimitui.events import GpuReading, GpuSample, LogLine, LogSeverity

HISTORY_HORIZON_S = 1200.0
"""GPU samples and log lines kept for straggler windows: 20 minutes, or since the running sweep began."""

_NAN = float("nan")
_GPU_FIELDS = ("util_pct", "pcie_tx_kbps", "pcie_rx_kbps", "temp_c", "power_w")
"""What the straggler window shows of a GPU reading, in the order ``CompactHistory._sample`` reads them."""

GpuEntry: TypeAlias = tuple[float, str, int, "array[float]", "tuple[tuple[str, ...] | None, ...] | None"]
"""A GPU sample as the straggler window keeps it: t, host, seq, per GPU index + ``_GPU_FIELDS``, throttles."""
LogRow: TypeAlias = tuple[float, str, LogSeverity, str, str]
"""A log line as the straggler window keeps it: t, host, severity, kind, text."""
Row = TypeVar("Row", GpuEntry, LogRow)


class CompactHistory:
    """The straggler window's rings with each entry held as what the window shows (~25x smaller).

    A GPU sample is kept as its time and, per GPU, index + utilisation, PCIe, temperature,
    power (an ``array('d')``, NaN for not reported) and throttle reasons; a log line as its
    time, severity, kind and text.  ``window`` rebuilds events with just those fields, so the
    straggler view reads the same as over ``analysis.window.EventHistory``.  A GpuSample parsed
    from the agent's JSON is about 14 KB, so 6,000 of them held whole were 84 MB.

    Entries also age out: only the running sweep's stragglers can be opened, so what is older
    than both ``horizon_s`` and the running sweep's start is dropped (the counts stay caps).
    That way the rings are full after the first sweep and a long session does not grow.
    """

    def __init__(self, horizon_s: float = HISTORY_HORIZON_S, max_gpu_samples: int = 6_000,
                 max_log_lines: int = 20_000) -> None:
        self.horizon_s = horizon_s
        self.keep_since: float | None = None
        """The running sweep's start: kept however long ago (within the count caps)."""
        self._gpu: deque[GpuEntry] = deque(maxlen=max_gpu_samples)
        self._logs: deque[LogRow] = deque(maxlen=max_log_lines)

    def __len__(self) -> int:
        return len(self._gpu) + len(self._logs)

    def _age_out(self, ring: deque[Row], t: float) -> None:
        floor = t - self.horizon_s
        if self.keep_since is not None:
            floor = min(floor, self.keep_since)
        while ring and ring[0][0] < floor:
            ring.popleft()

    def add(self, event: object) -> None:
        """Keep the event if it is a GPU sample or a log line; ignore anything else."""
        if isinstance(event, GpuSample):
            vals = array("d")
            thr: list[tuple[str, ...] | None] = []
            for r in event.gpus:
                vals.append(r.index)
                for name in _GPU_FIELDS:
                    v = getattr(r, name)
                    vals.append(_NAN if v is None else v)
                thr.append(tuple(r.throttle_reasons) if r.throttle_reasons else None)
            at = sample_time(event)  # the host's clock: the gap's GPU figures are read on it (issue 29)
            self._gpu.append((at, sys.intern(event.host), event.seq, vals, tuple(thr) if any(thr) else None))
            self._age_out(self._gpu, at)
        elif isinstance(event, LogLine):
            self._logs.append((event.t, sys.intern(event.host), event.severity, sys.intern(event.line_kind), event.raw))
            self._age_out(self._logs, event.t)

    @staticmethod
    def _slice_t(ring: deque[Row], start: float, end: float) -> list[Row]:
        return sorted((e for e in ring if start <= e[0] <= end), key=lambda e: e[0])

    @staticmethod
    def _sample(entry: GpuEntry) -> GpuSample:
        t, host, seq, vals, thr = entry
        width = 1 + len(_GPU_FIELDS)
        gpus = []
        for k in range(len(vals) // width):
            index, util, tx, rx, temp, power = (None if math.isnan(v) else v for v in vals[k * width:(k + 1) * width])
            gpus.append(GpuReading(index=int(index or 0), util_pct=util, pcie_tx_kbps=tx, pcie_rx_kbps=rx, temp_c=temp,
                                   power_w=power, throttle_reasons=list(thr[k] or []) if thr else []))
        return GpuSample(t=t, host=host, seq=seq, gpus=gpus)

    def window(self, start: float, end: float, pad_s: float = 1.0) -> WindowView:
        """Everything in ``[start - pad_s, end + pad_s]`` and a per-GPU summary of it."""
        if end < start:
            start, end = end, start
        lo, hi = start - pad_s, end + pad_s
        samples = [self._sample(e) for e in self._slice_t(self._gpu, lo, hi)]
        before = [self._sample(e) for e in self._slice_t(self._gpu, lo - (hi - lo), lo)]
        lines = [LogLine(t=t, host=host, severity=sev, line_kind=kind, raw=raw)
                 for t, host, sev, kind, raw in self._slice_t(self._logs, lo, hi)]
        return WindowView(start=lo, end=hi, gpu_samples=samples, log_lines=lines,
                          gpus=summarize_gpus(samples, before))
