"""Scheduler figures (running, queued, token usage, throughput, CUDA graph) with short history."""

from __future__ import annotations

from typing import Unpack

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from kimitui.tui.cockpit_state import CockpitModel
from kimitui.tui.render import bar, spark
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


class ServerPanel(Widget, ModelView):
    DEFAULT_CSS = """
    ServerPanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    shows = frozenset({"server"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 6

    def redraw(self) -> None:
        self.refresh()

    def render(self) -> Text:
        m = self.model
        s = m.server
        w = max(6, self.size.width - 18)
        out = Text(no_wrap=True, overflow="ellipsis")
        if not s:
            out.append("no scheduler figures yet\n", "dim")
        else:
            def line(label: str, key: str, fmt: str, top: float | None = None) -> None:
                value = s.get(key)
                out.append(f"{label:<8}", "bold")
                out.append(f"{format(value, fmt) if value is not None else '-':>7} ")
                hist = m.server_hist.get(key)
                if hist:
                    out.append(spark(hist, w, top or max(max(hist), 1.0)), "cyan")
                out.append("\n")

            line("gen tok/s", "gen_throughput", ".0f")
            line("running", "running_reqs", ".0f")
            line("queued", "queued_reqs", ".0f")
            usage = s.get("token_usage")
            out.append(f"{'tokens':<8}", "bold")
            out.append(f"{format(usage, '.2f') if usage is not None else '-':>7} ")
            if isinstance(usage, float):
                out.append(bar(usage, min(w, 20)), "red" if usage > 0.9 else "blue")
            out.append("\n")
            cg = s.get("cuda_graph")
            out.append(f"{'graph':<8}", "bold")
            out.append(f"{'on' if cg else 'off' if cg is not None else '-':>7}", "green" if cg else "yellow")
            out.append(f"   src {m.server_source or '-'}", "dim")
            out.append("\n")
        h = m.health
        out.append(f"{'health':<8}", "bold")
        if h is None:
            out.append(f"{'-':>7}", "dim")
        else:
            out.append(f"{'ok' if h.ok else 'DOWN':>7}", "green" if h.ok else "bold red")
            if not h.ok and h.detail:
                out.append(f" {h.detail}", "red")
        return out
