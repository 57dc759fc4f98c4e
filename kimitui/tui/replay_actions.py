"""The replay's transport beside its bar: play/pause, speed, seek and jumps, and the bar that says where it stands.

A mixin of the cockpit app (the bindings and the palette name ``play_pause``, ``speed``, ``seek`` and ``jump``:
Textual finds them on the app).  Each does nothing live (``replay`` is None); live, ``j``/``J`` step through the
straggler list instead (the app's ``action_jump``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kimitui.control import ReplayEnd
from kimitui.tui.cockpit_base import FAILED, CockpitBase, Failed
from kimitui.tui.model.fold import Notice
from kimitui.tui.render import clock
from kimitui.tui.widgets.replay_bar import ReplayBar, ReplayToasts

T = TypeVar("T")

REPLAY_SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
"""The replay speed ladder (``+``/``-``): 1x to 100x, as the replay command allows."""


class ReplayActions(CockpitBase):
    """The replay's keys, its bar kept up to date each tick, and its toasts when it plays fast."""

    _replay_toasts: ReplayToasts
    """Which notices become toasts while the replay plays (set by the app's ``__init__``)."""

    def action_play_pause(self) -> None:
        if self.replay is None:
            return
        try:
            playing = self.replay.play_pause()
        except Exception as exc:
            self.notify(f"play/pause failed: {exc}", severity="error")
            return
        bar = self.query_one(ReplayBar)
        bar.playing = bool(playing)
        bar.refresh()

    def action_speed(self, factor: float) -> None:
        if self.replay is None:
            return
        bar = self.query_one(ReplayBar)
        current = bar.speed or REPLAY_SPEEDS[-1]
        if factor > 1:
            speed = next((s for s in REPLAY_SPEEDS if s > current), REPLAY_SPEEDS[-1])
        else:
            speed = next((s for s in reversed(REPLAY_SPEEDS) if s < current), REPLAY_SPEEDS[0])
        try:
            self.replay.set_speed(speed)
        except Exception as exc:
            self.notify(f"speed failed: {exc}", severity="error")
            return
        bar.speed = speed
        bar.refresh()

    async def action_seek(self, delta_s: float) -> None:
        replay = self.replay
        if replay is None:
            return
        now = self._safe(lambda: replay.position) or self.model.last_t
        if now is not None:
            await self._folding("seek", replay.seek, now + delta_s)

    async def _replay_jump(self, kind: str, forward: bool) -> None:
        """Seek to the next (previous) ``kind`` in the recording and say where that is, or that there is none."""
        if self.replay is None:
            return
        t = await self._folding("jump", self.replay.jump, kind, forward)
        if t is FAILED:
            return
        what = kind.replace("_", " ")
        self.notify(f"{what} at {clock(t)}" if t is not None else f"no {'later' if forward else 'earlier'} {what}")

    async def _folding(self, what: str, fn: Callable[..., Awaitable[T]], *args: object) -> T | Failed:
        """A replay's start or seek: the state at the new moment is re-published at once, maybe more events than
        the subscription holds (a dropped reset left the old state under the new); folded as they come."""
        task = asyncio.ensure_future(self._call(what, fn, *args))
        while not task.done():
            await asyncio.wait({task}, timeout=0.02)
            self.painter.fold()
        return task.result()

    def _update_replay_bar(self) -> None:
        """Play state, speed and position from the replay controller, when they changed."""
        replay = self.replay
        if replay is None:
            return
        bar = self.query_one(ReplayBar)
        try:
            state = (replay.playing, replay.speed, replay.position,
                     isinstance(replay, ReplayEnd) and replay.finished)
        except Exception:  # a replay that cannot say where it is leaves the bar as it was
            return
        if state != (bar.playing, bar.speed, bar.position, bar.finished):
            bar.playing, bar.speed, bar.position, bar.finished = state
            bar.refresh()

    def _replay_coalesce(self, notices: list[Notice]) -> tuple[list[Notice], float | None]:
        """A replay playing fast shows one toast at a time (``ReplayToasts``), for as long as the next may take;
        live, paused or slow: every notice, its own timeout (None)."""
        replay = self.replay
        if replay is None or not notices:
            return notices, None
        speed, playing = self._safe(lambda: (replay.speed, replay.playing)) or (1.0, False)
        shown = self._replay_toasts.take(notices, speed, playing, time.monotonic())
        return (shown, self._replay_toasts.gap_s) if shown is not notices else (notices, None)
