"""The fleet in words and bars: one line per host for the strip, grouped GPU rows for ``G``.

Only the layout and colours: the words come from :mod:`kimitui.tui.model.fleet_words`, the rows from
:class:`~kimitui.tui.model.fleet_state.FleetModels` (rich Text and tables, no widgets).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.fleet_state import FleetModels, FleetRow
from kimitui.tui.model.fleet_words import errors_words, gpu_words, tok_s_words, util_words
from kimitui.tui.widgets.header_bar import CONNECTION_STYLE, STATE_STYLE  # the header's colours, host by host

BAR = " ▏▎▍▌▋▊▉█"


def fleet_line(row: FleetRow, width: int = 120) -> Text:
    """``▶ gpu-a  ● connected  ep8-tuned serving  1,234 tok/s  8 GPUs  87 %  sweep C=16 2/5  2 errors``."""
    out = Text()
    out.append("▶ " if row.focused else "  ", "bold #ffa62b")
    out.append(f"{row.host:<12.12}", "bold reverse" if row.focused else "bold")
    out.append("  ● ", CONNECTION_STYLE.get(row.link, "dim"))
    out.append(f"{row.link:<12}", CONNECTION_STYLE.get(row.link, "dim"))
    out.append(f"{(row.profile or 'nothing running'):<16.16} ", "" if row.profile else "dim")
    out.append(f"{row.state:<11}", STATE_STYLE.get(row.state, "dim"))
    out.append(f"{tok_s_words(row):>13}  ")
    out.append(f"{row.gpus} GPUs {util_words(row):>5}", "" if row.gpus else "dim")
    if row.sweep:
        out.append(f"  {row.sweep}", "bold cyan")
    if row.errors:
        out.append(f"  {errors_words(row)}", "bold red")
    out.truncate(width)
    return out


def fleet_strip(fleet: FleetModels, width: int = 120) -> Text:
    return Text("\n").join(fleet_line(row, width) for row in fleet.rows())


def _bar(pct: float | None, width: int = 10) -> Text:
    if pct is None:
        return Text("-".center(width), "dim")
    filled = max(0.0, min(1.0, pct / 100)) * width
    whole = int(filled)
    part = BAR[int((filled - whole) * (len(BAR) - 1))] if whole < width else ""
    return Text(("█" * whole + part).ljust(width), "green")  # busy GPUs are the goal, not a warning


def host_gpus(model: CockpitModel) -> Table:
    """One row per GPU: index, rank, utilisation bar, memory, power, temperature, throttling."""
    table = Table(box=None, pad_edge=False, show_header=False, expand=False)
    for col in ("gpu", "rank", "bar", "util", "mem", "power", "temp", "thr"):
        table.add_column(col, no_wrap=True, justify="right" if col in ("util", "mem", "power", "temp") else "left")
    for gpu in gpu_words(model):
        if not gpu.sampled:
            table.add_row(gpu.name, gpu.rank, Text("no sample yet", "dim"), "", "", "", "", "")
            continue
        thr = gpu.throttle
        table.add_row(
            gpu.name, gpu.rank, _bar(gpu.util_pct), gpu.util, gpu.mem, gpu.power, gpu.temp,
            Text(thr[0], "red" if thr[1] == "bad" else "yellow") if thr else "",
        )
    return table


def fleet_gpus(fleet: FleetModels) -> RenderableType:
    """Every host's GPUs, grouped under a heading that says which host, what runs and how its link is."""
    parts: list[RenderableType] = []
    for row in fleet.rows():
        parts.append(fleet_line(row, 200))
        model = fleet.models[row.host]
        parts.append(host_gpus(model) if model.gpus else Text("    no GPU sample yet", "dim"))
        parts.append(Text(""))
    return Group(*parts)
