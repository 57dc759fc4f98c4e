"""The top line: host and link, running profile and its state, baseline, recording."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.cockpit_state import CockpitModel
from kimitui.tui.render import bar
from kimitui.tui.tune_view import tune_active, tune_line
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


def time_scale_badge(scale: float | None, short: bool = False) -> str:
    """`` sim ×10 time `` when the simulated host's clock runs faster (or slower) than wall time."""
    if scale is None or scale == 1:
        return ""
    return f" sim ×{scale:g}{'' if short else ' time'} "


class HeaderBar(Widget, ModelView):
    """Two lines, rendered from the model; no clock, so snapshots are stable."""

    DEFAULT_CSS = """
    HeaderBar { height: 2; background: $boost; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    shows = frozenset({"header"})
    drawn_when_maximized = True

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.recording = RecordingStatus(None, False, True)

    def redraw(self) -> None:
        self.refresh()

    def _first_line(self, fit: int) -> Text:
        """Host, profile and its state, the time-scale badge, baseline, recording.

        ``fit`` 0 is the widest form; each step gives up a little (the words "host" and
        "profile", the recording's directory, its file name, the app's name and the badge's
        "time", the link's detail, the baseline) until the line fits: the profile state and
        the badge are never cut."""
        m = self.model
        labels, path = fit == 0, ("full", "full", "name", None, None)[min(fit, 4)]
        gap = "   " if labels else "  "
        line = Text()
        if fit < 4:
            line.append(" kimitui ", "bold reverse")
            line.append(gap)
        line.append("host " if labels else "")
        line.append(m.host, "bold")
        line.append(" ● " + m.connection, CONNECTION_STYLE.get(m.connection, ""))
        if m.connection_detail and m.connection != "connected" and fit < 5:
            line.append(f" ({m.connection_detail})", "dim")
        line.append(gap + ("profile " if labels else ""))
        line.append(m.profile or "-", "bold")
        line.append(" ")
        line.append(f" {m.profile_state.replace('_', ' ')} ", STATE_STYLE.get(m.profile_state, ""))
        badge = time_scale_badge(m.sim_time_scale, short=fit >= 4)
        if badge:
            line.append(gap)
            line.append(badge, "bold black on dark_orange")
        if fit < 6:
            line.append(gap + ("baseline " if labels else "base "))
            line.append(m.baseline or "-", "bold cyan" if m.baseline else "dim")
        line.append(gap)
        rec = self.recording
        shown = None if path is None or not rec.path else rec.path if path == "full" else rec.path.rsplit("/", 1)[-1]
        if not rec.live:
            line.append("▶ replay", "bold magenta")
            if shown:
                line.append(" " + shown, "magenta")
        elif rec.on:
            line.append("● REC", "bold red")
            if shown:
                line.append(" " + shown, "dim")
        else:
            line.append("○ not recording", "dim")
        return line

    def _second_line(self, room: int) -> Text:
        """A swap's progress, a failed swap's reason, or the profile's detail, cut to ``room`` cells
        so the counters at the right stay whole."""
        m = self.model
        second = Text()
        swapping = m.swap is not None and m.profile_state in ("starting", "stopping", "unknown", "stopped")
        if tune_active(m.tune) and m.tune is not None:  # the autopilot's line first: it is what runs the swaps
            second.append(" " + tune_line(m.tune), "bold cyan")
            if swapping and m.swap is not None:
                frac = m.swap.fraction
                second.append(f"  swap → {m.swap.profile} {m.swap.phase}"
                              + (f" {frac * 100:.0f}%" if frac is not None else ""), "yellow")
        elif swapping and m.swap is not None:
            frac = m.swap.fraction
            second.append(f" swap → {m.swap.profile}: {m.swap.phase} ", "bold yellow")
            second.append(bar(frac, 24 if room >= 90 else 10), "yellow")
            second.append(f" {frac * 100:3.0f}% " if frac is not None else " ")
            second.append(m.swap.message, "dim")
        elif m.profile_state in ("failed", "rolled_back") and m.last_switch is not None:
            sw = m.last_switch
            second.append(f" swap to {sw.to_profile} {sw.outcome.replace('_', ' ')}: {sw.reason}", "bold red")
        elif m.tune is not None and m.profile_state == "serving":
            second.append(" " + tune_line(m.tune), "cyan")
        elif m.profile_detail:
            second.append(f" {m.profile_detail}", "dim")
        if second.cell_len > room:
            second.truncate(max(0, room), overflow="ellipsis")
        return second

    def render(self) -> Text:
        m = self.model
        width = self.size.width or 200
        line = Text()
        for fit in range(7):
            line = self._first_line(fit)
            if line.cell_len <= width:
                break
        counts = f"notes {m.notes}  markers {m.markers}  errors {m.errors}"
        if m.dropped:
            counts += f"  dropped {m.dropped}"
        second = self._second_line(width - len(counts) - 1)
        second.append(" " * max(1, width - second.cell_len - len(counts)))
        second.append(counts, "red" if m.errors else "dim")
        return Text("\n", no_wrap=True, overflow="ellipsis").join([line, second])
