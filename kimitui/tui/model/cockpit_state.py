"""The cockpit's state: everything the panels show, folded from Session events.

The app drains its subscription a few times a second and hands the batch to
:meth:`CockpitModel.apply`, which updates bounded state and says which panels
changed; widgets then render from this model.  Keeping the fold here (no
Textual imports) means a replayed recording and a live session produce the
same screen, and the fold is testable without a terminal.

The state is one small class per panel, each folding the events it cares about:
the header (``header_state``), the GPUs (``gpu_state``), the server (``server_state``),
the log and toasts (``log_state``), the sweep and its levels (``sweep_state``) and its
stragglers (``straggler_state``); the compare view's sweeps are kept in ``compare_book``.
``CockpitModel`` composes them, hands each event to all, and keeps the names the widgets
read (``model.gpus``, ``model.sweep``...) as views onto them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from typing import Any, Generic, TypeVar, overload

from kimitui.capacity.slo import Slo
from kimitui.events import (
    Event, ExpertLoad, GpuCaps, GpuProcess, LevelResult, ProfileSwitch, ReplayState, ServerHealth, SwapProgress,
    TuneProgress,
)
from kimitui.tui.model.cause_book import CauseBook
from kimitui.tui.model.compact_history import CompactHistory
from kimitui.tui.model.compare_book import CompareBook
from kimitui.tui.model.fold import EVERYTHING, NOTHING, TIMELINE, Notice, Part, Parts
from kimitui.tui.model.gpu_state import GpuRow, GpuState, Imbalance
from kimitui.tui.model.header_state import HeaderState
from kimitui.tui.model.heatmap_data import HeatWindows
from kimitui.tui.model.log_ring import LogEntry, LogRing
from kimitui.tui.model.log_state import LogState
from kimitui.tui.model.server_figures import PrefillRate, Retraction
from kimitui.tui.model.server_state import ServerState
from kimitui.tui.model.straggler_state import StragglerState
from kimitui.tui.model.sweep_state import SweepState
from kimitui.tui.model.sweep_view import CurvePoint, SweepView
from kimitui.tui.model.timeline_marks import Timeline

T = TypeVar("T")


class _Via(Generic[T]):
    """An attribute of one panel state, read and written through the model under the name the widgets know."""

    def __init__(self, panel: str, name: str = "") -> None:
        self.panel, self.name = panel, name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    @overload
    def __get__(self, obj: None, owner: type) -> _Via[T]: ...
    @overload
    def __get__(self, obj: object, owner: type) -> T: ...
    def __get__(self, obj: object, owner: type) -> Any:
        return self if obj is None else getattr(getattr(obj, self.panel), self.name)

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self.panel), self.name, value)


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
        self.log_state = LogState(self.log_lines)
        self.header_state = HeaderState(self.log_state)
        self.gpu_state = GpuState(self.log_state)
        self.server_state = ServerState()
        self.straggler_state = StragglerState()
        self.sweep_state = SweepState(self.log_state, self.straggler_state, self.header_state, self.server_state)
        self.compare = CompareBook()
        self._panels = (self.header_state, self.gpu_state, self.server_state, self.log_state, self.sweep_state)
        self.timeline = Timeline()
        """Level spans and marks on the sweep's time axis (the strip under the curve)."""
        self.last_t: float | None = None

    # ------------------------------------------------------------------ the panels' state, by the widgets' names
    connection = _Via[str]("header_state")
    connection_detail = _Via[str]("header_state")
    profile = _Via[str | None]("header_state")
    profile_state = _Via[str]("header_state")
    profile_detail = _Via[str]("header_state")
    swap = _Via[SwapProgress | None]("header_state")
    last_switch = _Via[ProfileSwitch | None]("header_state")
    baseline = _Via[str | None]("header_state")
    notes = _Via[int]("header_state")
    markers = _Via[int]("header_state")
    errors = _Via[int]("header_state")
    dropped = _Via[int]("header_state")
    tune = _Via[TuneProgress | None]("header_state")

    gpus = _Via[dict[int, GpuRow]]("gpu_state")
    nodes = _Via[list[str]]("gpu_state")
    driver = _Via[str | None]("gpu_state")
    gpu_caps = _Via[GpuCaps | None]("gpu_state")
    gpu_procs = _Via[list[GpuProcess] | None]("gpu_state")
    balance = _Via[float | None]("gpu_state")
    balance_source = _Via[str]("gpu_state")
    balance_hist = _Via[deque[float]]("gpu_state")
    expert_load = _Via[ExpertLoad | None]("gpu_state")
    heat = _Via[HeatWindows]("gpu_state")

    server = _Via[dict[str, float | bool | None]]("server_state")
    server_source = _Via[str | None]("server_state")
    pd_metrics = _Via[dict[str, float]]("server_state")
    pd_log = _Via[dict[str, float]]("server_state")
    server_hist = _Via[dict[str, deque[float]]]("server_state")
    last_retraction = _Via[Retraction | None]("server_state")
    prefill = _Via[PrefillRate]("server_state")
    sim_time_scale = _Via[float | None]("server_state")
    health = _Via[ServerHealth | None]("server_state")
    server_args = _Via[dict[str, object] | None]("server_state")
    sglang_version = _Via[str | None]("server_state")

    log_ring = _Via[LogRing]("log_state", "ring")
    logs = _Via[deque[LogEntry]]("log_state")
    log_pending = _Via[deque[LogEntry]]("log_state", "pending")
    notices = _Via[list[Notice]]("log_state")

    sweep = _Via[SweepView | None]("sweep_state")
    curves = _Via[dict[str, dict[int, CurvePoint]]]("sweep_state")
    profile_levels = _Via[dict[str, dict[int, LevelResult]]]("sweep_state")
    slo = _Via[Slo | None]("sweep_state")

    history = _Via[CompactHistory]("straggler_state")
    causes = _Via[CauseBook]("straggler_state")

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
                self.log_state.say(time.time(), "error", "kimitui", f"could not show {ev.kind}: {exc}")
                dirty.add("log")
        return dirty

    def take_notices(self) -> list[Notice]:
        return self.log_state.take_notices()

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
        self.straggler_state.see(ev)
        self.sweep_state.forget(self.compare.keep(ev))
        parts = NOTHING
        for panel in self._panels:
            parts = parts | panel.fold(ev)
        parts = parts | self.straggler_state.refresh(self.last_t)
        return parts | TIMELINE if self.timeline.add(ev) else parts

    # ------------------------------------------------------------------ derived
    @property
    def compare_sweeps(self) -> int:
        """Sweeps whose level rows the compare view has (bounded: ``COMPARE_SWEEPS``)."""
        return len(self.compare)

    @property
    def sweep_events(self) -> list[Event]:
        """The sweeps this session saw, for the compare view (:meth:`CompareBook.events`)."""
        return self.compare.events()

    @property
    def judged_slo(self) -> Slo:
        return self.sweep_state.judged_slo

    def imbalance(self) -> Imbalance | None:
        return self.gpu_state.imbalance()

    def filtered_logs(self, min_severity: str = "debug", kind: str | None = None,
                      search: str = "", entries: Iterable[LogEntry] | None = None) -> list[LogEntry]:
        """Log entries at or above a severity, of one kind (``-kind``: all but it; ``-polling``: all but
        kimitui's own polling), containing a text."""
        return self.log_state.filtered(min_severity, kind, search, entries)

    def log_kinds(self) -> list[str]:
        return self.log_state.kinds()
