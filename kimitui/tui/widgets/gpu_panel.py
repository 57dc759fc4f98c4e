"""Eight compact GPU rows and the imbalance gauge, rendered as one text block.

One widget for all GPUs (not eight) keeps a redraw to a single render call.
A column appears only if some GPU reports that field, and a cell stays blank
for a GPU that does not: unsupported is never shown as zero.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from kimitui.tui.model import HISTORY, CockpitModel, GpuRow
from kimitui.tui.render import bar, rate, spark

BENIGN_THROTTLE = {"gpu_idle", "applications_clocks_setting", "app_clocks"}
"""Clock reasons that say nothing is wrong (idle, clocks set by the admin): shown dim."""
HOT_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"}


def _util_style(util: float | None) -> str:
    if util is None:
        return "dim"
    return "green" if util >= 80 else ("yellow" if util >= 30 else "cyan")


class GpuPanel(Widget):
    DEFAULT_CSS = """
    GpuPanel { height: auto; min-height: 3; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, model: CockpitModel, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        self.model = model

    def get_content_height(self, container, viewport, width: int) -> int:  # type: ignore[no-untyped-def]
        return max(1, len(self.model.gpus)) + 1

    def render(self) -> Text:
        rows = [self.model.gpus[i] for i in sorted(self.model.gpus)]
        if not rows:
            return Text("waiting for the GPU agent…", "dim")
        has = {name: any(r.supports(name) for r in rows) for name in (
            "util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz", "pcie_tx_kbps", "pcie_rx_kbps")}
        has_rank = any(r.rank for r in rows)
        parts = [(self._head(row, has_rank), self._tail(row, has)) for row in rows]
        widest = max(head.cell_len + tail.cell_len for head, tail in parts)
        spark_w = max(4, min(HISTORY, self.size.width - widest - 1)) if has["util_pct"] else 0
        out = Text(no_wrap=True, overflow="ellipsis")
        for row, (head, tail) in zip(rows, parts):
            out.append_text(head)
            if spark_w:
                r = row.reading
                util = r.util_pct if r is not None and row.supports("util_pct") else None
                out.append(spark(row.util_hist, spark_w) if util is not None else " " * spark_w, _util_style(util))
            out.append_text(tail)
            out.append("\n")
        self._gauge(out)
        return out

    @staticmethod
    def _head(row: GpuRow, has_rank: bool) -> Text:
        out = Text()
        out.append(f"{row.index:>2} ", "bold")
        if has_rank:
            out.append(f"{(row.rank or '-'):<8} ", "magenta" if row.rank else "dim")
        return out

    @staticmethod
    def _tail(row: GpuRow, has: dict[str, bool]) -> Text:
        """Everything right of the sparkline; a blank cell where this GPU lacks a field."""
        out = Text()
        r = row.reading
        if r is None:
            out.append(" no reading yet", "dim")
            return out
        if has["util_pct"]:
            out.append(f"{r.util_pct:4.0f}%" if row.supports("util_pct") else " " * 5, _util_style(r.util_pct))
        if has["mem_used_mib"]:
            total = r.mem_total_mib or (row.static.memory_total_mib if row.static else None)
            if row.supports("mem_used_mib"):
                out.append(" " + bar(r.mem_used_mib / total if total else None, 5), "blue")
                tot = f"/{total / 1024:.0f}" if total else ""
                out.append(f" {r.mem_used_mib / 1024:.0f}{tot}G".ljust(8))
            else:
                out.append(" " * 14)
        if has["power_w"]:
            limit = r.power_limit_w or (row.static.power_limit_w if row.static else None)
            if row.supports("power_w"):
                style = "red" if limit and r.power_w >= 0.97 * limit else ""
                text = f" {r.power_w:.0f}/{limit:.0f}W" if limit else f" {r.power_w:.0f}W"
                out.append(text.ljust(10), style)
            else:
                out.append(" " * 10)
        if has["temp_c"]:
            if row.supports("temp_c"):
                out.append(f" {r.temp_c:>2.0f}°C", "red" if r.temp_c >= 85 else ("yellow" if r.temp_c >= 75 else ""))
            else:
                out.append(" " * 5)
        if has["sm_clock_mhz"]:
            out.append(f" {r.sm_clock_mhz:>4.0f}MHz" if row.supports("sm_clock_mhz") else " " * 8)
        if has["pcie_tx_kbps"] or has["pcie_rx_kbps"]:
            tx = rate(r.pcie_tx_kbps) if row.supports("pcie_tx_kbps") else ""
            rx = rate(r.pcie_rx_kbps) if row.supports("pcie_rx_kbps") else ""
            out.append(f" ↑{tx:>4} ↓{rx:>4}" if tx or rx else " " * 12, "cyan")
        if r.throttle_reasons:
            hot = any(t in HOT_THROTTLE for t in r.throttle_reasons)
            benign = all(t in BENIGN_THROTTLE for t in r.throttle_reasons)
            out.append(" " + ",".join(r.throttle_reasons), "bold red" if hot else ("dim" if benign else "yellow"))
        return out

    def _gauge(self, out: Text) -> None:
        imb = self.model.imbalance()
        out.append("imbalance ", "bold")
        if imb is None:
            out.append("-", "dim")
            return
        style = "red" if imb.spread >= 25 else ("yellow" if imb.spread >= 10 else "green")
        out.append(bar(imb.spread / 100, 20), style)
        out.append(f" {imb.spread:4.0f} pts  ", style)
        out.append(f"low GPU{imb.low_index} {imb.low:.0f}%  high GPU{imb.high_index} {imb.high:.0f}%", "dim")
