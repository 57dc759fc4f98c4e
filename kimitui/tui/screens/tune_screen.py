"""The autopilot's screen: its plan before it starts (Enter starts it), its steps and the overlaid curves
while it runs, with pause, skip and stop at hand.  It returns the operator's choice; the app acts on it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, Static

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.tune_view import STATUS_STYLE, step_rows, summary, tune_active
from kimitui.tui.widgets.sweep_curve import SweepCurve
from kimitui.tui.screens.dialog import Dialog

COLUMNS = ("#", "change", "profile", "outcome", "objective", "why")


class TuneScreen(Dialog[str | None]):
    """``plan`` given: a confirmation that returns ``start``; else the running tune, returning ``pause``,
    ``resume``, ``skip`` or ``stop`` (None: just closed)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "close"), Binding("p", "choose('pause')", "pause/resume"),
                Binding("k", "choose('skip')", "skip step"), Binding("x", "choose('stop')", "stop")]

    DEFAULT_CSS = """
    TuneScreen { align: center middle; }
    TuneScreen > Vertical { width: 96%; height: 90%; border: thick $accent; background: $surface; padding: 0 1; }
    TuneScreen #tune-title { height: auto; text-style: bold; }
    TuneScreen #tune-plan { height: 1fr; }
    TuneScreen DataTable { height: auto; max-height: 12; }
    TuneScreen SweepCurve { height: 1fr; min-height: 8; }
    TuneScreen Horizontal { height: auto; }
    TuneScreen Button { margin-right: 1; }
    """

    def __init__(self, model: CockpitModel, plan: list[str] | None = None) -> None:
        super().__init__()
        self.model, self.plan = model, plan

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.plan is not None:
                yield Static("Start the autopilot?", id="tune-title")
                yield Static("\n".join(self.plan) + "\n\nIt ends with the best profile serving; "
                             "a: pause, skip a step or stop it (stop swaps back to the best so far).", id="tune-plan")
                with Horizontal():
                    yield Button("Start autopilot", id="tune-start", variant="primary")
                    yield Button("Cancel", id="tune-cancel")
                return
            yield Static("", id="tune-title")
            yield DataTable(id="tune-steps", cursor_type="row", zebra_stripes=True)
            yield SweepCurve(self.model, id="tune-curve")
            with Horizontal():
                yield Button("Pause", id="tune-pause")
                yield Button("Skip step", id="tune-skip")
                yield Button("Stop (best serves)", id="tune-stop", variant="error")
                yield Button("Close", id="tune-close", variant="primary")

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        if self.plan is not None:
            self.query_one("#tune-start", Button).focus()
            return
        self.query_one(DataTable).add_columns(*COLUMNS)
        self._refresh()
        self.set_interval(1.0, self._refresh)

    def _refresh(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        tp = self.model.tune
        if tp is None:
            return
        self.query_one("#tune-title", Static).update(summary(tp))
        table = self.query_one(DataTable)
        table.clear()
        for row in step_rows(tp):
            style = STATUS_STYLE.get(row[3].split(":")[0] if not row[3].startswith("▶") else "running", "")
            table.add_row(*row[:3], f"[{style}]{row[3]}[/]" if style else row[3], *row[4:])
        self.query_one("#tune-pause", Button).label = "Resume" if tp.status == "paused" else "Pause"
        active = tune_active(tp)
        for name in ("pause", "skip", "stop"):
            self.query_one(f"#tune-{name}", Button).disabled = not active
        curve = self.query_one(SweepCurve)
        if curve.size.width:
            curve.redraw()

    def action_choose(self, what: str) -> None:
        if self.plan is not None:
            return
        tp = self.model.tune
        if what == "pause" and tp is not None and tp.status == "paused":
            what = "resume"
        if tune_active(tp):
            self.dismiss(what)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        name = (event.button.id or "").removeprefix("tune-")
        if name == "start":
            self.dismiss("start")
        elif name in ("cancel", "close"):
            self.dismiss(None)
        else:
            self.action_choose(name)
