"""The cockpit's state: everything the panels show, folded from Session events.

The app drains its subscription a few times a second and hands the batch to
:meth:`CockpitModel.apply`, which updates bounded state and says which panels
changed; widgets then render from this model.  Keeping the fold here (no
Textual imports) means a replayed recording and a live session produce the
same screen, and the fold is testable without a terminal.
"""

from __future__ import annotations

import math
import sys
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypeVar, cast, get_args

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.event_clock import sample_time
from kimitui.capacity.answer import CapacityAnswer, Probe, answer_from_points, point_of
from kimitui.capacity.answer import CurvePoint as CapacityPoint
from kimitui.capacity.slo import Slo, parse_slo
from kimitui.config import DEFAULT_SLO
from kimitui.analysis.causes.tail import LevelLoss
from kimitui.analysis.window import WindowView, summarize_gpus
from kimitui.analysis.level_stats import client_limited_throughput, effective_status
from kimitui.sglang.log import fields_if
from kimitui.tui.model.log_ring import POLLING, LogEntry, LogRing
from kimitui.tui.model.server_figures import HISTORY_KEYS, PD_KEYS, SCHED_KEYS, PrefillRate, Retraction
from kimitui.tui.model.cause_book import CauseBook
from kimitui.tui.model.heatmap_data import HeatWindows
from kimitui.tui.model.spec_watch import SpecWatch
from kimitui.tui.model.timeline_marks import Timeline
from kimitui.events import (
    LogSeverity,
    Baseline,
    ConnectionState,
    Dropped,
    ErrorEvent,
    Event,
    ExpertLoad,
    GpuCaps,
    GpuEvent,
    GpuProcess,
    GpuProcs,
    GpuReading,
    GpuSample,
    GpuStatic,
    LevelResult,
    LevelStarted,
    LogLine,
    Marker,
    Note,
    ProfileState,
    ProfileSwitch,
    RequestResult,
    ServerHealth,
    ServerInfo,
    ServerStats,
    Straggler,
    SwapProgress,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
    ReplayState,
    TuneProgress,
)

HISTORY = 120
"""Points kept per live series (util per GPU, server figures)."""

SEVERITY_RANK = {"debug": 0, "info": 1, "warning": 2, "error": 3, "critical": 4}

COMPARE_KINDS = frozenset({"server_info", "profile_switch", "sweep_started", "level_result", "request_result",
                           "sweep_result"})
"""What ``kimitui.report`` needs to rebuild and compare sweeps (the compare view)."""

DETAIL_SWEEPS = 3
"""Sweeps whose per-request figures the compare view keeps; older sweeps keep their level rows only."""

COMPARE_SWEEPS = 64
"""Sweeps whose level rows the compare view keeps, besides each profile's last (at most twice this in all).
Back-to-back 12 s sweeps are 300 an hour: a whole session's rows grew the cockpit without end (issue 30)."""

HISTORY_HORIZON_S = 1200.0
"""GPU samples and log lines kept for straggler windows: 20 minutes, or since the running sweep began."""

STRAGGLER_RESULTS = 256
"""Stragglers per sweep whose request result (with its chunk offsets) the cockpit keeps."""

Part = Literal["header", "gpus", "server", "log", "curve", "spread", "levels", "stragglers", "timeline", "experts"]
"""A part of the screen the fold can change; each widget declares the parts it shows (``ModelView.shows``)."""
Parts: TypeAlias = frozenset[Part]
PANELS: tuple[Part, ...] = get_args(Part)
CHARTS: Parts = frozenset({"curve", "spread"})
"""Parts drawn as plots: the costly ones, redrawn at most every ``chart_period`` seconds."""

NOTHING: Parts = frozenset()
EVERYTHING: Parts = frozenset(PANELS)
GPUS: Parts = frozenset({"gpus"})
LOG: Parts = frozenset({"log"})
HEADER: Parts = frozenset({"header"})
SERVER: Parts = frozenset({"server"})
HEADER_LOG: Parts = frozenset({"header", "log"})
TIMELINE: Parts = frozenset({"timeline"})
CAUSE_PARTS: Parts = frozenset({"stragglers", "levels"})

NoticeSeverity = Literal["information", "warning", "error"]
_NOTICE_OF: dict[str, NoticeSeverity] = {"info": "information", "warning": "warning", "error": "error"}


@dataclass
class Notice:
    """Something the operator must see now (a toast): a failure, a lost link."""

    severity: NoticeSeverity
    message: str


@dataclass
class GpuRow:
    index: int
    static: GpuStatic | None = None
    reading: GpuReading | None = None
    util_hist: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    rank: str | None = None

    def supports(self, name: str) -> bool:
        """Shown only if the agent reported it supported (or, lacking caps, reported a value)."""
        if self.static is not None and self.static.supported:
            return name in self.static.supported and getattr(self.reading, name, None) is not None
        return self.reading is not None and getattr(self.reading, name, None) is not None

    def value(self, name: str) -> float | None:
        """The reading's ``name`` if this GPU shows it (``supports``), else None."""
        return getattr(self.reading, name) if self.supports(name) else None


@dataclass
class Imbalance:
    """Utilisation spread across GPUs: the EP straggler signal."""

    spread: float
    low_index: int
    low: float
    high_index: int
    high: float


def pack_offsets(offsets: list[float] | None) -> array[int] | list[float] | None:
    """Chunk offsets as int32 0.1 ms steps (4 bytes each, not a 32-byte float): what a recording keeps.

    Floored to the step exactly as a recording writes them (``RequestResult`` format 2), so
    ``unpack_offsets`` gives what a replay of the recording would.  Offsets that do not fit
    (not finite, beyond int32's 59 hours) stay the float list.
    """
    if offsets is None:
        return None
    per_ms = RequestResult.OFFSET_STEPS_PER_MS
    steps = array("i")
    for o in offsets:
        if not -2e8 < o < 2e8:
            return list(offsets)
        k = math.floor(o * per_ms)
        if (k + 1) / per_ms <= o:
            k += 1
        elif k / per_ms > o:
            k -= 1
        steps.append(k)
    return steps


def unpack_offsets(packed: array[int] | list[float] | None) -> list[float] | None:
    if packed is None or isinstance(packed, list):
        return packed
    per_ms = RequestResult.OFFSET_STEPS_PER_MS
    return [k / per_ms for k in packed]


def strip_chunks(ev: RequestResult) -> RequestResult:
    """The result's figures without its per-chunk lists (what the spread and the compare view read)."""
    if ev.chunk_offsets_ms is None and ev.chunk_tokens is None:
        return ev
    return ev.model_copy(update={"chunk_offsets_ms": None, "chunk_tokens": None})


@dataclass
class KeptResult:
    """A request result held compactly: its figures without the per-chunk lists, and those packed."""

    figures: RequestResult
    offsets: array[int] | list[float] | None
    chunk_tokens: array[int] | None

    @classmethod
    def of(cls, ev: RequestResult) -> "KeptResult":
        toks = array("i", ev.chunk_tokens) if ev.chunk_tokens is not None else None
        return cls(strip_chunks(ev), pack_offsets(ev.chunk_offsets_ms), toks)

    def result(self) -> RequestResult:
        """The request result again, its offsets to the recording's 0.1 ms."""
        return self.figures.model_copy(update={
            "chunk_offsets_ms": unpack_offsets(self.offsets),
            "chunk_tokens": list(self.chunk_tokens) if self.chunk_tokens is not None else None})


_RESULT_FIELDS = tuple(f for f in RequestResult.model_fields if f not in ("chunk_offsets_ms", "chunk_tokens"))
_NAN = float("nan")
_GPU_FIELDS = ("util_pct", "pcie_tx_kbps", "pcie_rx_kbps", "temp_c", "power_w")
"""What the straggler window shows of a GPU reading, in the order ``CompactHistory._sample`` reads them."""


PackedFigures: TypeAlias = tuple[object, ...]
"""A request result's figures in ``_RESULT_FIELDS`` order."""


def pack_figures(ev: RequestResult) -> PackedFigures:
    """A request result's figures as a bare tuple (about a third of a model's bytes): what compare reads."""
    return tuple(getattr(ev, f) for f in _RESULT_FIELDS)


def unpack_figures(values: PackedFigures) -> RequestResult:
    return RequestResult.model_construct(None, **dict(zip(_RESULT_FIELDS, values)))


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


@dataclass
class SweepView:
    sweep_id: str
    profile: str | None
    spec: SweepSpec
    started_t: float
    concurrency: int | None = None
    progress: SweepProgress | None = None
    levels: list[LevelResult] = field(default_factory=list)
    results: deque[RequestResult] = field(default_factory=lambda: deque(maxlen=4096))
    """Finished requests of the current level, their figures only (``strip_chunks``)."""
    chunks: dict[str, KeptResult] = field(default_factory=dict)
    """The current level's results with their chunk offsets packed, until its LevelResult names the stragglers."""
    stragglers: list[Straggler] = field(default_factory=list)
    straggler_results: dict[str, KeptResult] = field(default_factory=dict)
    """Request id -> the straggler's result with its chunk offsets (at most ``STRAGGLER_RESULTS``)."""
    outcome: SweepResult | None = None
    spec_watch: SpecWatch = field(default_factory=SpecWatch)
    """The running level's accept length against the reference level (the live collapse notice)."""
    level_starts: dict[int, float] = field(default_factory=dict)
    """C -> when its (last) level started: the window its EPLB rebalances are counted in."""
    attributions: dict[str, Attribution] = field(default_factory=dict)
    """Request id -> why that straggler was slow (:mod:`kimitui.analysis.causes`, via ``CockpitModel.causes``)."""
    losses: dict[tuple[int, int], LevelLoss] = field(default_factory=dict)
    """(C, repeat) -> where the finished level's throughput went, by cause (the running level has none)."""
    capacity_points: dict[int, CapacityPoint] = field(default_factory=dict)
    """C -> the SLO judged on that level's requests (its last repeat): :attr:`capacity` reads them."""
    capacity: CapacityAnswer | None = None
    """The highest finished level at which the cockpit's SLO holds (``[capacity] slo``)."""

    def straggler_result(self, request_id: str) -> RequestResult | None:
        """A straggler's full request result (chunk offsets to 0.1 ms), if this sweep kept it."""
        kept = self.straggler_results.get(request_id)
        return kept.result() if kept is not None else None

    @property
    def live_point(self) -> tuple[int, float] | None:
        """(C, tok/s so far) for the running level: the point that moves."""
        p = self.progress
        if self.outcome is not None or p is None or p.level_elapsed_s <= 0:
            return None
        return p.concurrency, p.level_tokens / p.level_elapsed_s


@dataclass
class CurvePoint:
    concurrency: int
    agg_tok_s: float | None
    steady_tok_s: float | None
    status: str = "ok"
    """Only an ``ok`` level is a point of the curve; the others are drawn as a mark on the axis."""
    reason: str = ""


E = TypeVar("E", bound=Event)
Fold: TypeAlias = "Callable[[CockpitModel, Event], Parts]"
"""A handler of the fold: updates the model from one event, returns the parts it changed."""


NODE_STRIDE = 8
"""GPU rows per node of a multi-node deployment: node k's GPUs follow the home host's 8 (16 rows for two nodes)."""


class CockpitModel:
    """Bounded state for every panel; ``apply`` returns the parts that changed."""

    def __init__(self, host: str = "sim", log_lines: int = 5_000, *, raise_errors: bool = False) -> None:
        """``raise_errors``: let a handler's exception out instead of logging it (tests of the fold)."""
        self.host = host
        self.log_lines = log_lines
        self.raise_errors = raise_errors
        self.fold_errors = 0
        """Events a handler raised on (shown in the log as "could not show ..."); kept across a reset."""
        self.generation = 0
        """Bumped by each reset (a replay seek): a view holding its own copy of the state starts over."""
        self._clear()

    def _clear(self) -> None:
        self.connection: str = "connecting"
        self.connection_detail = ""
        self.profile: str | None = None
        self.profile_state: str = "unknown"
        self.profile_detail = ""
        self.swap: SwapProgress | None = None
        self.last_switch: ProfileSwitch | None = None
        self.baseline: str | None = None
        self.gpus: dict[int, GpuRow] = {}
        self.nodes: list[str] = []
        """A multi-node deployment's other nodes, in the order their GPUs came (rows after the home's)."""
        self.driver: str | None = None
        self.gpu_caps: GpuCaps | None = None
        self.gpu_procs: list[GpuProcess] | None = None
        """The agent's last process list (None: none came yet, or the agent sends none)."""
        self.server: dict[str, float | bool | None] = {}
        self.server_source: str | None = None
        self.pd_metrics: dict[str, float] = {}
        """A PD server's /metrics figures (queues, KV transfer), newest of each; empty elsewhere."""
        self.pd_log: dict[str, float] = {}
        """A PD server's log fields (``#transfer-req``...), newest of each: they stand in without /metrics."""
        self.server_hist: dict[str, deque[float]] = {k: deque(maxlen=HISTORY) for k in HISTORY_KEYS}
        self.last_retraction: Retraction | None = None
        """The newest retraction /metrics reported (its gauge counts one stats interval only)."""
        self.prefill = PrefillRate()
        self.sim_time_scale: float | None = None
        """The simulated host's clock speed-up (``/server_info``'s ``sim_time_scale``); None on a real host."""
        self.health: ServerHealth | None = None
        self.log_ring = LogRing(self.log_lines)
        """Each rank's copy of a line merged into one entry; ``logs`` and ``log_pending`` are its deques."""
        self.logs: deque[LogEntry] = self.log_ring.entries
        self.log_pending: deque[LogEntry] = self.log_ring.pending
        self.sweep: SweepView | None = None
        self.curves: dict[str, dict[int, CurvePoint]] = {}
        """profile -> concurrency -> its last measured point (other profiles' runs stay overlaid; bounded by the
        profiles and levels swept, not by the sweeps)."""
        self.notes = 0
        self.markers = 0
        self.errors = 0
        self.dropped = 0
        self.last_t: float | None = None
        self.history = CompactHistory()
        self.slo: Slo | None = parse_slo(DEFAULT_SLO)
        """The SLO each sweep's capacity is judged on (the app sets the config's ``[capacity] slo``)."""
        self.tune: TuneProgress | None = None
        """The autopilot's latest progress (``kimitui tune`` from this cockpit, or a replayed one)."""
        self.causes = CauseBook()
        """Every event's evidence of a cause; it attributes each finished level into its SweepView."""
        self.timeline = Timeline()
        """Level spans and marks on the sweep's time axis (the strip under the curve)."""
        self._compare: dict[str, list[Event]] = {}
        """Sweep id -> what the compare view needs of it but request results: the host's last server_info and
        profile switch before it, its start, level rows and result; the last ``COMPARE_SWEEPS`` sweeps and
        each profile's last."""
        self._context: dict[str, list[Event]] = {}
        """Host -> its last ServerInfo and last ProfileSwitch, in arrival order (what a sweep starting now reads);
        a server_info every 10 s is one entry, not one per poll (issue 30)."""
        self._client_said: set[tuple[str, bool]] = set()
        """(sweep, throughput held back?) already worded in the log: said once per sweep, not once per level
        (the kept sweeps' only: see ``_keep_for_compare``)."""
        self._requests: dict[str, list[PackedFigures]] = {}
        """Sweep id -> its request results as bare tuples (``pack_figures``), the last ``DETAIL_SWEEPS`` sweeps."""
        self.notices: list[Notice] = []
        """Toasts not shown yet: the app takes them every pump (``take_notices``)."""
        self.profile_levels: dict[str, dict[int, LevelResult]] = {}
        """profile -> C -> its last valid level result (the speed-up against the baseline at the same C); a result
        replaces the last at its C, so the profiles and levels swept bound it."""
        self.balance: float | None = None
        """Expert balance now (1.0 = even), from the log, /metrics or the heatmap; None: not reported."""
        self.balance_source = ""
        self.balance_hist: deque[float] = deque(maxlen=HISTORY)
        self.expert_load: ExpertLoad | None = None
        """The newest heatmap window (layers x GPU ranks)."""
        self.heat = HeatWindows()
        """The recent heatmap windows, summed for the ``h`` screen."""
        self.server_args: dict[str, object] | None = None
        self.sglang_version: str | None = None  # /server_info's, shown with the profile
        """The running server's ``/server_info`` args (what the sweep form says it accepts); None: not read
        since the last swap (they belonged to the server it replaced)."""

    # ------------------------------------------------------------------ folding
    def apply(self, events: Iterable[Event]) -> set[Part]:
        """Fold a batch of events; returns the parts of the screen to redraw."""
        dirty: set[Part] = set()
        for ev in events:
            try:
                dirty |= self._apply_one(ev)
            except Exception as exc:  # one odd event must not freeze the screen
                if self.raise_errors:
                    raise
                self.fold_errors += 1
                self._log(time.time(), "error", "kimitui", f"could not show {ev.kind}: {exc}")
                dirty.add("log")
        return dirty

    def take_notices(self) -> list[Notice]:
        out, self.notices = self.notices, []
        return out

    def _log(self, t: float, severity: str, kind: str, text: str) -> None:
        self.log_ring.add(t, severity, kind, text)

    def reset(self) -> None:
        """Forget everything (a replay seek follows: the events after it rebuild the state)."""
        self._clear()
        self.generation += 1

    def _apply_one(self, ev: Event) -> Parts:
        if isinstance(ev, ReplayState):
            if not ev.reset:
                return NOTHING
            self.reset()
            return EVERYTHING
        if self.last_t is None or ev.t > self.last_t:
            self.last_t = ev.t
        self.history.add(ev)
        self.causes.add(ev)
        if ev.kind in COMPARE_KINDS:
            self._keep_for_compare(ev)
        handler = _FOLD.get(type(ev))
        parts = handler(self, ev) if handler is not None else NOTHING
        if self.causes.refresh(self.last_t):  # throttled: a look per second of event time while a level settles
            parts = parts | CAUSE_PARTS
        return parts | TIMELINE if self.timeline.add(ev) else parts

    # One handler per event type (the table ``_FOLD`` below the class); each returns the parts it changed.
    def _on_gpu_sample(self, ev: GpuSample) -> Parts:
        offset = self._node_offset(ev.node)
        for r in ev.gpus:
            index = r.index + offset
            row = self.gpus.get(index)
            if row is None:
                row = self.gpus[index] = GpuRow(index)
                home = self.gpus.get(r.index)
                if offset and home is not None:  # another node of the deployment: same GPUs, its name as the rank
                    row.static, row.rank = home.static, ev.node
            row.reading = r if not offset else r.model_copy(update={"index": index})
            if r.util_pct is not None:
                row.util_hist.append(r.util_pct)
        return GPUS

    def _node_offset(self, node: str | None) -> int:
        """Where a deployment's other node's GPUs sit among the rows: node k's GPU i is row ``NODE_STRIDE*k + i``."""
        if node is None:
            return 0
        if node not in self.nodes:
            self.nodes.append(node)
        return NODE_STRIDE * (1 + self.nodes.index(node))

    def _on_log_line(self, ev: LogLine) -> Parts:
        self.log_ring.add(ev.t, ev.severity, ev.line_kind, ev.raw, ev.node)  # node: which process of a deployment
        if (prefill := fields_if(ev, "prefill")) is not None:
            self.prefill.on_log(prefill)
        return LOG

    def _on_progress(self, ev: SweepProgress) -> Parts:
        if self.sweep is not None and ev.sweep_id == self.sweep.sweep_id:
            self.sweep.progress = ev
            self.sweep.concurrency = ev.concurrency
            return frozenset({"spread", "curve", "levels"})
        return NOTHING

    def _on_caps(self, ev: GpuCaps) -> Parts:
        self.driver, self.gpu_caps = ev.driver, ev
        for s in ev.gpus:
            self.gpus.setdefault(s.index, GpuRow(s.index)).static = s
        return GPUS

    def _on_procs(self, ev: GpuProcs) -> Parts:
        self.gpu_procs = ev.procs
        for index, row in self.gpus.items():
            if index < NODE_STRIDE:  # another node's rows keep its name (its processes are its own host's)
                row.rank = None
        for p in ev.procs:
            if p.rank:
                self.gpus.setdefault(p.gpu_index, GpuRow(p.gpu_index)).rank = p.rank
        return GPUS

    def _on_gpu_event(self, ev: GpuEvent) -> Parts:
        where = f"GPU {ev.gpu_index}" if ev.gpu_index is not None else "GPU"
        msg = f"{where}: {ev.event}{' xid ' + str(ev.xid) if ev.xid is not None else ''} {ev.detail}".strip()
        self._log(ev.t, "error", "gpu", msg)
        self.notices.append(Notice("error" if ev.event != "recovered" else "information", msg))
        return frozenset({"log", "gpus"})

    def _on_sweep_started(self, ev: SweepStarted) -> Parts:
        self.sweep = SweepView(ev.sweep_id, ev.profile or self.profile, ev.spec, ev.t)
        self.history.keep_since = ev.t
        self.sweep.losses = self.causes.sweep_started(ev.sweep_id)
        key = self.sweep.profile or "?"
        self.curves.pop(key, None)  # this run replaces that profile's earlier curve
        self.curves[key] = {}
        self._log(ev.t, "info", "sweep", f"sweep {ev.sweep_id} started on {key}: levels {ev.spec.levels}, "
                  f"{ev.spec.mode}, {ev.spec.max_tokens} tokens")
        return frozenset({"curve", "spread", "levels", "stragglers", "log", "header"})

    def _on_level_started(self, ev: LevelStarted) -> Parts:
        if self.sweep is not None and ev.sweep_id == self.sweep.sweep_id:
            self.sweep.concurrency = ev.concurrency
            self.sweep.level_starts[ev.concurrency] = ev.t
            self.sweep.spec_watch.level_started(ev.concurrency)
            self.sweep.progress = None
            self.sweep.results.clear()
            self.sweep.chunks.clear()
            return frozenset({"spread", "levels", "curve"})
        return NOTHING

    def _on_sweep_result(self, ev: SweepResult) -> Parts:
        if self.sweep is not None and ev.sweep_id == self.sweep.sweep_id:
            self.sweep.outcome = ev
        sev = "info" if ev.outcome == "completed" else ("warning" if ev.outcome == "stopped" else "error")
        peak = f", peak {ev.peak_tok_s:.0f} tok/s" if ev.peak_tok_s is not None else ""
        text = f"sweep {ev.sweep_id} {ev.outcome}{peak}{': ' + ev.reason if ev.reason else ''}"
        self._log(ev.t, sev, "sweep", text)
        self.notices.append(Notice(_NOTICE_OF[sev], text))
        return frozenset({"curve", "levels", "spread", "log", "header"})

    def _on_swap_progress(self, ev: SwapProgress) -> Parts:
        self.swap = ev
        return HEADER

    def _on_profile_state(self, ev: ProfileState) -> Parts:
        self.profile = ev.profile if ev.profile is not None else self.profile
        self.profile_state = ev.state
        self.profile_detail = ev.detail
        if ev.state in ("serving", "failed", "rolled_back", "stopped"):
            self.swap = None
        if ev.state == "starting" and self.nodes:  # the next deployment brings its own nodes' rows, if any
            self.gpus = {i: row for i, row in self.gpus.items() if i < NODE_STRIDE}
            self.nodes = []
            return HEADER | GPUS
        return HEADER

    def _on_baseline(self, ev: Baseline) -> Parts:
        self.baseline = ev.profile
        self._log(ev.t, "info", "baseline", f"baseline: {ev.profile}")
        return HEADER_LOG

    def _on_connection(self, ev: ConnectionState) -> Parts:
        was = self.connection
        self.connection, self.connection_detail = ev.state, ev.detail
        if ev.state in ("lost", "failed") and was != ev.state:
            self.notices.append(Notice("error", f"{ev.host}: connection {ev.state} {ev.detail}".strip()))
        elif ev.state == "connected" and was in ("lost", "reconnecting", "failed"):
            self.notices.append(Notice("information", f"{ev.host}: connected again"))
        self._log(ev.t, "warning" if ev.state in ("lost", "reconnecting", "failed") else "info",
                  "connection", f"link {ev.state} {ev.detail}".strip())  # its kind says connection
        return HEADER_LOG

    def _on_health(self, ev: ServerHealth) -> Parts:
        self.health = ev
        return SERVER

    def _on_error(self, ev: ErrorEvent) -> Parts:
        if ev.severity == "error":
            self.errors += 1
        level: NoticeSeverity = "information" if ev.severity == "info" else ev.severity
        kind = "error" if ev.severity == "error" else ev.source  # a warning or a fact is no error (the guard's notice)
        self._log(ev.t, "info" if ev.severity == "info" else ev.severity, kind, f"{ev.source}: {ev.message}")
        self.notices.append(Notice(level, f"{ev.source}: {ev.message}"))
        return HEADER_LOG

    def _on_note(self, ev: Note) -> Parts:
        self.notes += 1
        self._log(ev.t, "info", "note", f"note: {ev.text}")
        return HEADER_LOG

    def _on_marker(self, ev: Marker) -> Parts:
        self.markers += 1
        self._log(ev.t, "info", "marker", f"marker {ev.label}".strip())
        return HEADER_LOG

    def _on_tune(self, ev: TuneProgress) -> Parts:
        self.tune = ev
        return HEADER

    def _on_dropped(self, ev: Dropped) -> Parts:
        self.dropped += ev.count
        return HEADER

    def _keep_for_compare(self, ev: Event) -> None:
        """Keep what the compare view needs, bounded: old sweeps lose their request results, then their levels."""
        if isinstance(ev, RequestResult):
            kept = self._requests.get(ev.sweep_id)
            if kept is not None:
                kept.append(pack_figures(ev))
            return
        if isinstance(ev, (ServerInfo, ProfileSwitch)):
            ctx = [e for e in self._context.get(ev.host, []) if type(e) is not type(ev)]
            self._context[ev.host] = [*ctx, ev]
            return
        if isinstance(ev, SweepStarted):
            if ev.sweep_id not in self._requests:
                self._requests[ev.sweep_id] = []
                while len(self._requests) > DETAIL_SWEEPS:
                    del self._requests[next(iter(self._requests))]
            self._compare.pop(ev.sweep_id, None)
            self._compare[ev.sweep_id] = [*self._context.get(ev.host, []), ev]
            self._forget_old_sweeps()
            return
        events = self._compare.get(getattr(ev, "sweep_id", ""))
        if events is not None:  # a level row or result of a sweep no longer kept is not needed
            events.append(ev)

    def _forget_old_sweeps(self) -> None:
        """Past ``COMPARE_SWEEPS``, drop the oldest sweep that is not its profile's last (any past twice that)."""
        while len(self._compare) > COMPARE_SWEEPS:
            last: dict[str | None, str] = {}
            for sid, events in self._compare.items():
                start = next(e for e in events if isinstance(e, SweepStarted))
                last[start.profile] = sid
            keep = set(last.values())
            old = next((sid for sid in self._compare if sid not in keep), None)
            if old is None:
                if len(self._compare) <= 2 * COMPARE_SWEEPS:
                    return
                old = next(iter(self._compare))
            del self._compare[old]
            self._client_said = {k for k in self._client_said if k[0] != old}

    @property
    def compare_sweeps(self) -> int:
        """Sweeps whose level rows the compare view has (bounded: ``COMPARE_SWEEPS``)."""
        return len(self._compare)

    @property
    def sweep_events(self) -> list[Event]:
        """The sweeps this session saw, for the compare view: every kept sweep's level rows (with the
        server_info and switch before it), and the request results (figures only, no chunk lists) of
        the last ``DETAIL_SWEEPS`` sweeps."""
        out: list[Event] = []
        for sid, events in self._compare.items():
            for ev in events:
                out.append(ev)
                if isinstance(ev, SweepStarted):
                    out.extend(unpack_figures(v) for v in self._requests.get(sid, ()))
        return out

    def _on_stats(self, ev: ServerStats) -> Parts:
        for name in ("running_reqs", "queued_reqs", "token_usage", "gen_throughput", "cuda_graph",
                     "num_tokens", "cache_hit_rate", *SCHED_KEYS):
            value = getattr(ev, name)
            if value is not None:
                self.server[name] = value
                if name in self.server_hist and not isinstance(value, bool):
                    self.server_hist[name].append(float(value))
        if ev.retracted_reqs:
            self.last_retraction = Retraction(ev.t, ev.retracted_reqs)
        parts = self._spec_and_balance(ev)
        pd = {k: v for k, v in ev.extra.items() if k in PD_KEYS}
        if pd:
            (self.pd_log if ev.source == "log" else self.pd_metrics).update(pd)
        if ev.extra and all(k.startswith("eplb_balancedness") for k in ev.extra) and ev.running_reqs is None:
            return parts  # a balance-only figure (an [Expert Balancedness] line): the server panel keeps its source
        prefill = self.prefill.on_stats(ev)
        if prefill is not None:
            self.server["prefill_throughput"] = prefill
            self.server_hist["prefill_throughput"].append(prefill)
        self.server_source = ev.source
        return SERVER | parts

    def _spec_and_balance(self, ev: ServerStats) -> Parts:
        """Expert balance for the GPU panel's gauge; the Decode line's accept length for the live collapse rule."""
        parts = NOTHING
        bal = ev.extra.get("eplb_balancedness")
        if bal is not None:
            self._set_balance(bal, "log" if ev.source == "log" else "/metrics")
            parts = GPUS
        acc = ev.extra.get("accept_len")
        if acc is not None:
            self.server["accept_len"] = acc
            sw = self.sweep
            if ev.source == "log" and sw is not None and sw.outcome is None:
                found = sw.spec_watch.sample(acc, sw.levels)
                if found is not None:
                    self._say_collapse(ev.t, found.message + " (live, from the scheduler's log)")
                    parts = parts | frozenset({"log", "levels"})
        return parts

    def _say_collapse(self, t: float, text: str) -> None:
        self._log(t, "warning", "sweep", text)
        self.notices.append(Notice("warning", text))

    def _set_balance(self, value: float, source: str) -> None:
        self.balance, self.balance_source = value, source
        self.balance_hist.append(value)

    def _on_expert_load(self, ev: ExpertLoad) -> Parts:
        self.expert_load = ev
        self.heat.add(ev)
        if ev.balancedness is not None:
            self._set_balance(ev.balancedness, "heatmap")
        return frozenset({"gpus", "experts"})

    def _on_server_info(self, ev: ServerInfo) -> Parts:
        self.server_args = dict(ev.args)
        self.sglang_version = ev.version if isinstance(ev.version, str) and ev.version else None
        scale = ev.args.get("sim_time_scale") if ev.args.get("sim") else None
        self.sim_time_scale = float(scale) if isinstance(scale, (int, float)) and scale > 0 else None
        return HEADER

    def _on_result(self, ev: RequestResult) -> Parts:
        sw = self.sweep
        if sw is None or ev.sweep_id != sw.sweep_id or ev.warmup:
            return NOTHING
        if sw.concurrency is None or ev.concurrency == sw.concurrency:
            if len(sw.results) == sw.results.maxlen:
                sw.chunks.pop(sw.results[0].request_id, None)
            sw.results.append(strip_chunks(ev))
            if ev.chunk_offsets_ms is not None:
                sw.chunks[ev.request_id] = KeptResult.of(ev)
        if not ev.ok:
            self._log(ev.t, "warning", "request", f"request {ev.request_id} at C={ev.concurrency} failed: "
                      f"{ev.error_class or 'error'} {ev.error}".strip())
            return frozenset({"spread", "log"})
        return frozenset({"spread"})

    def _on_level(self, ev: LevelResult) -> Parts:
        sw = self.sweep
        if sw is None or ev.sweep_id != sw.sweep_id:
            return NOTHING
        sw.levels = [lv for lv in sw.levels if (lv.concurrency, lv.repeat) != (ev.concurrency, ev.repeat)]
        sw.levels.append(ev)
        sw.stragglers.extend(ev.stragglers)
        for s in ev.stragglers:
            kept = sw.chunks.get(s.request_id)
            if kept is not None and len(sw.straggler_results) < STRAGGLER_RESULTS:
                sw.straggler_results[s.request_id] = kept
        self.causes.level_done(ev, self._level_results(sw, ev), sw.attributions, sw.losses)
        self._judge_capacity(sw, ev)
        if ev.concurrency == sw.concurrency:
            sw.chunks.clear()  # the level is done: only its stragglers keep their chunks
        status, reason = effective_status(ev, sw.spec.max_error_rate)
        self.curves.setdefault(sw.profile or "?", {})[ev.concurrency] = CurvePoint(
            ev.concurrency, ev.agg_tok_s, ev.steady_tok_s, status, reason)
        if status == "ok":
            self.profile_levels.setdefault(sw.profile or "?", {})[ev.concurrency] = ev
        collapse = sw.spec_watch.finished(sw.levels, ev)
        if collapse is not None:
            self._say_collapse(ev.t, collapse.message)
        if status != "ok":
            self._log(ev.t, "error" if status == "failed" else "warning", "sweep",
                      f"C={ev.concurrency} {status}: {reason or 'no reason recorded'} (not a curve point)")
        if ev.client_distorted:  # worded once per sweep and kind (a busy machine marks every level)
            limited = client_limited_throughput(ev)
            if (ev.sweep_id, limited) not in self._client_said:
                self._client_said.add((ev.sweep_id, limited))
                what = ("the client could not keep up: its figures decide nothing" if limited
                        else "the client stamped latencies late: TTFT/TPOT not judged")
                self._log(ev.t, "warning" if limited else "info", "sweep",
                          f"C={ev.concurrency}: {what} ({ev.client_distorted}); later levels carry only the mark")
        if ev.stopped:
            self._log(ev.t, "warning", "sweep", f"sweep stopped at C={ev.concurrency}: {ev.stopped}")
        return frozenset({"curve", "levels", "stragglers", "log"})

    def _judge_capacity(self, sw: SweepView, ev: LevelResult) -> None:
        """The SLO on the finished level's requests; the sweep's capacity from every level judged so far."""
        if self.slo is None or effective_status(ev, sw.spec.max_error_rate)[0] != "ok":
            return
        requests = [r for r in sw.results if r.concurrency == ev.concurrency and not r.warmup]
        x = float(ev.concurrency)
        slo = self.judged_slo
        sw.capacity_points[ev.concurrency] = point_of(slo, x, [Probe(x, (ev,), requests, slo.check(requests, [ev]))])
        sw.capacity = answer_from_points(slo, list(sw.capacity_points.values()), rate=False, measured=0)

    @property
    def judged_slo(self) -> Slo:
        """The configured SLO on this host's clock: a simulator running N x faster is held to what the real
        host would be (time bounds / N, rates x N), as ``kimitui capacity`` does; the answer says so."""
        assert self.slo is not None
        if self.sim_time_scale and self.sim_time_scale != 1.0 and self.slo.time_scale == 1.0:
            return self.slo.scaled(self.sim_time_scale)
        return self.slo

    @staticmethod
    def _level_results(sw: SweepView, ev: LevelResult) -> list[RequestResult]:
        """The level's measured requests as its attribution needs them: the stragglers' with their chunk times
        (none for a level that is not the running one: its stragglers are attributed from their gaps)."""
        if sw.concurrency not in (None, ev.concurrency):
            return []
        ids = {s.request_id for s in ev.stragglers}
        return [kept.result() if r.request_id in ids and (kept := sw.chunks.get(r.request_id)) is not None else r
                for r in sw.results if r.concurrency == ev.concurrency]

    def _on_switch(self, ev: ProfileSwitch) -> Parts:
        self.last_switch = ev
        self.swap = None
        # the recorded total (a swap records it beside its phases); older recordings: the phases' sum
        took = ev.phases.get("total", sum(ev.phases.values()))
        if ev.outcome == "ok":
            self.profile = ev.to_profile
            self.server_args = self.sglang_version = None
            text = f"swapped {ev.from_profile or '-'} -> {ev.to_profile} in {took:.1f} s"
            self.notices.append(Notice("information", text))
            sev = "info"
        else:
            text = f"swap to {ev.to_profile} {ev.outcome.replace('_', ' ')}: {ev.reason}"
            self.notices.append(Notice("error", text))
            sev = "error"
            for line in ev.log_excerpt[-5:]:
                self._log(ev.t, "error", "swap", f"  {line}")
        self._log(ev.t, sev, "swap", text)
        return HEADER_LOG

    # ------------------------------------------------------------------ derived
    def imbalance(self) -> Imbalance | None:
        """Spread of current utilisation across GPUs; None with fewer than two readings."""
        utils = [(i, r.reading.util_pct) for i, r in sorted(self.gpus.items())
                 if r.reading is not None and r.reading.util_pct is not None]
        if len(utils) < 2:
            return None
        lo = min(utils, key=lambda x: x[1])
        hi = max(utils, key=lambda x: x[1])
        return Imbalance(hi[1] - lo[1], lo[0], lo[1], hi[0], hi[1])

    def filtered_logs(self, min_severity: str = "debug", kind: str | None = None,
                      search: str = "", entries: Iterable[LogEntry] | None = None) -> list[LogEntry]:
        """Log entries at or above a severity, of one kind (``-kind``: all but it; ``-polling``: all but
        kimitui's own polling), containing a text."""
        floor = SEVERITY_RANK.get(min_severity, 0)
        needle = search.lower()
        hide = kind[1:] if kind and kind.startswith("-") else None
        only = kind if kind and not hide else None
        return [e for e in (self.logs if entries is None else entries)
                if SEVERITY_RANK.get(e.severity, 1) >= floor
                and (only is None or e.kind == only)
                and (hide is None or (not e.polling if hide == POLLING else e.kind != hide))
                and (not needle or needle in e.text.lower())]

    def log_kinds(self) -> list[str]:
        return sorted({e.kind for e in self.logs})


def _entry(kind: type[E], handler: Callable[[CockpitModel, E], Parts]) -> tuple[type[Event], Fold]:
    """One row of the fold's table; mypy checks that the handler takes that event type."""
    return kind, cast(Fold, handler)  # safe: _apply_one looks the handler up by the event's own type


_FOLD: dict[type[Event], Fold] = dict([
    _entry(GpuSample, CockpitModel._on_gpu_sample),
    _entry(LogLine, CockpitModel._on_log_line),
    _entry(ServerStats, CockpitModel._on_stats),
    _entry(ServerInfo, CockpitModel._on_server_info),
    _entry(ExpertLoad, CockpitModel._on_expert_load),
    _entry(SweepProgress, CockpitModel._on_progress),
    _entry(RequestResult, CockpitModel._on_result),
    _entry(GpuCaps, CockpitModel._on_caps),
    _entry(GpuProcs, CockpitModel._on_procs),
    _entry(GpuEvent, CockpitModel._on_gpu_event),
    _entry(SweepStarted, CockpitModel._on_sweep_started),
    _entry(LevelStarted, CockpitModel._on_level_started),
    _entry(LevelResult, CockpitModel._on_level),
    _entry(SweepResult, CockpitModel._on_sweep_result),
    _entry(SwapProgress, CockpitModel._on_swap_progress),
    _entry(ProfileState, CockpitModel._on_profile_state),
    _entry(ProfileSwitch, CockpitModel._on_switch),
    _entry(Baseline, CockpitModel._on_baseline),
    _entry(ConnectionState, CockpitModel._on_connection),
    _entry(ServerHealth, CockpitModel._on_health),
    _entry(ErrorEvent, CockpitModel._on_error),
    _entry(Note, CockpitModel._on_note),
    _entry(Marker, CockpitModel._on_marker),
    _entry(TuneProgress, CockpitModel._on_tune),
    _entry(Dropped, CockpitModel._on_dropped),
])
"""Event type -> the handler that folds it into the model (a type not listed changes nothing on screen)."""
