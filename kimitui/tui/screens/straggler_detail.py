"""A straggler's slowest gap: the GPUs and the log during [gap_start, gap_end]."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kimitui.analysis.window import WindowView
from kimitui.events import Straggler
from kimitui.tui.render import clock, num, rate
from kimitui.tui.widgets.straggler_list import describe

SEVERITY_STYLE = {"error": "bold red", "critical": "bold red", "warning": "yellow", "debug": "dim"}


def gpu_table(view: WindowView) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("GPU", "util before", "util min", "util mean", "PCIe peak", "temp max", "power max", "throttle"):
        table.add_column(col, justify="right" if col not in ("throttle",) else "left")
    hot = view.hottest_gpu
    for g in view.gpus:
        dropped = g.util_before is not None and g.util_mean is not None and g.util_mean < g.util_before - 10
        table.add_row(
            str(g.index), num(g.util_before), Text(num(g.util_min), "red" if dropped else ""),
            Text(num(g.util_mean), "red" if dropped else ""), rate(g.pcie_peak_kbps),
            Text(num(g.temp_max), "bold red" if hot is not None and g.index == hot.index else ""),
            num(g.power_max), ",".join(g.throttle),
        )
    return table


class StragglerDetail(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "dismiss(None)", "Close")]

    DEFAULT_CSS = """
    StragglerDetail { align: center middle; }
    StragglerDetail > VerticalScroll { width: 92%; height: 90%; border: thick $error;
        background: $surface; padding: 0 1; }
    StragglerDetail .section { margin-top: 1; text-style: bold; }
    """

    def __init__(self, straggler: Straggler, view: WindowView | None) -> None:
        super().__init__()
        self.straggler, self.view = straggler, view

    def compose(self) -> ComposeResult:
        s, v = self.straggler, self.view
        with VerticalScroll():
            yield Static(Text(f"Straggler {s.request_id} at C={s.concurrency}: {describe(s)}", "bold red"))
            if s.reason:
                yield Static(Text(f"why: {s.reason}", "dim"))
            if v is None:
                yield Static("This straggler has no gap window (no gap_start/gap_end recorded).")
                return
            yield Static(f"GPUs {clock(v.start)} – {clock(v.end)} ({len(v.gpu_samples)} samples)", classes="section")
            yield Static(gpu_table(v) if v.gpus else Text("no GPU samples kept for this window", "dim"),
                         id="straggler-gpus")
            yield Static(f"Log during the gap ({len(v.log_lines)} lines)", classes="section")
            lines = Text()
            for line in v.log_lines[-200:]:
                lines.append(f"{clock(line.t)} {line.raw}\n", SEVERITY_STYLE.get(line.severity, ""))
            yield Static(lines if v.log_lines else Text("no log lines in this window", "dim"), id="straggler-log")
