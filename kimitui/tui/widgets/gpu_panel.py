"""GPU rows and the imbalance gauge, drawn line by line from a per-row cache.

One widget for all GPUs (not one per GPU) keeps a redraw to a single widget.
Each screen line is cached under the values it shows, so a tick rebuilds only
the rows whose figures changed and a frame costs the same per GPU at 8 or 128.
A column appears only if some GPU reports that field, and a cell stays blank
for a GPU that does not: unsupported is never shown as zero.

Up to what fits (16 rows, less on a short terminal) every GPU has its own
row; beyond that each line summarises a group of 8 (16, 32… if even that does
not fit): one utilisation block per GPU, then the group's worst figures, so the
panel never pushes the other panels off the screen.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from itertools import islice, repeat
from operator import truediv
from typing import Unpack

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from kimitui.events import GpuReading
from kimitui.tui.cockpit_state import HISTORY, CockpitModel, GpuRow
from kimitui.tui.render import BLOCKS, bar, rate, spark
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

BENIGN_THROTTLE = {"gpu_idle", "applications_clocks_setting", "app_clocks"}
"""Clock reasons that say nothing is wrong (idle, clocks set by the admin): shown dim."""
HOT_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"}
FIELDS = ("util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz", "pcie_tx_kbps", "pcie_rx_kbps")
FULL_ROWS_MAX = 16
"""Most GPUs shown one per row; more are grouped (the fleet view shows 16+ at once)."""
GROUP = 8


def _util_style(util: float | None) -> str:
    if util is None:
        return "dim"
    return "green" if util >= 80 else ("yellow" if util >= 30 else "cyan")


def row_budget(height: int) -> int:
    """GPU rows the panel may take on a screen ``height`` rows tall (the rest is for the other panels)."""
    return max(2, min(FULL_ROWS_MAX, height // 2 - 3))


def group_size(count: int, height: int) -> int:
    """1 (a row per GPU) while ``count`` rows fit, else the smallest group of 8·2^k whose lines fit.

    Group lines get a quarter of the screen: a fleet summary should not squeeze the curve away.
    """
    if count <= row_budget(height):
        return 1
    budget = max(2, height // 4)
    size = GROUP
    while -(-count // size) + 1 > budget and size < count:  # +1: the legend line
        size *= 2
    return size


class GpuPanel(Widget, ModelView):
    DEFAULT_CSS = """
    GpuPanel { height: auto; min-height: 3; }
    """
    shows = frozenset({"gpus"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.rows_built = 0
        """Screen lines rebuilt so far (a line whose values did not change is reused); tests read it."""
        self._tails: dict[int, tuple[Hashable, Text, int]] = {}
        """GPU index -> (what its tail shows, the tail, its cells)."""
        self._lines: dict[Hashable, tuple[Hashable, Text]] = {}
        """A line's slot (``("row", index)``, ``("gauge",)``...) -> (the values it shows, its text)."""
        self._line_strips: dict[Hashable, tuple[tuple[int, Style], Strip]] = {}
        """A line's slot -> ((width, base style), the line as a strip): a frame reuses unchanged lines."""
        self._frame: list[tuple[Hashable, Text]] = []
        self._widths: dict[Hashable, int] = {}
        """Cells of a row line, known without measuring (block and arrow glyphs make Rich count per char)."""
        self._sparks: dict[int, tuple[GpuReading | None, int, str]] = {}
        self._strips: list[Strip] = []
        self._laid_out_rows = -1
        """GPUs at the last relayout: the panel's height changes only with the GPU count."""

    def redraw(self) -> None:
        rows = len(self.model.gpus)
        self.refresh(layout=rows != self._laid_out_rows)  # a relayout only when the GPU count changes
        self._laid_out_rows = rows

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        n = len(self.model.gpus)
        size = group_size(n, viewport.height)
        return max(1, -(-n // size) + (1 if size > 1 else 0)) + 1

    # ----------------------------------------------------------------- drawing
    def render(self) -> Text:
        """The whole panel as one Text (tests and snapshots of the text; the screen uses render_line)."""
        self._prepare(self.size.width or 200, self.app.size.height if self.is_mounted else 50)
        out = Text(no_wrap=True, overflow="ellipsis")
        for k, (_key, text) in enumerate(self._frame):
            if k:
                out.append("\n")
            out.append_text(text)
        return out

    def render_lines(self, crop: Region) -> list[Strip]:
        self._prepare(self.size.width, self.app.size.height)
        self._strips = self._to_strips(self.size.width)
        self._dirty_regions.clear()  # what Widget._render_content would do: this frame is drawn
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    def _to_strips(self, width: int) -> list[Strip]:
        console: Console = self.app.console
        base: Style = self.rich_style
        strips = []
        for key, text in self._frame:
            cached = self._line_strips.get(key)
            if cached is not None and cached[0] == (width, base):
                strips.append(cached[1])
                continue
            cells = self._widths.get(key)
            if cells is None or cells > width:  # unknown width, or too wide: let Rich measure and cut
                text = text.copy()
                text.truncate(width, overflow="ellipsis")
                cells = text.cell_len
            segments = list(text.render(console))
            if cells < width:
                segments.append(Segment(" " * (width - cells)))
            strip = Strip(segments, width).apply_style(base)
            self._line_strips[key] = ((width, base), strip)
            strips.append(strip)
        return strips

    def _prepare(self, width: int, height: int) -> None:
        """The frame's lines as (key, Text), each rebuilt only when its key (the values it shows) changed."""
        rows = [self.model.gpus[i] for i in sorted(self.model.gpus)]
        if not rows:
            self._frame = [("waiting", Text("waiting for the GPU agent…", "dim"))]
            return
        has = tuple(any(r.supports(name) for r in rows) for name in FIELDS)
        size = group_size(len(rows), height)
        frame = self._rows(rows, has, width) if size == 1 else self._groups(rows, has, size)
        frame.append(self._cached(("gauge",), self._gauge_key(), self._gauge))
        self._frame = frame
        if len(self._lines) + len(self._line_strips) > 8 * (len(frame) + 8):  # lines of GPUs gone or of an old layout
            live = {key for key, _ in frame}
            self._lines = {k: v for k, v in self._lines.items() if k in live}
            self._line_strips = {k: v for k, v in self._line_strips.items() if k in live}

    def _cached(self, slot: Hashable, key: Hashable, build: Callable[[], Text]) -> tuple[Hashable, Text]:
        hit = self._lines.get(slot)
        if hit is None or hit[0] != key:
            self.rows_built += 1
            hit = (key, build())
            self._lines[slot] = hit
            self._line_strips.pop(slot, None)
        return slot, hit[1]

    # ----------------------------------------------------------------- a row per GPU
    def _rows(self, rows: list[GpuRow], has: tuple[bool, ...], width: int) -> list[tuple[Hashable, Text]]:
        has_rank = any(r.rank for r in rows)
        tails = [self._tail_cached(row, has) for row in rows]
        idx_w = max(2, len(str(rows[-1].index)))
        head_w = idx_w + 1 + (9 if has_rank else 0)
        widest = head_w + max(self._tails[row.index][2] for row in rows)
        spark_w = max(4, min(HISTORY, width - widest - 1)) if has[0] else 0
        frame = []
        for row, tail in zip(rows, tails):
            r = row.reading
            util = r.util_pct if r is not None and row.supports("util_pct") else None
            sp = self._spark(row, spark_w) if spark_w and util is not None else " " * spark_w
            key = (row.index, idx_w, row.rank if has_rank else False, sp, _util_style(util), self._tails[row.index][0])
            slot = ("row", row.index)
            frame.append(self._cached(slot, key, partial(self._row, row, idx_w, has_rank, sp, util, tail)))
            self._widths[slot] = head_w + spark_w + self._tails[row.index][2]
        return frame

    def _spark(self, row: GpuRow, width: int) -> str:
        """The row's sparkline, recomputed only when a reading arrived (a frame without data reuses it)."""
        hit = self._sparks.get(row.index)
        if hit is not None and hit[0] is row.reading and hit[1] == width:
            return hit[2]
        sp = _fast_spark(row.util_hist, width)
        self._sparks[row.index] = (row.reading, width, sp)
        return sp

    def _row(self, row: GpuRow, idx_w: int, has_rank: bool, sp: str, util: float | None, tail: Text) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f"{row.index:>{idx_w}} ", "bold")
        if has_rank:
            out.append(f"{(row.rank or '-'):<8} ", "magenta" if row.rank else "dim")
        if sp:
            out.append(sp, _util_style(util))
        out.append_text(tail)
        return out

    def _tail_cached(self, row: GpuRow, has: tuple[bool, ...]) -> Text:
        key = (has, _tail_key(row))
        hit = self._tails.get(row.index)
        if hit is None or hit[0] != key:
            tail = self._tail(row, dict(zip(FIELDS, has)))
            hit = (key, tail, tail.cell_len)
            self._tails[row.index] = hit
        return hit[1]

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
            total = _mem_total(row)
            used = row.value("mem_used_mib")
            if used is not None:
                out.append(" " + bar(used / total if total else None, 5), "blue")
                tot = f"/{total / 1024:.0f}" if total else ""
                out.append(f" {used / 1024:.0f}{tot}G".ljust(8))
            else:
                out.append(" " * 14)
        if has["power_w"]:
            limit = _power_limit(row)
            watts = row.value("power_w")
            if watts is not None:
                style = "red" if limit and watts >= 0.97 * limit else ""
                text = f" {watts:.0f}/{limit:.0f}W" if limit else f" {watts:.0f}W"
                out.append(text.ljust(10), style)
            else:
                out.append(" " * 10)
        if has["temp_c"]:
            temp = row.value("temp_c")
            if temp is not None:
                out.append(f" {temp:>2.0f}°C", _temp_style(temp))
            else:
                out.append(" " * 5)
        if has["sm_clock_mhz"]:
            out.append(f" {r.sm_clock_mhz:>4.0f}MHz" if row.supports("sm_clock_mhz") else " " * 8)
        if has["pcie_tx_kbps"] or has["pcie_rx_kbps"]:
            tx = rate(r.pcie_tx_kbps) if row.supports("pcie_tx_kbps") else ""
            rx = rate(r.pcie_rx_kbps) if row.supports("pcie_rx_kbps") else ""
            out.append(f" ↑{tx:>4} ↓{rx:>4}" if tx or rx else " " * 12, "cyan")
        if r.throttle_reasons:
            out.append(" " + ",".join(r.throttle_reasons), _throttle_style(r.throttle_reasons))
        return out

    # ----------------------------------------------------------------- groups of GPUs
    def _groups(self, rows: list[GpuRow], has: tuple[bool, ...], size: int) -> list[tuple[Hashable, Text]]:
        legend = Text(f"{len(rows)} GPUs, {size} a line: util of each GPU ▁…█ · lowest · highest mem, W, °C",
                      "dim")
        label_w = len(str(rows[-1].index)) * 2 + 1
        frame = [self._cached(("legend",), legend.plain, lambda: legend)]
        has_field = dict(zip(FIELDS, has))
        for start in range(0, len(rows), size):
            group = rows[start:start + size]
            key = (has, size, label_w, tuple((g.index, _tail_key(g)) for g in group))
            build = partial(self._group, group, has_field, size, label_w)
            frame.append(self._cached(("group", start // size), key, build))
        return frame

    @staticmethod
    def _group(group: list[GpuRow], has: dict[str, bool], size: int, label_w: int) -> Text:
        """One line for a group: a block per GPU (its util), the lowest GPU, the highest mem/power/temp."""
        out = Text(no_wrap=True, overflow="ellipsis")
        lo, hi = group[0].index, group[-1].index
        out.append(f"{f'{lo}-{hi}':>{label_w}} ", "bold")
        utils: list[tuple[float, int]] = []
        for g in group:
            u = g.reading.util_pct if g.reading is not None and g.supports("util_pct") else None
            if u is None:
                out.append("·", "dim")
            else:
                out.append(BLOCKS[max(1, min(8, round(u / 100 * 8)))], _util_style(u))
                utils.append((u, g.index))
        out.append(" " * (size - len(group)))
        if has["util_pct"]:
            if utils:
                low, low_i = min(utils)
                out.append(f"  low {low:3.0f}% GPU{low_i:<3}", _util_style(low))
            else:
                out.append(" " * 18)
        if has["mem_used_mib"]:
            mem = [(used, _mem_total(g)) for g in group if (used := g.value("mem_used_mib")) is not None]
            if mem:
                used, total = max(mem, key=lambda m: m[0])
                tot = f"/{total / 1024:.0f}" if total else ""
                out.append(f" {used / 1024:.0f}{tot}G".ljust(8))
            else:
                out.append(" " * 8)
        if has["power_w"]:
            pw = [(w, _power_limit(g)) for g in group if (w := g.value("power_w")) is not None]
            if pw:
                watts, limit = max(pw, key=lambda p: p[0])
                capped = any(lim and w >= 0.97 * lim for w, lim in pw)
                text = f" {watts:.0f}/{limit:.0f}W" if limit else f" {watts:.0f}W"
                out.append(text.ljust(10), "red" if capped else "")
            else:
                out.append(" " * 10)
        if has["temp_c"]:
            temps = [t for g in group if (t := g.value("temp_c")) is not None]
            out.append(f" {max(temps):>2.0f}°C" if temps else " " * 5, _temp_style(max(temps)) if temps else "")
        reasons_of = [(g.index, g.reading.throttle_reasons) for g in group if g.reading is not None]
        throttled = [(i, rs) for i, rs in reasons_of if rs and not all(t in BENIGN_THROTTLE for t in rs)]
        if throttled:
            hot = [t for t in throttled if any(x in HOT_THROTTLE for x in t[1])]
            index, reasons = (hot or throttled)[0]
            more = f" +{len(throttled) - 1}" if len(throttled) > 1 else ""
            out.append(f" GPU{index} {','.join(reasons)}{more}", _throttle_style(reasons))
        return out

    # ----------------------------------------------------------------- the gauge
    def _gauge_key(self) -> Hashable:
        imb = self.model.imbalance()
        return None if imb is None else (round(imb.spread), imb.low_index, round(imb.low), imb.high_index,
                                         round(imb.high), round(imb.spread / 100 * 20))

    def _gauge(self) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        imb = self.model.imbalance()
        out.append("imbalance ", "bold")
        if imb is None:
            out.append("-", "dim")
            return out
        style = "red" if imb.spread >= 25 else ("yellow" if imb.spread >= 10 else "green")
        out.append(bar(imb.spread / 100, 20), style)
        out.append(f" {imb.spread:4.0f} pts  ", style)
        out.append(f"low GPU{imb.low_index} {imb.low:.0f}%  high GPU{imb.high_index} {imb.high:.0f}%", "dim")
        return out


_BLOCK_AT = {i: BLOCKS[max(1, min(8, i))] for i in range(-16, 25)}
"""round(util / 12.5) -> block: ``render.spark`` for 0..100 %, with C-level maps instead of a Python loop."""


def _fast_spark(values: Sequence[float], width: int) -> str:
    """``render.spark(values, width)`` at a third of the cost (a row's spark is rebuilt on every reading)."""
    n = len(values)
    tail = islice(values, n - width, None) if n > width else values
    try:
        chars = "".join(map(_BLOCK_AT.__getitem__, map(round, map(truediv, tail, repeat(12.5)))))
    except (KeyError, TypeError, ValueError, OverflowError):  # a value far outside 0..100 %, or not a number
        return spark(values, width)
    return " " * (width - len(chars)) + chars


def _mem_total(row: GpuRow) -> float | None:
    r = row.reading
    return (r.mem_total_mib if r is not None else None) or (row.static.memory_total_mib if row.static else None)


def _power_limit(row: GpuRow) -> float | None:
    r = row.reading
    return (r.power_limit_w if r is not None else None) or (row.static.power_limit_w if row.static else None)


def _temp_style(temp: float) -> str:
    return "red" if temp >= 85 else ("yellow" if temp >= 75 else "")


def _throttle_style(reasons: list[str]) -> str:
    if any(t in HOT_THROTTLE for t in reasons):
        return "bold red"
    return "dim" if all(t in BENIGN_THROTTLE for t in reasons) else "yellow"


def _tail_key(row: GpuRow) -> Hashable:
    """The figures a row shows, rounded as shown: equal keys draw equal text."""
    r = row.reading
    if r is None:
        return None
    sup = tuple(row.supports(f) for f in FIELDS)
    mem, total, power, limit = r.mem_used_mib, _mem_total(row), r.power_w, _power_limit(row)
    return (sup, None if r.util_pct is None else (round(r.util_pct), _util_style(r.util_pct)),
            None if mem is None else (round(mem / 1024), round(mem / total * 5) if total else None),
            None if total is None else round(total / 1024),
            None if power is None else (round(power), bool(limit and power >= 0.97 * limit)),
            None if limit is None else round(limit),
            None if r.temp_c is None else (round(r.temp_c), _temp_style(r.temp_c)), None if r.sm_clock_mhz is None else round(r.sm_clock_mhz),
            rate(r.pcie_tx_kbps), rate(r.pcie_rx_kbps), tuple(r.throttle_reasons or ()))
