"""All hosts' GPUs at once, grouped by host (``G`` in a fleet session).

The one-host GPU panel answers "how are this host's GPUs"; this answers "which host is the odd
one out": every host's heading line (link, profile, throughput) over its GPU rows.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from kimitui.tui.renderables.fleet_render import fleet_gpus
from kimitui.tui.model.fleet_state import FleetModels
from kimitui.tui.screens.dialog import Dialog

REFRESH_S = 1.0
"""GPU samples come a few times a second per host: once a second is enough for a comparison."""


class FleetGpus(Dialog[None]):
    BINDINGS = [Binding("escape,q,G", "dismiss(None)", "Close")]

    DEFAULT_CSS = """
    FleetGpus { align: center middle; }
    FleetGpus > VerticalScroll { width: 120; max-width: 98%; height: auto; max-height: 95%;
        border: thick $accent; background: $surface; padding: 0 1; }
    FleetGpus .title { text-style: bold; }
    FleetGpus .hint { color: $text-muted; }
    """

    def __init__(self, fleet: FleetModels) -> None:
        super().__init__()
        self.fleet = fleet

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(f"GPUs of all {len(self.fleet.hosts)} hosts", classes="title")
            yield Static(id="fleet-gpus")
            yield Static("esc / G close · o in the cockpit focuses the next host", classes="hint")

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self._refresh()
        self.set_interval(REFRESH_S, self._refresh)

    def _refresh(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self.query_one("#fleet-gpus", Static).update(fleet_gpus(self.fleet))
