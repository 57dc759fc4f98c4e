"""One row per finished level (both aggregates, latency percentiles, failures) plus the running one."""

from __future__ import annotations

from textual.widgets import DataTable

from kimitui.tui.model import CockpitModel
from kimitui.tui.render import ms, num

COLUMNS = ("C", "agg tok/s", "steady", "TTFT50", "TTFT99", "TPOT50", "TPOT99", "dec50", "dec99", "fail", "strag")


class LevelTable(DataTable):
    """Few rows (one per level), so a redraw rebuilds them; it is read, not navigated."""

    DEFAULT_CSS = """
    LevelTable { height: auto; max-height: 12; }
    """

    def __init__(self, model: CockpitModel, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(cursor_type="none", zebra_stripes=True, **kwargs)
        self.model = model
        self.can_focus = False

    def on_mount(self) -> None:
        self.add_columns(*COLUMNS)
        self.redraw()

    def redraw(self) -> None:
        self.clear()
        sw = self.model.sweep
        if sw is None:
            return
        finished = set()
        for lv in sorted(sw.levels, key=lambda lv: (lv.concurrency, lv.repeat)):
            finished.add(lv.concurrency)
            fail = f"{lv.failed}" if not lv.failures else f"{lv.failed} " + ",".join(
                f"{k}:{v}" for k, v in sorted(lv.failures.items()))
            self.add_row(
                str(lv.concurrency) + (f"#{lv.repeat}" if lv.repeat else ""),
                num(lv.agg_tok_s, ".1f"), num(lv.steady_tok_s, ".1f"),
                ms(lv.ttft.p50), ms(lv.ttft.p99), ms(lv.tpot.p50), ms(lv.tpot.p99),
                num(lv.decode_tok_s.p50, ".1f"), num(lv.decode_tok_s.p99, ".1f"),
                fail, str(len(lv.stragglers)) if lv.stragglers else "",
                key=f"{lv.concurrency}:{lv.repeat}",
            )
        live = sw.live_point
        if live is not None and sw.concurrency is not None and sw.outcome is None:
            prog = sw.progress
            self.add_row(f"{live[0]}…", f"{live[1]:.1f}", "", "", "", "", "", "", "",
                         str(prog.failed) if prog else "", "running", key="live")
