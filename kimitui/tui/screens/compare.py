"""Two sweeps of this session overlaid, with the verdict from ``kimitui.report.compare``.

A (the reference) defaults to the baseline profile's last sweep, else the sweep
before the last; B is the last sweep.  ``[``/``]`` pick another A; ``b`` goes back to
the host's baseline profile (the app's swap, with its confirm), where the verdict says to.  The
comparison (bootstrap noise) runs in a thread so the cockpit keeps drawing.
Sweeps with different level lists are compared on the levels both have; a level
that is not ``ok`` on a side is no point of its curve (a hollow ``○`` where it got
to) and its row says why it is not judged.
"""

from __future__ import annotations

import math

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static
from textual_plot import HiResMode, PlotWidget
from textual_plot.plot_widget import LegendLocation

from kimitui.analysis.spec import format_speedup
from kimitui.report.cause_summary import count_of
from kimitui.report.compare import Comparison, FigureComparison, LevelComparison, compare
from kimitui.report.spec_eplb import accept_len, collapsed_levels, has_spec, run_speedups
from kimitui.report.sweep_summary import SweepRun
from kimitui.report.verdict import VERDICT_WORDS
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.curve_series import level_ticks, x_limits
from kimitui.tui.model.sweep_energy import j_text
from kimitui.tui.renderables.curve_legend import AGG_MARK, HOLLOW_MARK, OVERLAY_MARK
from kimitui.tui.widgets.sweep_curve import NOT_OK_STYLE, ConcurrencyAxis, LevelAxis
from kimitui.tui.screens.dialog import Dialog

VERDICT_STYLE = {"regressed": "bold red", "improved": "bold green", "same": "bold", "unsure": "bold yellow",
                 "not_comparable": "bold yellow"}


def default_pair(runs: list[SweepRun], baseline: str | None) -> tuple[int, int] | None:
    """Indexes (A, B): B the last run, A the baseline's last other run, else the one before B."""
    if len(runs) < 2:
        return None
    b = len(runs) - 1
    for i in range(b - 1, -1, -1):
        if baseline is not None and runs[i].profile == baseline:
            return i, b
    return b - 1, b


STATUS_STYLE = {"ok": "", "failed": "bold red", "aborted": "bold yellow", "cut": "bold yellow"}


def with_causes(run: SweepRun, model: CockpitModel) -> None:
    """The cockpit's causes for ``run``, so the verdict can say what explains it ("explained by 3 EPLB
    rebalances, 71 s in all"): ``sweep_events`` keeps no telemetry, the cockpit saw every event.  The
    losses of its last sweeps (``CauseBook.losses``), the running sweep's attributions (its SweepView)."""
    losses = model.causes.losses.get(run.sweep_id)
    if losses:
        run.losses = dict(losses)
    sw = model.sweep
    if sw is not None and sw.sweep_id == run.sweep_id and sw.attributions:
        run.attributions = dict(sw.attributions)


ENERGY_COLUMNS = (("j_per_token", "J/tok A/B", "J/tok"), ("cost_per_mtok", "cost/Mtok A/B", "cost"))
"""Energy and cost per token beside the throughput (issue 34): both sides' figures, then B's change and verdict."""

NOTE_MIN = 8
"""Cells the note keeps before an energy column gives way (its reason is said in full below the table)."""


def energy_names(cmp: Comparison) -> list[str]:
    """The energy figures ``compare`` judged at some level (a side has GPU samples; ``[cost]`` set)."""
    return [name for name, _, _ in ENERGY_COLUMNS if any(f.figure == name for lv in cmp.levels for f in lv.figures)]


def energy_cells(lv: LevelComparison, name: str) -> list[str | Text]:
    """``2.53/2.71`` and ``+7 % worse``; a side without the figure ``-`` and why (``no energy A``)."""
    fig = next((f for f in lv.figures if f.figure == name), None)
    if fig is None:
        return ["-", Text("no energy A/B", "yellow")]
    values = "/".join("-" if v is None else _figure_text(name, v) for v in (fig.a, fig.b))
    return [values, _energy_verdict(fig, lv)]


def _figure_text(name: str, v: float) -> str:
    return j_text(v) if name == "j_per_token" else f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _energy_verdict(fig: FigureComparison, lv: LevelComparison) -> Text:
    if not lv.judged:
        return Text("not judged", "bold yellow")
    if fig.change_pct is None:
        sides = "/".join(side for side, v in (("A", fig.a), ("B", fig.b)) if v is None)
        return Text(f"no energy {sides}" if fig.figure == "j_per_token" else f"no cost {sides}", "yellow")
    return Text(f"{fig.change_pct:+.0f} % {VERDICT_WORDS[fig.verdict]}", VERDICT_STYLE.get(fig.verdict, ""))


def level_table(cmp: Comparison, width: int | None = None) -> Table:
    """One line a level; the energy columns (cost first) give way where ``width`` cells cannot hold them whole."""
    energy = energy_names(cmp)
    while True:
        table = _level_table(cmp, energy)
        if not energy or width is None or _min_width(table) <= width:
            return table
        energy = energy[:-1]


def energy_hidden(cmp: Comparison, width: int | None) -> list[str]:
    """The energy columns ``level_table`` leaves out at ``width`` (said under the table: they are below)."""
    shown = {c.header for c in level_table(cmp, width).columns}
    return [head.split()[0] for name, head, _ in ENERGY_COLUMNS if name in energy_names(cmp) and head not in shown]


def _min_width(table: Table) -> int:
    cols = table.columns
    return sum(NOTE_MIN if c.header == "note" else (c.min_width or 0) for c in cols) + 2 * (len(cols) - 1)


def _level_table(cmp: Comparison, energy: list[str]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    spec = has_spec(cmp.a) or has_spec(cmp.b)
    cols = ["C", "status A/B", "A agg", "B agg", "change", "verdict", *(["acc len A/B", "B/A decode"] if spec else []),
            *(head for name, *heads in ENERGY_COLUMNS if name in energy for head in heads),
            "strag A→B", "fail A→B", "note"]
    rows: list[list[str | Text]] = []
    ups = run_speedups(cmp.a, cmp.b) if spec else {}
    collapsed = collapsed_levels(cmp.b) if spec else {}
    for lv in cmp.levels:
        agg = next((f for f in lv.figures if f.figure == "agg_tok_s"), None)
        if agg is None:
            continue
        status = Text()
        for i, st in enumerate(lv.status):
            status.append(("/" if i else "") + st, STATUS_STYLE.get(st, ""))
        if lv.judged and lv.throughput_distorted:  # said once above the table (Comparison.client_line)
            verdict = Text("unsure (client)", VERDICT_STYLE["unsure"])
            note = Text("")
        elif lv.judged:
            verdict = Text(VERDICT_WORDS[agg.verdict], VERDICT_STYLE.get(agg.verdict, ""))
            # the reason is said once below, grouped (Comparison.unsure_lines); the row says what settles it
            note = Text(agg.settle or agg.why, "yellow") if agg.verdict == "unsure" else Text("")
        else:
            verdict = Text("not judged", "bold yellow")
            note = Text(lv.not_judged, "yellow")
        strike = "" if lv.judged else "dim strike"
        extra: list[str | Text] = []
        if spec:
            accs = [accept_len(run.levels[lv.concurrency]) if lv.concurrency in run.levels else None
                    for run in (cmp.a, cmp.b)]
            acc = Text("/".join("-" if v is None else f"{v:.2f}" for v in accs),
                       "bold yellow" if lv.concurrency in collapsed else "")
            up = ups.get(lv.concurrency)
            extra = [acc, format_speedup(up.decode if up is not None else None)]
        rows.append([str(lv.concurrency), status,
                      Text(f"{agg.a:.1f}" if agg.a is not None else "-", strike if lv.status[0] != "ok" else ""),
                      Text(f"{agg.b:.1f}" if agg.b is not None else "-", strike if lv.status[1] != "ok" else ""),
                      f"{agg.change_pct:+.0f} %" if agg.change_pct is not None else "-", verdict, *extra,
                      *(cell for name in energy for cell in energy_cells(lv, name)),
                      _stragglers(lv.stragglers, lv.requests),
                      f"{lv.failed[0]} → {lv.failed[1]}", note])
    # One line a level, every figure whole: at 80 columns wrapped cells ran into the next row, and a shrunk
    # column would cut "1010" to "101" (issue 32).  Only the note gives way; its reason is said in full below.
    for i, col in enumerate(cols):
        is_note = col == "note"
        whole = max([cell_len(col.split()[0]), *(_cells(row[i]) for row in rows)])
        table.add_column(col, justify="left" if col in ("status A/B", "verdict", "J/tok", "cost", "note") else "right",
                         no_wrap=True, overflow="ellipsis", min_width=None if is_note else whole,
                         ratio=1 if is_note else None)
    for row in rows:
        table.add_row(*row)
    return table


def _stragglers(counts: tuple[int, int], requests: tuple[int, int]) -> str:
    """``0 → 1 of 6`` (one total said once where both sides sent as many), else ``0 of 6 → 1 of 8``."""
    if requests[0] == requests[1]:
        return f"{counts[0]} → {count_of(counts[1], requests[1])}"
    return f"{count_of(counts[0], requests[0])} → {count_of(counts[1], requests[1])}"


def _cells(cell: str | Text) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


class CompareScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,c", "dismiss(None)", "Close"),
                Binding("left_square_bracket", "other_a(-1)", "earlier A"),
                Binding("right_square_bracket", "other_a(1)", "later A"),
                Binding("b", "back_to_baseline", "back to baseline")]

    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > VerticalScroll { width: 95%; height: 92%; border: thick $accent; background: $surface;
        padding: 0 1; }
    CompareScreen #compare-head { height: auto; }
    CompareScreen #compare-body { height: auto; max-height: 50%; }
    CompareScreen PlotWidget { height: 1fr; min-height: 12; }
    """

    def __init__(self, model: CockpitModel) -> None:
        super().__init__()
        self.model = model
        self.runs = model.compare.runs(model.sweep_state.energy)  # with each level's J/token, the idle, the prices
        for run in self.runs:
            with_causes(run, model)
        self.pair = default_pair(self.runs, model.baseline)

    def compose(self) -> ComposeResult:
        with VerticalScroll():  # on a short screen the curves are below the verdict, a scroll away
            yield Static(id="compare-head")
            yield Static(id="compare-body")
            plot = PlotWidget(allow_pan_and_zoom=False, id="compare-plot")
            plot.can_focus = False
            yield plot

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        plot = self.query_one(PlotWidget)
        plot.set_x_formatter(ConcurrencyAxis())
        plot.set_xlabel("concurrency C (log scale)")
        plot.set_ylabel("tok/s")
        self._show()

    def back_offered(self) -> bool:
        """A live host with a baseline that is not what runs: ``b`` swaps back to it (not in a replay)."""
        m = self.model
        return bool(m.baseline) and m.baseline != m.profile and self.app.check_action("swap_baseline", ()) is not False

    def keys_line(self) -> Text:
        """The keys under the verdict, as the footer writes them: back to the baseline first, where it applies."""
        keys = [("b", f"back to baseline {self.model.baseline}")] if self.back_offered() else []
        keys += [("[ ]", "picks another A"), ("esc", "closes")]
        line = Text()
        for i, (key, what) in enumerate(keys):
            line.append(f"{key} ", "bold")
            line.append(what + ("  ·  " if i < len(keys) - 1 else ""), "dim")
        return line

    def action_back_to_baseline(self) -> None:
        """Close the verdict and ask the app to swap to the baseline (its confirm shows the diff first)."""
        m = self.model
        if not self.back_offered():
            why = ("no baseline is marked on this host" if not m.baseline else
                   f"{m.baseline}, the baseline, is what runs" if m.baseline == m.profile else
                   "a replay swaps nothing")
            self.app.notify(why, severity="warning", timeout=4)
            return
        self.dismiss(None)
        self.app.call_later(self.app.run_action, "swap_baseline")

    def action_other_a(self, step: int) -> None:
        if self.pair is None:
            return
        a, b = self.pair
        choices = [i for i in range(len(self.runs)) if i != b]
        self.pair = (choices[(choices.index(a) + step) % len(choices)], b)
        self._show()

    def _show(self) -> None:
        head = self.query_one("#compare-head", Static)
        if self.pair is None:
            head.update(Text("Compare needs two sweeps with results in this session "
                             f"({len(self.runs)} so far). Run another profile's sweep, then press c.", "yellow"))
            return
        a, b = (self.runs[i] for i in self.pair)
        head.update(Text.assemble((f"A {a.label}  vs  B {b.label}   comparing…\n", "bold"), self.keys_line()))
        self._plot(a, b)
        self._compare(a, b)

    def _plot(self, a: SweepRun, b: SweepRun) -> None:
        """Both runs as the cockpit's curve draws them: a tick per level, a marker per measured level, a level
        that is not ``ok`` hollow (``○``) at the figure it reached, never joined in (``kimitui.tui.model.curve_series``)."""
        plot = self.query_one(PlotWidget)
        plot.clear()
        levels = sorted(set(a.levels) | set(b.levels))
        xmin, xmax = x_limits(levels)
        axis = LevelAxis()
        width = max(plot.size.width, int(self.app.size.width * 0.9))  # not laid out yet on mount
        axis.labels = dict(level_ticks(levels, xmin, xmax, width - plot.margin_left))
        plot.set_x_formatter(axis)
        plot.set_xticks(sorted(axis.labels))
        ymax = 10.0
        for run, style, mark in ((a, "grey70", OVERLAY_MARK), (b, "bold green", AGG_MARK)):
            pts = [(row.concurrency, row.agg_tok_s) for row in run.ordered_levels
                   if row.valid and row.agg_tok_s is not None]
            bad = [(row.concurrency, row.agg_tok_s or 0.0) for row in run.ordered_levels if not row.valid]
            ymax = max([ymax, *(y for _, y in pts), *(y for _, y in bad)])
            if pts:
                plot.plot([math.log2(c) for c, _ in pts], [y for _, y in pts], line_style=style,
                          hires_mode=HiResMode.BRAILLE, label=run.label)
                plot.scatter([math.log2(c) for c, _ in pts], [y for _, y in pts], marker=mark, marker_style=style)
            if bad:
                plot.scatter([math.log2(c) for c, _ in bad], [y for _, y in bad], marker=HOLLOW_MARK,
                             marker_style=NOT_OK_STYLE, label=f"{run.label}: level not ok, no point")
        plot.set_xlimits(xmin, xmax)
        plot.set_ylimits(0, ymax * 1.1)
        plot.show_legend(LegendLocation.TOPLEFT)  # curves rise to the right

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _compare(self, a: SweepRun, b: SweepRun) -> None:
        try:
            result = compare(a, b)
        except Exception as exc:  # a report bug must not take the cockpit down
            self.app.call_from_thread(self._show_failure, str(exc))
            return
        self.app.call_from_thread(self._show_result, result)

    def _show_failure(self, message: str) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self.query_one("#compare-head", Static).update(Text(f"compare failed: {message}", "bold red"))

    def _show_result(self, cmp: Comparison) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        head = Text.assemble((cmp.headline(), VERDICT_STYLE.get(cmp.verdict, "bold")),
                             (f"\nA {cmp.a.label}  vs  B {cmp.b.label}\n", "dim"), self.keys_line())
        self.query_one("#compare-head", Static).update(head)
        lines = cmp.summary_lines()[1:]
        grid = Table.grid()
        if cmp.verdict == "not_comparable":
            grid.add_row(Text("\n".join(lines)))
        else:  # which levels, the per-level table and the knobs first: they must stay in view
            client = cmp.client_line()
            grid.add_row(Text(lines[0], "bold"))
            if client:
                grid.add_row(Text(client, "yellow"))
            width = self.query_one("#compare-body", Static).content_size.width or None
            grid.add_row(level_table(cmp, width))
            hidden = energy_hidden(cmp, width)
            if hidden:  # energy_lines below say each level's change and verdict
                cols = "their columns" if len(hidden) > 1 else "its column"
                grid.add_row(Text(f"{' and '.join(hidden)}: below (widen for {cols})", "dim"))
            elif not energy_names(cmp):
                grid.add_row(Text("J/tok: no energy on either side (no GPU power samples cover their levels)", "dim"))
            rest = [line for line in lines[1:-1] if line != client]
            grid.add_row(Text("\n" + "\n".join([lines[-1], *rest])))
        self.query_one("#compare-body", Static).update(grid)
