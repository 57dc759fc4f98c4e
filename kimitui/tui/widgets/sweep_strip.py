"""The sweep area of the monitor layout: one or two lines where the charts would be empty.

Before a sweep it says how to start one; after a swap it keeps the last sweep's result in view (the
figures the next sweep will be compared with) and the peaks of the other profiles measured.
"""

from __future__ import annotations

from typing import Unpack

from rich.markup import escape
from rich.text import Text
from textual.widgets import Static

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_view import CurvePoint
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


def _peak(points: dict[int, CurvePoint]) -> tuple[int, float] | None:
    """The best measured level: ``ok`` levels only (a failed or aborted level is no measurement)."""
    ok = [(c, p.agg_tok_s) for c, p in points.items() if p.status == "ok" and p.agg_tok_s is not None]
    return max(ok, key=lambda cp: cp[1]) if ok else None


def _figure(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def strip_text(model: CockpitModel) -> Text:
    """What the strip says: the last sweep (profile, outcome, peak, each level) and the other profiles' peaks."""
    sw = model.sweep
    out = Text()
    if sw is None and model.profile_state in ("starting", "stopping"):
        out.append(f"{model.profile or 'The server'} is {model.profile_state}", "bold yellow")
        out.append(" (progress in the header).  Once it serves, press ")
        out.append("s", "bold reverse")
        out.append(" to sweep it.")
        return out
    if sw is None:
        out.append("No sweep yet", "bold")
        on = f" on {model.profile}" if model.profile else ""
        out.append(f"{on}.  Press ")
        out.append("s", "bold reverse")
        out.append(" to measure tok/s against concurrency (the seeds' levels, or the quick preset).")
        return out
    current = sw.profile or "?"
    points = model.curves.get(current, {})
    out.append(f"Last sweep {sw.sweep_id}", "bold")
    out.append(f" on {current}: ")
    if sw.outcome is None:
        out.append(f"running, C={sw.concurrency}", "bold yellow")
    else:
        style = "green" if sw.outcome.outcome == "completed" else "yellow"
        out.append(sw.outcome.outcome, style)
    peak = _peak(points)
    if peak is not None:
        out.append(f"  peak {_figure(peak[1])} tok/s at C={peak[0]}", "bold")
    levels = "  ".join(f"C={c} {_figure(p.agg_tok_s)}" if p.status == "ok" and p.agg_tok_s is not None
                       else f"C={c} ✗ {p.status}" for c, p in sorted(points.items()))
    if levels:
        out.append(f"  ·  {levels}", "dim")
    others = [(name, pk) for name, pts in model.curves.items() if name != current and (pk := _peak(pts))]
    if others:
        out.append("\nOther profiles: ")
        out.append("  ".join(f"{escape(name)} peak {_figure(pk[1])} at C={pk[0]}" for name, pk in others))
    out.append("\n")
    out.append("s", "bold reverse")
    out.append(" sweep this profile   ")
    out.append("c", "bold reverse")
    out.append(" compare runs")
    return out


class SweepStrip(Static, ModelView):
    """A few lines; redrawn with the curve (the same events change both)."""

    shows = frozenset({"curve", "levels"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        self.update(strip_text(self.model))
