"""Replay status and its keys; shown only when the controller is a replay with controls."""

from __future__ import annotations

from typing import Unpack

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.cockpit_state import CockpitModel
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

    def redraw(self) -> None:
        self.refresh()

    def render(self) -> Text:
        out = Text()
        out.append(" ▶ playing " if self.playing else " ⏸ paused ", "bold reverse")
        speed = "max" if self.speed is None else f"{self.speed:g}x"
        at = self.position if self.position is not None else self.model.last_t
        out.append(f"  {speed}  at {clock(at)}  ", "bold")
        out.append("space play/pause  +/- speed  [ ] seek 30s  "
                   "j straggler  w switch  e error  k marker (shift = back)", "dim")
        return out
