"""Energy per level: the GPUs' own power draw joined to the tokens a level produced (issue 34).

Pure functions and one folding accumulator, no I/O and no Textual: the cockpit and a headless sweep
fold events as they come (:class:`EnergyFolder`), a report folds a recording's events the same way.

Definitions (the figures an operator buys GPUs by, so each is said exactly):

* **Power of all GPUs** = the sum over the host's GPUs of each GPU's ``power_w``, every GPU integrated
  on its own samples (:class:`~kimitui.events.GpuSample`, matched to the sweep by ``host``; the GPUs of a
  deployment over several nodes are told apart by ``node``).
* **Energy of a window** (J) = per GPU, the trapezoid over its samples, clipped at the window's edges
  (the power at an edge is interpolated between the samples either side of it).  Two samples more than
  ``max_gap_s`` (:data:`MAX_GAP_S`) apart leave the span between them *uncovered*: telemetry was lost
  there and nothing is drawn across it; a reading without ``power_w`` is no sample.
* **Coverage** of a GPU = its covered seconds / the window's length.  When every GPU covers at least
  ``min_coverage`` (:data:`MIN_COVERAGE`, 90 %), a GPU's mean power is its energy over its covered
  seconds, the host's mean power is the sum of those means, and the window's energy is that mean times
  the window's length (the uncovered tenth is taken to draw the mean of the rest; at full coverage it is
  the plain integral).  Below it, or with no samples at all, every figure is ``None`` and ``reason`` says
  which GPU covered how much: a figure is never invented.
* **Peak power** = the largest sum over GPUs at any sample instant inside the window where every GPU's
  power is known (interpolated between its own samples).
* **Windows of a level**: the *aggregate* window is the level's seed-comparable one, first measured send
  to last completed end of its completed requests (:func:`kimitui.analysis.level_stats.level_result`'s
  ``wall_s``); the *steady* window is the level's ``[steady_start, steady_end]``.
* **J per output token** (aggregate) = the aggregate window's energy / the level's output tokens
  (= mean power / ``agg_tok_s``); **J per output token (steady)** = the steady window's mean power /
  ``steady_tok_s``.  Named separately everywhere: they differ as the two rates do.
* **Tokens per second per kW** = ``agg_tok_s`` / (mean power in kW), which is also tokens per kJ
  (1000 / J per token): the energy objective ``tokens_per_kj``.
* **Idle power** = the mean power of all GPUs over the :data:`IDLE_SPAN_S` seconds before the sweep
  started (before its prompt calibration and first level), begun no earlier than :data:`IDLE_SETTLE_S`
  after the host's last request ended (a previous sweep's tail is not idle), at least
  :data:`IDLE_MIN_S` long.  Measured once per sweep.  **Marginal J per token** = (mean power - idle
  power) / ``agg_tok_s``: the energy the load itself cost, above what the GPUs draw serving nothing.
  kimitui cannot see traffic it did not send: on a server others use, the idle figure says so by being
  high.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from kimitui.events import Event, GpuSample, LevelResult, LevelStarted, RequestResult, SweepStarted

MIN_COVERAGE = 0.9
"""Least share of a window each GPU's samples must cover for the window's power figures to exist."""
MAX_GAP_S = 3.0
"""Samples further apart than this leave the span between them uncovered (the agent ticks every 0.25 s;
3 s is a dozen lost ticks, or a 1 Hz agent that lost two)."""
IDLE_SPAN_S = 10.0
"""Idle power is measured over (at most) this long before a sweep starts."""
IDLE_MIN_S = 3.0
"""...and over at least this long, else it is not measured (a sweep started the moment telemetry began)."""
IDLE_SETTLE_S = 2.0
"""The idle window begins at least this long after the host's last request ended: GPUs take a moment
to fall back to idle clocks."""

GpuKey = tuple[str | None, int]
"""A GPU of a host: (node, index); node is None on a lone server."""


def gpu_name(key: GpuKey) -> str:
    """``GPU 3`` or ``GPU 3@node-1``."""
    node, index = key
    return f"GPU {index}" + (f"@{node}" if node else "")


@dataclass(frozen=True)
class WindowPower:
    """All GPUs of a host over one window ``[start, end]``; the figures are None with ``reason`` when the
    samples do not cover the window well enough (see the module doc)."""

    start: float
    end: float
    gpus: int = 0
    """GPUs counted (every GPU the host reported, power or not)."""
    mean_w: float | None = None
    peak_w: float | None = None
    energy_j: float | None = None
    coverage: float | None = None
    """The least-covered GPU's share of the window (0..1); None without any GPU."""
    reason: str = ""
    """Why the figures are None, in words (``GPU 3 covered 41 % of the window (need 90 %)``)."""

    @property
    def ok(self) -> bool:
        return self.mean_w is not None

    @property
    def seconds(self) -> float:
        return self.end - self.start


class _Series:
    """One GPU's power samples in time order."""

    __slots__ = ("t", "w")

    def __init__(self) -> None:
        self.t: list[float] = []
        self.w: list[float] = []

    def add(self, t: float, w: float) -> None:
        if not self.t or t > self.t[-1]:
            self.t.append(t)
            self.w.append(w)
            return
        i = bisect.bisect_right(self.t, t)
        if i and self.t[i - 1] == t:  # the same instant twice: keep the newer reading
            self.w[i - 1] = w
            return
        self.t.insert(i, t)
        self.w.insert(i, w)

    def trim(self, before: float) -> None:
        """Forget samples before ``before``, keeping the last one before it (an edge interpolates from it)."""
        i = bisect.bisect_left(self.t, before) - 1
        if i > 0:
            del self.t[:i]
            del self.w[:i]

    def integrate(self, a: float, b: float, max_gap_s: float) -> tuple[float, float]:
        """(joules, covered seconds) over ``[a, b]``: trapezoids between samples at most ``max_gap_s``
        apart, each clipped to the window."""
        ts, ws = self.t, self.w
        if len(ts) < 2 or b <= a:
            return 0.0, 0.0
        lo = max(0, bisect.bisect_right(ts, a) - 1)
        hi = min(len(ts) - 1, bisect.bisect_left(ts, b))
        energy = covered = 0.0
        for i in range(lo, hi):
            t0, t1 = ts[i], ts[i + 1]
            if t1 - t0 > max_gap_s or t1 <= a or t0 >= b:
                continue
            w0, w1 = ws[i], ws[i + 1]
            x0, x1 = max(a, t0), min(b, t1)
            slope = (w1 - w0) / (t1 - t0)
            y0, y1 = w0 + slope * (x0 - t0), w0 + slope * (x1 - t0)
            energy += (y0 + y1) / 2.0 * (x1 - x0)
            covered += x1 - x0
        return energy, covered

    def at(self, t: float, max_gap_s: float) -> float | None:
        """Power at ``t`` interpolated between the samples either side (None in a gap or outside)."""
        ts = self.t
        i = bisect.bisect_left(ts, t)
        if i < len(ts) and ts[i] == t:
            return self.w[i]
        if i == 0 or i == len(ts) or ts[i] - ts[i - 1] > max_gap_s:
            return None
        t0, t1, w0, w1 = ts[i - 1], ts[i], self.w[i - 1], self.w[i]
        return w0 + (w1 - w0) * (t - t0) / (t1 - t0)


class PowerTrace:
    """One host's GPU power samples, per GPU, in time order: what every window's figures are computed from."""

    def __init__(self, max_gap_s: float = MAX_GAP_S) -> None:
        self.max_gap_s = max_gap_s
        self._series: dict[GpuKey, _Series] = {}
        self._seen: set[GpuKey] = set()
        """Every GPU the host reported, with power or without (one that never reports power still counts)."""
        self._ticks: list[float] = []
        self.first_t: float | None = None
        self.last_t: float | None = None

    def add(self, sample: GpuSample) -> None:
        """Take one tick (every GPU's reading in it); readings without ``power_w`` are no sample."""
        t = sample.t
        for r in sample.gpus:
            key = (sample.node, r.index)
            self._seen.add(key)
            if r.power_w is not None and math.isfinite(r.power_w):
                self._series.setdefault(key, _Series()).add(t, float(r.power_w))
        if not self._ticks or t > self._ticks[-1]:
            self._ticks.append(t)
        else:
            bisect.insort(self._ticks, t)
        self.first_t = t if self.first_t is None else min(self.first_t, t)
        self.last_t = t if self.last_t is None else max(self.last_t, t)

    @property
    def gpus(self) -> list[GpuKey]:
        """Every GPU seen, sorted (node, index)."""
        return sorted(self._seen, key=lambda k: (k[0] or "", k[1]))

    def trim(self, before: float) -> None:
        """Forget what lies before ``before`` (the last sample before it stays, for interpolation)."""
        for s in self._series.values():
            s.trim(before)
        i = bisect.bisect_left(self._ticks, before)
        if i:
            del self._ticks[:i]

    def window(self, start: float, end: float, min_coverage: float = MIN_COVERAGE) -> WindowPower:
        """Mean, peak and energy of all GPUs over ``[start, end]`` (see the module doc for the rules)."""
        if end <= start:
            return WindowPower(start, end, len(self._seen), reason="the window is empty")
        gpus = self.gpus
        if not gpus:
            return WindowPower(start, end, reason="no GPU samples")
        length = end - start
        means: list[float] = []
        coverage = 1.0
        short: list[str] = []
        for key in gpus:
            series = self._series.get(key)
            if series is None:
                short.append(f"{gpu_name(key)} reports no power draw")
                coverage = 0.0
                continue
            energy, covered = series.integrate(start, end, self.max_gap_s)
            share = covered / length
            coverage = min(coverage, share)
            if share < min_coverage:
                short.append(f"{gpu_name(key)} covered {share * 100:.0f} % of the window "
                             f"(need {min_coverage * 100:.0f} %)")
            elif covered > 0:
                means.append(energy / covered)
        if short:
            return WindowPower(start, end, len(gpus), coverage=coverage, reason=_join_short(short, len(gpus)))
        mean = sum(means)
        return WindowPower(start, end, len(gpus), mean_w=mean, peak_w=self._peak(gpus, start, end),
                           energy_j=mean * length, coverage=coverage)

    def _peak(self, gpus: list[GpuKey], start: float, end: float) -> float | None:
        lo, hi = bisect.bisect_left(self._ticks, start), bisect.bisect_right(self._ticks, end)
        best: float | None = None
        for t in self._ticks[lo:hi]:
            total = 0.0
            for key in gpus:
                w = self._series[key].at(t, self.max_gap_s)
                if w is None:
                    break
                total += w
            else:
                best = total if best is None else max(best, total)
        return best


def _join_short(short: list[str], n: int) -> str:
    if len(short) > 3:
        return f"{len(short)} of {n} GPUs short: " + "; ".join(short[:3]) + "; ..."
    return "; ".join(short)


def idle_window(trace: PowerTrace, before: float, last_busy: float | None = None, *,
                span_s: float = IDLE_SPAN_S, min_s: float = IDLE_MIN_S,
                settle_s: float = IDLE_SETTLE_S) -> WindowPower:
    """Idle power of all GPUs over the ``span_s`` before ``before`` (a sweep's start), begun no earlier than
    the trace's first sample or ``settle_s`` after ``last_busy`` (the host's last request end); None figures
    with why when under ``min_s`` of it is left."""
    start = before - span_s
    if trace.first_t is not None:
        start = max(start, trace.first_t)
    if last_busy is not None:
        start = max(start, last_busy + settle_s)
    if trace.first_t is None:
        return WindowPower(before - span_s, before, reason="no GPU samples before the sweep")
    if before - start < min_s:
        why = (f"only {max(0.0, before - start):.1f} s of idle GPU samples before the sweep (need {min_s:g} s)")
        return WindowPower(min(start, before), before, len(trace.gpus), reason=why)
    return trace.window(start, before)


# --------------------------------------------------------------------------- a level's figures


@dataclass(frozen=True)
class LevelEnergy:
    """The energy figures of one level (one repeat of one C of one sweep)."""

    sweep_id: str
    concurrency: int
    repeat: int
    agg: WindowPower
    """Over the seed-comparable aggregate window (first measured send to last completed end)."""
    steady: WindowPower | None
    """Over the steady window; None when the level has none."""
    output_tokens: int = 0
    agg_tok_s: float | None = None
    steady_tok_s: float | None = None
    idle_w: float | None = None
    """The sweep's idle power (all GPUs), when it was measured."""
    window_from: str = "requests"
    """``requests`` (the level's own requests bound the aggregate window) or ``wall`` (an older recording
    without them: the level's result time less its wall time)."""

    @property
    def gpus(self) -> int:
        return self.agg.gpus

    @property
    def mean_w(self) -> float | None:
        return self.agg.mean_w

    @property
    def peak_w(self) -> float | None:
        return self.agg.peak_w

    @property
    def energy_j(self) -> float | None:
        return self.agg.energy_j

    @property
    def j_per_token(self) -> float | None:
        """Aggregate window's energy / output tokens (seed-comparable)."""
        if self.agg.energy_j is None or self.output_tokens <= 0:
            return None
        return self.agg.energy_j / self.output_tokens

    @property
    def j_per_token_steady(self) -> float | None:
        """Steady window's mean power / steady tok/s."""
        if self.steady is None or self.steady.mean_w is None or not self.steady_tok_s:
            return None
        return self.steady.mean_w / self.steady_tok_s

    @property
    def tokens_per_kj(self) -> float | None:
        """Aggregate tok/s per kW of all GPUs' mean power (= output tokens per kJ)."""
        if self.agg.mean_w is None or self.agg.mean_w <= 0 or not self.agg_tok_s:
            return None
        return self.agg_tok_s / (self.agg.mean_w / 1000.0)

    @property
    def marginal_j_per_token(self) -> float | None:
        """(Mean power - idle power) / aggregate tok/s: the load's own energy per token."""
        if self.agg.mean_w is None or self.idle_w is None or not self.agg_tok_s:
            return None
        return (self.agg.mean_w - self.idle_w) / self.agg_tok_s

    @property
    def reason(self) -> str:
        """Why there are no energy figures (empty when there are)."""
        return self.agg.reason if not self.agg.ok else ""


def aggregate_window(requests: Iterable[RequestResult]) -> tuple[float, float] | None:
    """First send to last end of the completed measured requests (the seed-comparable window); None: none."""
    start = end = None
    for r in requests:
        if r.warmup or not r.ok:
            continue
        e = r.sent + (r.e2e_s or 0.0)
        start = r.sent if start is None else min(start, r.sent)
        end = e if end is None else max(end, e)
    return None if start is None or end is None else (start, end)


def level_energy(level: LevelResult, trace: PowerTrace | None, window: tuple[float, float] | None, *,
                 idle: WindowPower | None = None, min_coverage: float = MIN_COVERAGE) -> LevelEnergy:
    """A level's energy figures over its aggregate ``window`` (None: its result time less its wall time)
    and its steady window, from ``trace`` (None: the host streamed no GPUs)."""
    window_from = "requests"
    if window is None:
        window, window_from = (level.t - level.wall_s, level.t), "wall"
    start, end = window
    steady_bounds = ((level.steady_start, level.steady_end)
                     if level.steady_start is not None and level.steady_end is not None else None)
    if trace is None:
        why = "no GPU samples from this host (a sweep with no GPUs streamed)"
        agg = WindowPower(start, end, reason=why)
        steady = WindowPower(*steady_bounds, reason=why) if steady_bounds else None
    else:
        agg = trace.window(start, end, min_coverage) if level.output_tokens else WindowPower(
            start, end, len(trace.gpus), reason="the level completed no request")
        steady = trace.window(*steady_bounds, min_coverage) if steady_bounds else None
    return LevelEnergy(level.sweep_id, level.concurrency, level.repeat, agg, steady,
                       output_tokens=level.output_tokens, agg_tok_s=level.agg_tok_s,
                       steady_tok_s=level.steady_tok_s,
                       idle_w=idle.mean_w if idle is not None else None, window_from=window_from)


# --------------------------------------------------------------------------- folding events


LevelKey = tuple[str, int, int]
"""(sweep_id, concurrency, repeat)."""


@dataclass
class _Open:
    """A level between its start and its final energy figures."""

    host: str
    start: float
    first_send: float | None = None
    last_end: float | None = None
    result: LevelResult | None = None

    def window(self) -> tuple[float, float] | None:
        if self.first_send is None or self.last_end is None:
            return None
        return self.first_send, self.last_end


@dataclass
class EnergyFolder:
    """Energy figures from events in order, live or from a recording: feed every event to :meth:`add`.

    Per host it keeps the GPU power samples it still needs (the open levels' and the idle span's); a
    level's figures are final once a sample at or past its window's end arrived, or ``max_gap_s`` of event
    time passed without one (then they say what is missing); :meth:`finish` settles what is still open
    (the end of a recording).  Bounded: samples older than every open level and the idle span are dropped.
    """

    min_coverage: float = MIN_COVERAGE
    max_gap_s: float = MAX_GAP_S
    idle_span_s: float = IDLE_SPAN_S
    levels: dict[LevelKey, LevelEnergy] = field(default_factory=dict)
    """Every level's final figures."""
    idle: dict[str, WindowPower] = field(default_factory=dict)
    """sweep_id -> the idle power measured before it."""
    sweep_host: dict[str, str] = field(default_factory=dict)
    _traces: dict[str, PowerTrace] = field(default_factory=dict)
    _open: dict[LevelKey, _Open] = field(default_factory=dict)
    _current: dict[tuple[str, int], LevelKey] = field(default_factory=dict)
    """(sweep_id, C) -> the repeat running now (request results carry no repeat)."""
    _last_busy: dict[str, float] = field(default_factory=dict)
    """host -> the last request end seen."""
    _added: int = 0

    def trace(self, host: str) -> PowerTrace | None:
        """The host's power samples (None: none seen)."""
        return self._traces.get(host)

    def level(self, sweep_id: str, concurrency: int, repeat: int = 0) -> LevelEnergy | None:
        return self.levels.get((sweep_id, concurrency, repeat))

    def idle_of(self, sweep_id: str) -> WindowPower | None:
        return self.idle.get(sweep_id)

    def add(self, event: Event) -> list[LevelEnergy]:
        """Fold one event; returns the levels whose figures became final with it (oldest first)."""
        if isinstance(event, GpuSample):
            trace = self._traces.get(event.host)
            if trace is None:
                trace = self._traces[event.host] = PowerTrace(self.max_gap_s)
            trace.add(event)
            self._added += 1
            if self._added % 256 == 0:
                self._trim(event.host, event.t)
        elif isinstance(event, SweepStarted):
            self.sweep_host[event.sweep_id] = event.host
            trace = self._traces.get(event.host)
            self.idle[event.sweep_id] = (
                idle_window(trace, event.t, self._last_busy.get(event.host), span_s=self.idle_span_s)
                if trace is not None else
                WindowPower(event.t - self.idle_span_s, event.t, reason="no GPU samples before the sweep"))
        elif isinstance(event, LevelStarted):
            key = (event.sweep_id, event.concurrency, event.repeat)
            self._open[key] = _Open(self.sweep_host.get(event.sweep_id, event.host), event.t)
            self._current[(event.sweep_id, event.concurrency)] = key
        elif isinstance(event, RequestResult):
            end = event.sent + (event.e2e_s or 0.0)
            self._last_busy[event.host] = max(self._last_busy.get(event.host, end), end)
            running = self._current.get((event.sweep_id, event.concurrency))
            lv = self._open.get(running) if running is not None else None
            if lv is not None and lv.result is None and event.ok and not event.warmup:
                lv.first_send = event.sent if lv.first_send is None else min(lv.first_send, event.sent)
                lv.last_end = end if lv.last_end is None else max(lv.last_end, end)
        elif isinstance(event, LevelResult):
            key = (event.sweep_id, event.concurrency, event.repeat)
            lv = self._open.get(key)
            if lv is None:  # a recording that starts mid-sweep: no start seen
                lv = self._open[key] = _Open(self.sweep_host.get(event.sweep_id, event.host),
                                             event.t - event.wall_s)
            lv.result = event
            self._last_busy[lv.host] = max(self._last_busy.get(lv.host, event.t), event.t)
        return self._settle(event.t)

    def finish(self, sweep_id: str | None = None) -> list[LevelEnergy]:
        """Settle every level that has its result (only ``sweep_id``'s, if named), with the samples there are:
        the end of a recording, or a sweep's result (an exporter that will not wait for a late sample)."""
        return self._settle(math.inf, sweep_id)

    def _settle(self, now: float, only: str | None = None) -> list[LevelEnergy]:
        out: list[LevelEnergy] = []
        for key, lv in list(self._open.items()):
            if lv.result is None or (only is not None and key[0] != only):
                continue
            window = lv.window()
            end = window[1] if window is not None else lv.result.t
            if lv.result.steady_end is not None:
                end = max(end, lv.result.steady_end)
            trace = self._traces.get(lv.host)
            sampled_past = trace is not None and trace.last_t is not None and trace.last_t >= end
            if not (sampled_past or trace is None or now >= end + self.max_gap_s):
                continue
            figures = level_energy(lv.result, trace, window, idle=self.idle.get(key[0]),
                                   min_coverage=self.min_coverage)
            self.levels[key] = figures
            out.append(figures)
            del self._open[key]
            if self._current.get((key[0], key[1])) == key:
                del self._current[(key[0], key[1])]
        return out

    def _trim(self, host: str, now: float) -> None:
        keep = now - self.idle_span_s - IDLE_SETTLE_S - self.max_gap_s
        for lv in self._open.values():
            if lv.host == host:
                keep = min(keep, lv.start, lv.first_send if lv.first_send is not None else lv.start)
        trace = self._traces.get(host)
        if trace is not None:
            trace.trim(keep)


def fold(events: Iterable[Event], *, min_coverage: float = MIN_COVERAGE, max_gap_s: float = MAX_GAP_S,
         idle_span_s: float = IDLE_SPAN_S) -> EnergyFolder:
    """Every level's energy figures from events in time order (a recording): :class:`EnergyFolder` run to
    the end and settled."""
    folder = EnergyFolder(min_coverage=min_coverage, max_gap_s=max_gap_s, idle_span_s=idle_span_s)
    for ev in events:
        folder.add(ev)
    folder.finish()
    return folder
