"""Who holds the GPUs: the compute processes the agent lists (pid, name, SGLang rank, GPU, memory).

nvitop's process pane as a modal on ``g``: the question it answers is "what is using this
GPU's memory" (a stray process from an old run, a second server, the ranks of this one).
It reads the model's last ``GpuProcs`` and follows it while open.  "No compute processes"
(the agent looked and found none) is told apart from "the agent reports no process list"
(nothing came: the nvidia-smi fallback, or no list yet).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from kimitui.events import GpuProcess
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.screens.dialog import Dialog

REFRESH_S = 1.0
"""The agent sends a list every couple of seconds: once a second keeps up without redrawing for nothing."""


def process_table(procs: list[GpuProcess] | None) -> Table | Text:
    """The list sorted by GPU then pid, or the sentence that says why there is none."""
    if procs is None:
        return Text("the agent reports no process list (none came yet, or its backend has none: nvidia-smi)", "dim")
    if not procs:
        return Text("no compute processes on any GPU", "dim")
    table = Table(box=None, header_style="bold", expand=True, pad_edge=False)
    table.add_column("GPU", justify="right", no_wrap=True)
    table.add_column("pid", justify="right", no_wrap=True)
    table.add_column("rank", no_wrap=True)
    table.add_column("memory", justify="right", no_wrap=True)
    show_sm = any(p.sm_util_pct is not None for p in procs)
    if show_sm:
        table.add_column("SM", justify="right", no_wrap=True)
    table.add_column("name", overflow="ellipsis", no_wrap=True, ratio=1)
    for p in sorted(procs, key=lambda p: (p.gpu_index, p.pid)):
        mem = f"{p.used_mib / 1024:.1f} GiB" if p.used_mib is not None else "-"
        cells = [str(p.gpu_index), str(p.pid), p.rank or "-", mem]
        if show_sm:
            cells.append(f"{p.sm_util_pct:.0f}%" if p.sm_util_pct is not None else "-")
        table.add_row(*cells, Text(p.name or "?"))
    return table


class GpuProcesses(Dialog[None]):
    BINDINGS = [Binding("escape,q,g", "dismiss(None)", "Close")]

    DEFAULT_CSS = """
    GpuProcesses { align: center middle; }
    GpuProcesses > VerticalScroll { width: 100; max-width: 95%; height: auto; max-height: 85%;
        border: thick $accent; background: $surface; padding: 0 1; }
    GpuProcesses .title { text-style: bold; }
    GpuProcesses .hint { color: $text-muted; }
    """

    def __init__(self, model: CockpitModel) -> None:
        super().__init__()
        self.model = model
        self._shown: object = ...  # the list last drawn (compared by identity: a new GpuProcs is a new list)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("GPU compute processes", classes="title")
            yield Static(id="procs")
            yield Static("esc / g close · the agent lists processes every 2 s", classes="hint")

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self._refresh()
        self.set_interval(REFRESH_S, self._refresh)

    def _refresh(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        procs = self.model.gpu_procs
        if procs is self._shown:
            return
        self._shown = procs
        self.query_one("#procs", Static).update(process_table(procs))
