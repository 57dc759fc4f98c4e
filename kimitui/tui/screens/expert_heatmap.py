"""How the routed experts load the GPUs, layer by layer: the heatmap on ``h``.

Rows are MoE layers (binned into bands to fit), columns GPU ranks; a cell is that GPU's routed
tokens over the band's mean (1.0 = its fair share), from SGLang's own
``sglang:eplb_gpu_physical_count`` windows (the newest few seconds).  Under it: the balancedness now
and its history, and the EPLB rebalances (the last one, how long it stalled, how many so far).  It
follows the model while open, live and in a replay.  With no heatmap data it says why, from the
running server's ``/server_info`` (:func:`kimitui.tui.model.heatmap_data.why_no_heatmap`), and how to turn it on.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from kimitui.analysis.eplb import next_rebalance_in
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.heatmap_data import HeatBand, bands, hottest, shade, why_no_heatmap
from kimitui.tui.render import clock, spark
from kimitui.tui.screens.dialog import Dialog

REFRESH_S = 0.5
HIST_FLOOR = 0.5
"""The balance history's sparkline spans 0.5-1.0: balancedness lives there, and 0-1 would draw it flat."""


def heat_table(band_list: list[HeatBand], cell: int) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold", padding=(0, 0))
    table.add_column("layers ", no_wrap=True, style="dim")
    for g in range(len(band_list[0].ratios)):
        table.add_column(f" GPU{g}".rjust(cell), no_wrap=True, justify="center")
    table.add_column(" bal", no_wrap=True, justify="right")
    for band in band_list:
        cells = []
        for r in band.ratios:
            glyph, style = shade(r)
            cells.append(Text(f" {glyph * (cell - 1)}", style))
        bal = band.balance
        table.add_row(band.label, *cells, Text(f" {bal:.2f}", "yellow" if bal < 0.85 else ""))
    return table


def binning(band_list: list[HeatBand]) -> Text:
    """Says how the layers were binned: 61 MoE layers do not fit a terminal's rows."""
    layers = sum(b.last_layer - b.first_layer + 1 for b in band_list)
    if all(b.first_layer == b.last_layer for b in band_list):
        return Text(f"{layers} MoE layers, one row each", "dim")
    per = max(b.last_layer - b.first_layer + 1 for b in band_list)
    return Text(f"{layers} MoE layers in {len(band_list)} rows (up to {per} consecutive layers each, summed)", "dim")


def legend() -> Text:
    out = Text("tokens vs fair share: ", "dim")
    for label, ratio in (("<0.9", 0.5), ("0.9–1.1", 1.0), ("1.1–1.3", 1.2), (">1.3", 1.5)):
        glyph, style = shade(ratio)
        out.append(glyph * 2, style)
        out.append(f" {label}  ", "dim")
    return out


class ExpertHeatmap(Dialog[None]):
    BINDINGS = [Binding("escape,q,h", "dismiss(None)", "Close")]

    DEFAULT_CSS = """
    ExpertHeatmap { align: center middle; }
    ExpertHeatmap > VerticalScroll { width: 110; max-width: 98%; height: auto; max-height: 95%;
        border: thick $accent; background: $surface; padding: 0 1; }
    ExpertHeatmap .title { text-style: bold; }
    ExpertHeatmap .hint { color: $text-muted; }
    """

    def __init__(self, model: CockpitModel) -> None:
        super().__init__()
        self.model = model
        self._drawn: object = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("Experts: routed tokens per GPU, layer by layer", classes="title", id="title")
            yield Static(id="map")
            yield Static(id="facts")
            yield Static("esc / h close · cells: a GPU's tokens over its layer band's mean", classes="hint")

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self._refresh()
        self.set_interval(REFRESH_S, self._refresh)

    def _rows_for_map(self) -> int:
        return max(4, min(30, self.app.size.height - 16))  # the facts under the map stay on a 24-row screen

    def _refresh(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        m = self.model
        key = (m.expert_load.t if m.expert_load else None, len(m.timeline.rebalances.records), m.balance,
               self.app.size.height, m.generation, int(m.last_t or 0), m.server_args is None)
        if key == self._drawn:
            return
        self._drawn = key
        found = bands(m.heat.summed(), self._rows_for_map())
        if found:
            self.query_one("#map", Static).update(Group(binning(found), heat_table(found, 6), legend()))
        else:
            self.query_one("#map", Static).update(Text(why_no_heatmap(m.server_args, m.balance is not None), "yellow"))
        self.query_one("#facts", Static).update(self._facts(found))

    def _facts(self, found: list[HeatBand]) -> Text:
        m = self.model
        out = Text()
        if m.balance is not None:
            out.append("balance now ", "bold")
            out.append(f"{m.balance:.2f} ", "yellow" if m.balance < 0.85 else "green")
            out.append(f"  (from {m.balance_source}; 1.0 = even)  ", "dim")
            hist = list(m.balance_hist)[-40:]
            out.append(spark([max(0.0, v - HIST_FLOOR) for v in hist], 40, top=1.0 - HIST_FLOOR), "cyan")
            out.append(f" last {len(hist)}, {HIST_FLOOR}–1.0", "dim")
            out.append("\n")
        hot = hottest(found)
        if hot is not None:
            out.append(f"busiest GPU{hot[0]}: {hot[1]:.2f}x its fair share on average\n", "dim")
        out.append_text(self._rebalances())
        return out

    def _rebalances(self) -> Text:
        """``EPLB rebalances: 3 · last at 10:21:07 (35 s ago), 9.3 s · 1 skipped``, then ``next ≈ in 12 s at
        the recent pace (EPLB rebalances every 1000 forward passes)``: on the model's clock, so a replay says
        what the operator saw then."""
        m = self.model
        records = m.timeline.rebalances.records
        recs = [r for r in records if not r.skipped]
        skipped = len(records) - len(recs)
        out = Text()
        if recs:
            last = recs[-1]
            took = f"{last.duration_s:.1f} s" if last.duration_s is not None else ("running" if last.end is None else "")
            ago = f" ({max(0.0, m.last_t - last.start):.0f} s ago)" if m.last_t is not None else ""
            out.append(f"EPLB rebalances: {len(recs)}", "bold magenta")
            out.append(f" · last at {clock(last.start)}{ago}" + (f", {took}" if took else ""), "magenta")
        else:
            out.append("no EPLB rebalance yet", "dim")
        if skipped:
            out.append(f" · {skipped} skipped (balance above the threshold)", "dim")
        nxt = next_rebalance_in(records, m.last_t) if m.last_t is not None else None
        every = (m.server_args or {}).get("eplb_rebalance_num_iterations")
        when = ("" if nxt is None else f"next ≈ in {nxt:.0f} s at the recent pace" if nxt >= 1
                else "next due now at the recent pace")
        if isinstance(every, int) and (m.server_args or {}).get("enable_eplb"):
            out.append(f"\n{when or 'next'} (EPLB rebalances every {every} forward passes)", "dim")
        elif when:
            out.append(f"\n{when}", "dim")
        return out
