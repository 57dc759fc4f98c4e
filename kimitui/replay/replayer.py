"""Replay: a recording re-published into a Session, so the cockpit shows it as it was.

:class:`Replayer` plays a :class:`~kimitui.recording.RecordingIndex` in file
order, spacing events by their recorded times divided by ``speed`` (None = as
fast as possible).  It can pause, change speed, seek and jump.

Seek rebuilds state rather than replaying everything: the screen must show,
at once, what it showed at time ``t``.  After a ``ReplayState(reset=True)``
(consumers clear what they hold) it re-delivers instantly every event up to
``t`` **except** high-rate kinds: of telemetry (GPU samples, server stats,
log lines) only the last ``history_s`` seconds (the charts' and the log
pane's span, at most ``max_log_lines`` log lines); of snapshots (sweep
progress, GPU processes, client health...) only the latest within that span;
of request results those of the level running at ``t`` and of that span (the
levels before are summed up by their level results).  Sweeps, profile
switches, notes, markers and errors are always delivered in full, so tables,
the curve and the straggler list are complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from kimitui.events import ErrorEvent, Event, GpuEvent, LevelResult, LogLine, ReplayState, RequestResult
from kimitui.recording import PathLike, Recording, RecordingIndex
from kimitui.session import Session
from kimitui.supervised import SupervisedTask

log = logging.getLogger(__name__)

HISTORY_KINDS = frozenset({"gpu_sample", "server_stats", "log_line", "request_started"})
"""High-rate kinds whose recent past is shown (charts, log pane): the last ``history_s`` seconds."""

LATEST_KINDS = frozenset({"sweep_progress", "gpu_procs", "client_health", "server_health", "swap_progress"})
"""Snapshots: only the latest one (per host) matters after a seek."""

SKIP_KINDS = frozenset({"dropped", "replay_state"})

LEVEL_DETAIL_KINDS = frozenset({"request_result"})
"""Per-request results: those of the level running at the seek time (the spread shows them) and of
the history window; older levels are summed up by their ``level_result``."""

HIGH_RATE_KINDS = HISTORY_KINDS | LATEST_KINDS | SKIP_KINDS | LEVEL_DETAIL_KINDS
"""Everything a seek does not re-deliver in full."""

JUMP_KINDS = ("straggler", "profile_switch", "error", "marker", "note")

_BATCH = 500
"""Events published between yields to the loop, so consumers can drain."""


class Replayer(SupervisedTask):
    """Re-publishes a recording into ``session`` at ``speed`` × real time."""

    def __init__(
        self,
        session: Session,
        recording: Recording | RecordingIndex | PathLike,
        speed: float | None = 1.0,
        *,
        start_paused: bool = False,
        history_s: float = 300.0,
        max_log_lines: int = 2000,
    ) -> None:
        super().__init__()
        self.session = session
        self.index = RecordingIndex.load(recording)
        self._check_speed(speed)
        self._speed = speed
        self.history_s = history_s
        self.max_log_lines = max_log_lines
        self._playing = not start_paused
        self._cursor = 0
        self._anchor_pos = self.index.start
        self._anchor_wall = 0.0
        self._changed = asyncio.Event()
        self._finished = asyncio.Event()
        self._lock = asyncio.Lock()
        self._targets: dict[str, list[float]] = {}
        self._sparse: tuple[array, array] | None = None
        self.published = 0

    # -- state ------------------------------------------------------------------
    @staticmethod
    def _check_speed(speed: float | None) -> None:
        if speed is not None and not speed > 0:
            raise ValueError(f"speed must be > 0 or None (as fast as possible), not {speed!r}")

    @property
    def speed(self) -> float | None:
        return self._speed

    @property
    def playing(self) -> bool:
        return self._playing

    @property
    def finished(self) -> bool:
        return self._cursor >= len(self.index)

    @property
    def start_t(self) -> float:
        """Time of the recording's first event."""
        return self.index.start

    @property
    def end_t(self) -> float:
        """Time of the recording's last event."""
        return self.index.end

    @property
    def position(self) -> float:
        """The recording time shown now."""
        if not self._playing or self._speed is None or self._task is None:
            return self._anchor_pos
        loop = asyncio.get_running_loop()
        pos = self._anchor_pos + (loop.time() - self._anchor_wall) * self._speed
        nxt = self.index.times[self._cursor] if self._cursor < len(self.index) else self.end_t
        return min(pos, max(nxt, self._anchor_pos))

    def _reanchor(self) -> None:
        pos = self.position
        self._anchor_pos = pos
        try:
            self._anchor_wall = asyncio.get_running_loop().time()
        except RuntimeError:
            self._anchor_wall = 0.0

    def _state(self, reset: bool = False) -> ReplayState:
        pos = self.position
        return ReplayState(t=pos, host=self.session.host, position=pos, start=self.start_t, end=self.end_t,
                           speed=self._speed, playing=self._playing, finished=self.finished, reset=reset)

    def _poke(self) -> None:
        self._changed.set()

    # -- controls ---------------------------------------------------------------
    def _task_name(self) -> str:
        return "replayer"

    async def start(self) -> None:
        """Start playing (or wait paused) in a background task."""
        if not self.running:
            self._anchor_wall = asyncio.get_running_loop().time()
            self.session.publish(self._state())
            self._start_task()

    async def wait(self) -> None:
        """Until the last event has been published."""
        await self._finished.wait()

    def pause(self) -> None:
        if self._playing:
            self._reanchor()
            self._playing = False
            self.session.publish(self._state())
            self._poke()

    def resume(self) -> None:
        if not self._playing:
            self._playing = True
            self._reanchor()
            self.session.publish(self._state())
            self._poke()

    def play_pause(self) -> bool:
        """Toggle; returns whether it is playing now."""
        self.resume() if not self._playing else self.pause()
        return self._playing

    def set_speed(self, speed: float | None) -> None:
        self._check_speed(speed)
        self._reanchor()
        self._speed = speed
        self.session.publish(self._state())
        self._poke()

    async def seek(self, t: float) -> float:
        """Show the state as of ``t`` (clamped to the recording); returns the new position."""
        t = min(max(t, self.start_t), self.end_t)
        with _collector_paused():
            async with self._lock:
                hi = self.index.position_after(t)
                self._cursor = hi
                self._anchor_pos = t
                self._anchor_wall = asyncio.get_running_loop().time()
                if self.finished:
                    self._finished.set()
                else:
                    self._finished.clear()
                self.session.publish(self._state(reset=True))
                batch = 0
                for ev in self._rebuild(t, hi):
                    self.session.publish(ev)
                    self.published += 1
                    batch += 1
                    if batch >= _BATCH:
                        batch = 0
                        await asyncio.sleep(0)
                self._anchor_wall = asyncio.get_running_loop().time()
        self._poke()
        return t

    def _sparse_positions(self) -> tuple[array, array]:
        """Positions of the kinds a seek always delivers, and of ``level_started`` (found once, kept compact).

        A seek then walks only these before the history window, instead of every event of the file.
        """
        if self._sparse is None:
            idx = self.index
            kinds = idx.kinds
            rare = idx.rare if idx.on_disk else range(len(kinds))  # every kind a seek always delivers is rare
            self._sparse = (array("q", (i for i in rare if kinds[i] not in HIGH_RATE_KINDS)),
                            array("q", (i for i in rare if kinds[i] == "level_started")))
        return self._sparse

    def _rebuild(self, t: float, hi: int) -> Iterable[Event]:
        """Events ``[0, hi)`` that make up the state at ``t`` (see the module doc)."""
        idx = self.index
        kinds = idx.kinds
        since = idx.position(t - self.history_s)
        first_log = since if self.max_log_lines > 0 else hi
        logs_left = self.max_log_lines
        latest: set[int] = set()
        seen_latest: set[tuple[str, str]] = set()
        hosts = idx.hosts
        sparse, level_starts = self._sparse_positions()
        k = bisect_left(level_starts, hi)
        level_start = level_starts[k - 1] if k else 0
        lo = min(since, level_start)
        parse = idx.parse  # not through the cache: a seek's thousands would only churn it
        for i in sparse[:bisect_left(sparse, lo)]:  # before both windows only these are delivered
            ev = parse(i)
            if ev is not None:
                yield ev
        for i in range(hi - 1, since - 1, -1):
            kind = kinds[i]
            if kind == "log_line":
                logs_left -= 1
                if logs_left == 0:
                    first_log = i
            elif kind in LATEST_KINDS and (kind, hosts[i]) not in seen_latest:
                seen_latest.add((kind, hosts[i]))
                latest.add(i)
        for i in range(lo, hi):
            kind = kinds[i]
            if kind in HIGH_RATE_KINDS:
                if kind in LEVEL_DETAIL_KINDS:
                    if i < since and i < level_start:
                        continue
                elif kind in SKIP_KINDS or i < since:
                    continue
                if kind in LATEST_KINDS and i not in latest:
                    continue
                if kind == "log_line" and i < first_log:
                    continue
            ev = parse(i)
            if ev is not None:
                yield ev

    async def jump(self, kind: str, forward: bool = True) -> float | None:
        """Seek to the next (or previous) ``straggler`` / ``profile_switch`` / ``error`` / ``marker`` / ``note``.

        Returns the new position, or None if there is none that way.
        """
        if kind not in JUMP_KINDS:
            raise ValueError(f"unknown jump target {kind!r}; one of {', '.join(JUMP_KINDS)}")
        targets = self.targets(kind)
        pos = self.position
        if forward:
            after = [x for x in targets if x > pos + 1e-3]
            target = after[0] if after else None
        else:
            before = [x for x in targets if x < pos - 0.5]  # a second press keeps going back
            target = before[-1] if before else None
        if target is None:
            return None
        return await self.seek(target)

    def targets(self, kind: str) -> list[float]:
        """Sorted times of every jump target of ``kind`` (computed once)."""
        if kind not in self._targets:
            self._targets[kind] = sorted(self._find_targets(kind))
        return self._targets[kind]

    def _find_targets(self, kind: str) -> Iterable[float]:
        idx = self.index
        kinds = idx.kinds
        # every target is a rare event (the index keeps their places, and their bytes): no need to read the file
        for i in (idx.rare if idx.on_disk else range(len(kinds))):
            k = kinds[i]
            if kind == "straggler" and k == "level_result":
                ev = idx.event(i)
                if isinstance(ev, LevelResult):
                    for s in ev.stragglers:
                        yield s.gap_start if s.gap_start is not None else self._gap_of(s.request_id, i)
            elif kind == "profile_switch" and k == "profile_switch":
                yield idx.times[i]
            elif kind == "marker" and k == "marker":
                yield idx.times[i]
            elif kind == "note" and k == "note":
                yield idx.times[i]
            elif kind == "error" and k in ("error", "gpu_event", "log_line"):
                if k == "log_line" and not _maybe_error_line(idx, i):
                    continue
                ev = idx.event(i)
                if (isinstance(ev, ErrorEvent) and ev.severity != "info") or (isinstance(ev, GpuEvent) and ev.event != "recovered") or (
                        isinstance(ev, LogLine) and ev.severity in ("error", "critical")):
                    yield idx.times[i]

    def _gap_of(self, request_id: str, level_i: int) -> float:
        """Where a straggler's longest gap began: from its RequestResult, else the level's end."""
        idx = self.index
        for i in range(level_i - 1, -1, -1):
            if idx.kinds[i] == "request_result":
                ev = idx.event(i)
                if isinstance(ev, RequestResult) and ev.request_id == request_id:
                    return ev.max_gap_at if ev.max_gap_at is not None else idx.times[i]
            elif idx.kinds[i] == "sweep_started":
                break
        return idx.times[level_i]

    # -- the loop ---------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        idx = self.index
        last_state = loop.time()
        while True:
            self._changed.clear()
            if self.finished:
                if not self._finished.is_set():
                    self._finished.set()
                    self._anchor_pos = self.end_t
                    self.session.publish(self._state())
                await self._changed.wait()
                continue
            if not self._playing:
                await self._changed.wait()
                continue
            now = loop.time()
            if self._speed is None:
                due_until = float("inf")
            else:
                due_until = self._anchor_pos + (now - self._anchor_wall) * self._speed
            nxt = idx.times[self._cursor]
            if nxt > due_until:
                delay = (nxt - due_until) / self._speed if self._speed else 0.0
                try:
                    await asyncio.wait_for(self._changed.wait(), timeout=min(delay, 1.0))
                except asyncio.TimeoutError:
                    pass
                if loop.time() - last_state >= 1.0:
                    last_state = loop.time()
                    self.session.publish(self._state())
                continue
            async with self._lock:
                n = 0
                while self._cursor < len(idx) and idx.times[self._cursor] <= due_until and n < _BATCH:
                    ev = idx.event(self._cursor)
                    self._cursor += 1
                    if ev is not None:
                        self.session.publish(ev)
                        self.published += 1
                    n += 1
                if self._speed is None:
                    self._anchor_pos = idx.times[self._cursor - 1]
            await asyncio.sleep(0)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a seek rebuilds state.

    A rebuild makes thousands of events at once, every one kept (by the consumers' queues), none of
    them garbage; each batch of them made the collector run, promote them and rescan the whole heap:
    half a seek's CPU (13-190 ms a seek at 200 MB, ``bench/bench_replay_memory.py``).  Paused, they are
    collected once, as young objects, after the seek.  The collector is left as it was found.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _maybe_error_line(idx: RecordingIndex, i: int) -> bool:
    """A cheap byte test before parsing thousands of log lines."""
    raw = idx.raw(i)
    return raw is None or b'"severity":"error"' in raw or b'"severity":"critical"' in raw
