"""Before a swap: what changes, why it may mislead (confound, lint), the single-knob offers.

Warnings (⚠) are for what needs attention; the guard's facts and good news (one knob changed, back at
the baseline) are said plainly.  Taking an offered variant starts nothing: the app shows that
profile's own confirm (its diff against what runs and the baseline) first."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from kimitui.launcher.plan import SwapPlan
from kimitui.tui.screens.dialog import Dialog


def plan_text(plan: SwapPlan) -> Table:
    """The diff as a table: knob, running value, target value."""
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("knob")
    table.add_column(plan.running or "(nothing running)")
    table.add_column(plan.target, style="bold")
    for knob, (old, new) in sorted(plan.changes.items()):
        table.add_row(knob, "-" if old is None else str(old), "-" if new is None else str(new))
    if not plan.changes:
        table.add_row(Text("no knob changes", "dim"), "", "")
    return table


class SwapConfirm(Dialog[str | None]):
    """Returns the profile to swap to (the target) or to confirm next (an offered variant), or None."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("y", "confirm", "Swap", show=False)]

    DEFAULT_CSS = """
    SwapConfirm { align: center middle; }
    SwapConfirm > VerticalScroll { width: 90; max-width: 95%; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 0 2; }
    SwapConfirm.confounded > VerticalScroll { border: thick $warning; }
    SwapConfirm #swap-title { margin-top: 1; }
    SwapConfirm #swap-choice { dock: bottom; height: auto; background: $surface; padding: 1 0; }
    SwapConfirm #swap-notes { color: $success; margin-top: 1; }
    SwapConfirm #swap-warnings { color: $warning; text-style: bold; margin-top: 1; }
    SwapConfirm #swap-variant-hint { color: $text-muted; }
    SwapConfirm #swap-errors { color: $error; text-style: bold; margin-top: 1; }
    SwapConfirm Horizontal { height: auto; }
    SwapConfirm Button { margin-right: 1; }
    """

    def __init__(self, plan: SwapPlan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        p = self.plan
        self.set_class(p.confounded, "confounded")
        with VerticalScroll():  # on a short screen the diff and warnings scroll; the choice stays in view
            yield Static(Text(f"Swap {p.running or '(nothing)'} → {p.target}", "bold"), id="swap-title")
            if p.baseline:
                yield Static(Text(f"baseline: {p.baseline}", "dim"))
            yield Static(plan_text(p), id="swap-diff")
            if p.notes:
                yield Static("\n".join(f"✓ {n}" for n in p.notes), id="swap-notes")
            if p.confounded or p.warnings:
                lines = []
                if p.confounded and not any("confound" in w.lower() for w in p.warnings):
                    lines.append(f"⚠ confounded — {len(p.changes)} knobs changed: a result will not say which one did it")
                lines += [f"⚠ {w}" for w in p.warnings]
                yield Static("\n".join(lines), id="swap-warnings")
            if p.errors:
                yield Static("\n".join(f"✖ {e}" for e in p.errors) + "\nThe swap is refused.", id="swap-errors")
            with Vertical(id="swap-choice"):
                with Horizontal():
                    yield Button(f"Swap to {p.target}", id="swap-go", variant="warning" if p.confounded else "primary",
                                 disabled=bool(p.errors))
                    for i, v in enumerate(p.variants):
                        yield Button(f"Take {v} instead…", id=f"swap-variant-{i}", variant="success")
                    yield Button("Cancel", id="swap-cancel")
                if p.variants:
                    yield Static("Take … shows that profile's diff against the baseline first; nothing starts until "
                                 "you confirm it.", id="swap-variant-hint")

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        buttons = list(self.query(Button))
        preferred = next((b for b in buttons if b.id and b.id.startswith("swap-variant")), None)
        target = preferred or next((b for b in buttons if not b.disabled), buttons[-1])
        target.focus()

    def action_confirm(self) -> None:
        if not self.plan.errors:
            self.dismiss(self.plan.target)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        bid = event.button.id or ""
        if bid == "swap-go":
            self.dismiss(self.plan.target)
        elif bid.startswith("swap-variant-"):
            self.dismiss(self.plan.variants[int(bid.rsplit("-", 1)[1])])
        else:
            self.dismiss(None)
