"""The server's figures, each a row: label, value with its unit, and a short history.

Decode and prefill throughput (tok/s), running and queued requests, KV-cache use (%), the CUDA
graph state, then where the figures come from and the health check.  Labels and values sit in
fixed columns, so they never run together; below ``COMPACT_WIDTH`` columns or ``FULL_ROWS``
rows (80x24) the panel becomes three or four dense lines with short labels.
"""

from __future__ import annotations

from typing import Unpack

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.render import spark
from kimitui.tui.model.server_figures import (
    FIGURES,
    Figure,
    figure_text,
    pd_figure_text,
    pd_figures,
    sched_figure_alarm,
    sched_figure_text,
    sched_figures,
)
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

LABEL_W = 11
VALUE_W = 6
UNIT_W = 6
SPARK_MAX = 60
"""History shown: the last 60 samples at most (about a minute of Decode lines or scrapes)."""
FULL_ROWS = 7
COMPACT_WIDTH = LABEL_W + VALUE_W + UNIT_W + 4
"""Narrower than this (the label, value and unit columns and a few history cells): compact form."""
LONG_COMPACT_WIDTH = 34
"""A compact form this wide keeps the words (decode, running...) and shortens only the layout."""

SOURCE_NAME = {"log": "log", "metrics": "/metrics", "loads": "/v1/loads"}


class ServerPanel(Widget, ModelView):
    DEFAULT_CSS = """
    ServerPanel { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    shows = frozenset({"server"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self._pd_shown = False
        self._sched_shown = False

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        extra = (1 if self._pd_rows() else 0) + (1 if sched_figures(self.model.server) else 0)
        return FULL_ROWS + extra if width >= COMPACT_WIDTH else 4

    def _pd_rows(self) -> list[tuple[Figure, float]]:
        return pd_figures(self.model.pd_metrics, self.model.pd_log)

    def _pd_line(self, rows: list[tuple[Figure, float]]) -> Text:
        """A PD server's queues and KV transfer on one line: ``PD xfer 2  boot 0  xlat 41.2 ms ...``."""
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"{'PD':<{LABEL_W}}", "bold")
        first = ("kv_transfer_latency_ms", "num_transfer_failed_reqs_total", "num_decode_transfer_queue_reqs")
        rows = sorted(rows, key=lambda r: first.index(r[0].key) if r[0].key in first else len(first))
        for fig, value in rows:  # what a slow or failing transfer moves first: the narrow panel cuts the rest
            bad = fig.key == "num_transfer_failed_reqs_total" and value > 0
            out.append(f"{fig.short} ", "dim")
            out.append(pd_figure_text(fig, value), "bold red" if bad else "")
            out.append("  ")
        out.rstrip()
        return out

    def _sched_line(self) -> Text:
        """Why requests wait, on one line: ``wait 41 ms  retr 3 req 12s ago  fwd 87 %``."""
        m = self.model
        now = m.last_t or 0.0
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"{'scheduler':<{LABEL_W}}", "bold")
        for fig, value in sched_figures(m.server):
            out.append(f"{fig.short} ", "dim")
            text = sched_figure_text(fig, value, m.last_retraction, now)
            out.append(text, sched_figure_alarm(fig, value, m.last_retraction, now) or ("dim" if text == "-" else ""))
            out.append("  ")
        out.rstrip()
        return out

    def redraw(self) -> None:
        pd = bool(self._pd_rows())
        sched = bool(sched_figures(self.model.server))
        # a PD or scheduler row appearing (or going) changes the panel's height
        self.refresh(layout=pd != self._pd_shown or sched != self._sched_shown)
        self._pd_shown, self._sched_shown = pd, sched

    def render(self) -> Text:
        width, height = self.size.width, self.size.height
        if isinstance(self.parent, Widget) and self.parent.content_size.height:
            height = min(height, self.parent.content_size.height)  # the rows a smaller panel shows
        if not self.model.server:
            return Text("\n").join([Text("no scheduler figures yet", "dim"), self._health_line(width)])
        if width < COMPACT_WIDTH or 0 < height < FULL_ROWS - 1:
            return self._compact(width, height)
        return self._full(width, merged=height == FULL_ROWS - 1)

    # ------------------------------------------------------------------ full form
    def _full(self, width: int, merged: bool) -> Text:
        spark_w = min(SPARK_MAX, width - LABEL_W - VALUE_W - UNIT_W - 2)
        lines = [self._figure_line(f, spark_w) for f in FIGURES]
        pd_rows = self._pd_rows()
        if pd_rows:
            lines.append(self._pd_line(pd_rows))
        if sched_figures(self.model.server):
            lines.append(self._sched_line())
        graph = self._graph_text()
        if merged:
            head = Text.assemble(("graph ", "bold"), graph, ("  ", ""))
            lines.append(head + self._health_line(width - head.cell_len))
        else:
            lines.append(Text.assemble((f"{'CUDA graph':<{LABEL_W}}", "bold"), graph))
            lines.append(self._health_line(width))
        return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)

    def _figure_line(self, fig: Figure, spark_w: int) -> Text:
        value = self.model.server.get(fig.key)
        stale = self._stale()
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"{fig.label:<{LABEL_W}}", "bold")
        out.append(f"{figure_text(fig.key, value):>{VALUE_W}}", self._value_style(fig, value, stale))
        out.append(f" {fig.unit:<{UNIT_W - 1}}", "dim")
        hist = self.model.server_hist.get(fig.key)
        if hist and spark_w >= 4:
            top = fig.top or max(max(hist), 1.0)
            out.append(" " + spark(hist, spark_w, top), "dim cyan" if stale else self._spark_style(fig, value))
        return out

    # ------------------------------------------------------------------ compact form (80x24)
    def _compact(self, width: int, height: int) -> Text:
        s = self.model.server
        stale = self._stale()
        long = width >= LONG_COMPACT_WIDTH  # room for the full words in four rows (120x40 while sweeping)
        label_w = 8 if long else 4
        spark_w = min(SPARK_MAX, width - label_w - 12)
        lines = []
        for fig in FIGURES[:2]:
            value = s.get(fig.key)
            line = Text.assemble((f"{fig.label if long else fig.short:<{label_w}}", "bold"),
                                 (f"{figure_text(fig.key, value):>5}", self._value_style(fig, value, stale)),
                                 (f" {fig.unit}", "dim"))
            hist = self.model.server_hist.get(fig.key)
            if hist and spark_w >= 3:
                line.append(" " + spark(hist, spark_w, max(max(hist), 1.0)), "dim cyan" if stale else "cyan")
            lines.append(line)
        reqs = Text()
        for fig in FIGURES[2:]:
            value = s.get(fig.key)
            reqs.append(f"{fig.label if long and fig.unit == 'req' else fig.short} ", "bold")
            reqs.append(figure_text(fig.key, value) + ("%" if fig.unit == "%" else ""),
                        self._value_style(fig, value, stale))
            reqs.append("  ")
        reqs.rstrip()
        lines.append(reqs)
        graph = Text.assemble(("CUDA graph " if long else "graph ", "bold"), self._graph_text(), ("  ", ""))
        lines.append(graph + self._health_line(width - graph.cell_len))
        if 0 < height < 4:  # three rows: prefill gives way to the requests and the health
            del lines[1]
        return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)

    # ------------------------------------------------------------------ pieces
    def _stale(self) -> bool:
        """The server is down: its last figures are shown dim, they are not current."""
        h = self.model.health
        return h is not None and not h.ok

    @staticmethod
    def _value_style(fig: Figure, value: float | bool | None, stale: bool) -> str:
        if stale or value is None:
            return "dim"
        if fig.key == "queued_reqs" and isinstance(value, float) and value > 0:
            return "bold yellow"
        if fig.key == "token_usage" and isinstance(value, float) and value > 0.9:
            return "bold red"
        return "bold"

    @staticmethod
    def _spark_style(fig: Figure, value: float | bool | None) -> str:
        if fig.key == "token_usage" and isinstance(value, float) and value > 0.9:
            return "red"
        return "cyan"

    def _graph_text(self) -> Text:
        cg = self.model.server.get("cuda_graph")
        if cg is None:
            return Text("-", "dim")
        return Text("on", "green") if cg else Text("off", "yellow")

    def _source_text(self) -> Text:
        src = self.model.server_source
        return Text(f" · from {SOURCE_NAME.get(src, src)}" if src else "", "dim")

    def _health_line(self, width: int) -> Text:
        """Health (and its detail when down), then where the figures come from if that fits."""
        m = self.model
        out = Text(no_wrap=True, overflow="ellipsis")
        h = m.health
        out.append("health ", "bold")
        if h is None:
            out.append("-", "dim")
        else:
            out.append("ok" if h.ok else "DOWN", "green" if h.ok else "bold red")
            if not h.ok and h.detail:
                out.append(f" {h.detail}", "red")
        source = self._source_text()
        if out.cell_len + source.cell_len <= width:
            out.append_text(source)
        out.truncate(width, overflow="ellipsis")
        return out
