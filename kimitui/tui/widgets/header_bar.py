"""The top line: host and link, running profile and its state, baseline, recording."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.cockpit_state import CockpitModel
from kimitui.tui.render import bar
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

CONNECTION_STYLE = {
    "connected": "bold green", "connecting": "yellow", "reconnecting": "bold yellow",
    "lost": "bold red", "failed": "bold red", "closed": "dim",
}
STATE_STYLE = {
    "serving": "bold green", "starting": "bold yellow", "stopping": "yellow", "failed": "bold white on red",
    "rolled_back": "bold black on yellow", "stopped": "dim", "unknown": "dim",
}


@dataclass
class RecordingStatus:
    path: str | None
    on: bool
    live: bool


class HeaderBar(Widget, ModelView):
    """Two lines, rendered from the model; no clock, so snapshots are stable."""

    DEFAULT_CSS = """
    HeaderBar { height: 2; background: $boost; padding: 0 1; }
    """
    shows = frozenset({"header"})
    drawn_when_maximized = True

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.recording = RecordingStatus(None, False, True)

    def redraw(self) -> None:
        self.refresh()

    def render(self) -> Text:
        m = self.model
        line = Text()
        line.append(" kimitui ", "bold reverse")
        line.append("  host ")
        line.append(m.host, "bold")
        line.append(" ● " + m.connection, CONNECTION_STYLE.get(m.connection, ""))
        if m.connection_detail and m.connection != "connected":
            line.append(f" ({m.connection_detail})", "dim")
        line.append("   profile ")
        line.append(m.profile or "-", "bold")
        line.append(" ")
        line.append(f" {m.profile_state.replace('_', ' ')} ", STATE_STYLE.get(m.profile_state, ""))
        line.append("   baseline ")
        line.append(m.baseline or "-", "bold cyan" if m.baseline else "dim")
        line.append("   ")
        rec = self.recording
        if not rec.live:
            line.append("▶ replay ", "bold magenta")
            line.append(rec.path or "", "magenta")
        elif rec.on:
            line.append("● REC ", "bold red")
            line.append(rec.path or "", "dim")
        else:
            line.append("○ not recording", "dim")
        second = Text()
        if m.swap is not None and m.profile_state in ("starting", "stopping", "unknown", "stopped"):
            frac = m.swap.fraction
            second.append(f" swap → {m.swap.profile}: {m.swap.phase} ", "bold yellow")
            second.append(bar(frac, 24), "yellow")
            second.append(f" {frac * 100:3.0f}% " if frac is not None else " ")
            second.append(m.swap.message, "dim")
        elif m.profile_state in ("failed", "rolled_back") and m.last_switch is not None:
            sw = m.last_switch
            second.append(f" swap to {sw.to_profile} {sw.outcome.replace('_', ' ')}: {sw.reason}", "bold red")
        elif m.profile_detail:
            second.append(f" {m.profile_detail}", "dim")
        counts = f"notes {m.notes}  markers {m.markers}  errors {m.errors}"
        if m.dropped:
            counts += f"  dropped {m.dropped}"
        pad = max(1, self.size.width - second.cell_len - len(counts) - 1)
        second.append(" " * pad)
        second.append(counts, "red" if m.errors else "dim")
        return Text("\n").join([line, second])
