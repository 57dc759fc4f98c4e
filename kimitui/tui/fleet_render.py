"""The fleet in words and bars: one line per host for the strip, grouped GPU rows for ``G``.

Pure rendering over :class:`~kimitui.tui.model.fleet_state.FleetModels` (rich Text and tables, no widgets).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kimitui.tui.model.cockpit_state import NODE_STRIDE, CockpitModel
from kimitui.tui.model.fleet_state import FleetModels, FleetRow
from kimitui.tui.model.gpu_summary import throttle_piece
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
    gen = f"{row.gen_tok_s:,.0f} tok/s" if row.gen_tok_s is not None else "- tok/s"
    out.append(f"{gen:>13}  ")
    util = f"{row.util_pct:.0f} %" if row.util_pct is not None else "-"
    out.append(f"{row.gpus} GPUs {util:>5}", "" if row.gpus else "dim")
    if row.sweep:
        out.append(f"  {row.sweep}", "bold cyan")
    if row.errors:
        out.append(f"  {row.errors} error{'s' if row.errors != 1 else ''}", "bold red")
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
    for index in sorted(model.gpus):
        row = model.gpus[index]
        r = row.reading
        name = f"  GPU{index % NODE_STRIDE}"  # another node's GPUs are named by its host in the rank column
        if r is None:
            table.add_row(name, row.rank or "", Text("no sample yet", "dim"), "", "", "", "", "")
            continue
        thr = throttle_piece(r.throttle_reasons)  # as the GPU panel says it: idle clocks are no slowdown
        mem = (f"{r.mem_used_mib / 1024:.0f}/{r.mem_total_mib / 1024:.0f} GiB"
               if r.mem_used_mib is not None and r.mem_total_mib is not None else "-")
        table.add_row(
            name, row.rank or "", _bar(r.util_pct),
            f"{r.util_pct:.0f}%" if r.util_pct is not None else "-", mem,
            f"{r.power_w:.0f} W" if r.power_w is not None else "-",
            f"{r.temp_c:.0f}°C" if r.temp_c is not None else "-",
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
