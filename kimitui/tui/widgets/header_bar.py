"""The top line: host and link, running profile and its state, baseline, recording."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.render import bar
from kimitui.tui.model.tune_view import tune_active, tune_line
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


MIN_PATH = 20
"""The fewest cells a recording's path is shown in (elided in the middle); less room drops it."""


def elide_middle(path: str, room: int) -> str:
    """``path`` in ``room`` cells, its middle given up first: the file name stays whole where it fits, a few
    cells of the start say where (``/home/op/.loc…/2026-12-06T10-20-01-sim-ep8-tuned.jsonl``)."""
    if len(path) <= room:
        return path
    if room < 2:
        return ""
    name = len(path) - path.rfind("/")  # "/" and the file name
    right = min(name, room - 1 - min(8, room // 4))
    return path[:room - 1 - right] + "…" + path[len(path) - right:]


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

    def _first_line(self, fit: int, width: int = 200) -> Text:
        """Host, profile and its state, the time-scale badge, baseline, recording.

        ``fit`` 0 is the widest form; each step gives up a little (the words "host" and
        "profile", the recording's path, the app's name and the badge's "time", the link's
        detail, the baseline) until the line fits in ``width``: the profile state and the badge
        are never cut.  The path takes the room the rest leaves, elided in the middle (issue 32:
        a long one pushed the line's end off), at least :data:`MIN_PATH` cells or not at all."""
        m = self.model
        labels, path = fit == 0, fit < 3
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
        if not rec.live:
            line.append("▶ replay", "bold magenta")
        elif rec.on:
            line.append("● REC", "bold red")
        else:
            line.append("○ not recording", "dim")
        if path and rec.path and (rec.on or not rec.live):
            room = width - line.cell_len - 1
            shown = elide_middle(rec.path, room) if room >= min(MIN_PATH, len(rec.path)) else rec.path
            line.append(" " + shown, "dim" if rec.live else "magenta")  # too long: the next fit drops it
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
            line = self._first_line(fit, width)
            if line.cell_len <= width:
                break
        counts = f"notes {m.notes}  markers {m.markers}  errors {m.errors}"
        if m.dropped:
            counts += f"  dropped {m.dropped}"
        second = self._second_line(width - len(counts) - 1)
        second.append(" " * max(1, width - second.cell_len - len(counts)))
        second.append(counts, "red" if m.errors else "dim")
        return Text("\n", no_wrap=True, overflow="ellipsis").join([line, second])
