"""Replay status and its keys; shown only when the controller is a replay with controls."""

from __future__ import annotations

from typing import Unpack

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.fold import Notice
from kimitui.tui.render import clock
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


class ReplayBar(Widget, ModelView):
    DEFAULT_CSS = """
    ReplayBar { height: 1; background: $primary-darken-2; padding: 0 1; }
    """
    shows = frozenset({"header"})
    drawn_when_maximized = True

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.playing = True
        self.speed: float | None = 1.0
        """None: as fast as the recording can be read."""
        self.position: float | None = None
        self.finished = False
        """The recording's last event is on screen: "■ end", whether or not the replay would play on."""

    def redraw(self) -> None:
        self.refresh()

    def render(self) -> Text:
        out = Text()
        out.append(" ■ end " if self.finished else " ▶ playing " if self.playing else " ⏸ paused ", "bold reverse")
        speed = "max" if self.speed is None else f"{self.speed:g}x"
        at = self.position if self.position is not None else self.model.last_t
        out.append(f"  {speed}  at {clock(at)}  ", "bold")
        out.append("space play/pause  +/- speed  [ ] seek 30s  "
                   "j straggler  w switch  e error  k marker (shift = back)", "dim")
        return out



FAST_REPLAY = 10.0
"""From this speed up (and at "max") a playing replay's notices are coalesced: a toast a second of replay would
cover the spread and the log; the log carries every one of them anyway."""

_SEVERITY_RANK = {"information": 0, "warning": 1, "error": 2}


class ReplayToasts:
    """Which notices become toasts: all of them at a watchable speed or paused; playing fast, one toast at most
    every ``gap_s`` seconds (shown that long, so one at a time), the most severe of what came, saying how many more
    the log holds."""

    def __init__(self, gap_s: float = 3.0) -> None:
        self.gap_s = gap_s
        self._last = float("-inf")
        self._held = 0

    def take(self, notices: list[Notice], speed: float | None, playing: bool, now: float) -> list[Notice]:
        if not notices or not playing or (speed is not None and speed < FAST_REPLAY):
            return notices
        if now - self._last < self.gap_s:
            self._held += len(notices)
            return []
        _, worst = max(enumerate(notices), key=lambda i_n: (_SEVERITY_RANK.get(i_n[1].severity, 0), i_n[0]))
        more, self._held, self._last = len(notices) - 1 + self._held, 0, now
        return [Notice(worst.severity, f"{worst.message} (+{more} more in the log)" if more else worst.message)]
