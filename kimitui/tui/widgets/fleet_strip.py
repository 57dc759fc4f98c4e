"""The fleet strip: one line per host (link, profile and state, throughput, GPUs, sweep, errors).

Shown only in a fleet session.  A click on a line focuses that host (as ``o`` steps through them).
"""

from __future__ import annotations

from typing import Unpack

from textual import events
from textual.message import Message
from textual.widgets import Static

from kimitui.tui.renderables.fleet_render import fleet_strip
from kimitui.tui.model.fleet_state import FleetModels
from kimitui.tui.widgets.model_view import WidgetOptions


class FleetStrip(Static):
    """Drawn from the fleet's models by the app's pump (at most once a tick)."""

    class Chosen(Message):
        """The operator clicked a host's line."""

        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, fleet: FleetModels, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.fleet = fleet

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        self.update(fleet_strip(self.fleet, self.size.width or 120))

    def on_click(self, event: events.Click) -> None:
        hosts = self.fleet.hosts
        if 0 <= event.y < len(hosts):
            self.post_message(self.Chosen(hosts[event.y]))
