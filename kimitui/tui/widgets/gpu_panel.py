"""The GPUs: a device header line, a row per GPU, the util-spread gauge; a summary when room is short.

One widget for all GPUs (not one per GPU) keeps a redraw to a single widget.
Each screen line is cached under the values it shows, so a tick rebuilds only
the lines whose figures changed and a frame costs the same per GPU at 8 or 128.
A column appears only if some GPU reports that field, and a cell stays blank
for a GPU that does not: unsupported is never shown as zero.

What the eye reads, nvitop-style: the header names the model, driver, CUDA and the
PCIe link (coloured when it trained below its maximum).  Each row's bars are the
CURRENT reading, the same value as the number beside them (a stopped server shows
empty bars next to "0%"); the sparkline on the right is labelled as history, scaled
0..100 %.  Colour means something: yellow needs a look (80 °C, a power cap, a 10-point
spread), red is wrong (88 °C, a hardware slowdown, 25 points); labels stay neutral.

Sizes: a row per GPU when GPUs + 2 lines fit; beyond 16 GPUs a line per group of 8
(16, 32…); fewer lines than that get a 1-3 line fleet summary.  Wider panels add
columns (SM clock, PCIe traffic, memory bandwidth, memory clock, a power bar, the history).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import islice, repeat
from operator import truediv
from typing import Unpack

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Resize
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from kimitui.events import GpuReading
from kimitui.tui.model import gpu_summary as words
from kimitui.tui.model.fold import HISTORY
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.gpu_state import GpuRow
from kimitui.tui.render import BLOCKS, bar, rate, spark
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

FIELDS = ("util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz", "pcie_tx_kbps", "pcie_rx_kbps",
          "mem_util_pct", "mem_clock_mhz")
FULL_ROWS_MAX = 16
"""Most GPUs shown one per row; more are grouped (the fleet view shows 16+ at once)."""
GROUP = 8
SUMMARY_LINES = 3
"""Lines the panel asks for on a short terminal (an 80x24 screen): header, figures, a block per GPU."""
SHORT_SCREEN = 30
"""A terminal under this many rows gets the summary (the curve and the log need the room)."""
SEVERITY = {"": "", "warn": "yellow", "bad": "bold red", "dim": "dim", "bold": "bold"}
UTIL_FILL, MEM_FILL, POWER_FILL, TRACK, HISTORY_STYLE = "green", "blue", "blue", "bright_black", "grey62"
SPARK_MIN = 16
SPARK_GOOD = 40
DEFAULT_INTERVAL_S = 0.25


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
    while -(-count // size) + 1 > budget and size < count:  # +1: the header line
        size *= 2
    return size


def mode_for(count: int, lines: int, width: int = 200) -> tuple[str, int]:
    """("rows", 1), ("groups", size) or ("summary", lines) for ``count`` GPUs in ``lines`` content lines
    ``width`` cells wide (a group line needs a cell per GPU of its group and its worst figures)."""
    if count <= FULL_ROWS_MAX and lines >= count + 2:
        return "rows", 1
    if count > FULL_ROWS_MAX:
        size = GROUP
        while -(-count // size) + 2 > lines and size < count:
            size *= 2
        if -(-count // size) + 2 <= lines and len(str(count)) * 2 + 2 + size + 18 <= width:
            return "groups", size
    return "summary", max(1, min(SUMMARY_LINES, lines))


@dataclass(frozen=True)
class Cols:
    """Which columns a row shows and how wide, chosen once per frame from the width and the fields."""

    idx_w: int
    rank_w: int
    util_bar: int
    mem_bar: int
    power_bar: int
    power_w: int
    """10: ``490/700W``; 6 on a narrow panel: ``490W``."""
    sm_clock: bool
    pcie: bool
    mem_bw: bool
    mem_clock: bool
    throttle_w: int
    spark_w: int


def _style(severity: str) -> str:
    return SEVERITY.get(severity, severity)


class GpuPanel(Widget, ModelView):
    DEFAULT_CSS = """
    GpuPanel { height: auto; min-height: 1; }
    """
    shows = frozenset({"gpus"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.rows_built = 0
        """Screen lines rebuilt so far (a line whose values did not change is reused); tests read it."""
        self._lines: dict[Hashable, tuple[Hashable, Line]] = {}
        """A line's slot (``("row", index)``, ``("gauge",)``...) -> (the values it shows, its text)."""
        self._line_strips: dict[Hashable, tuple[tuple[int, Style], Strip]] = {}
        """A line's slot -> ((width, base style), the line as a strip): a frame reuses unchanged lines."""
        self._frame: list[tuple[Hashable, Line]] = []
        self._sparks: dict[int, tuple[GpuReading | None, int, str]] = {}
        self._strips: list[Strip] = []
        self._laid_out: tuple[int, int] = (-1, -1)
        """(GPUs, screen height) at the last relayout: the panel's height changes only with those."""

    def redraw(self) -> None:
        shape = (len(self.model.gpus), self.app.size.height if self.is_mounted else 0)
        self.refresh(layout=shape != self._laid_out)  # a relayout only when the GPU count or screen changes
        self._laid_out = shape

    def on_resize(self, event: Resize) -> None:
        """A new size may be a new mode (rows, groups, summary): redraw, and say how to read it."""
        self.refresh()
        subtitle = self.caption()[1]
        if isinstance(self.parent, Widget) and self.parent.border_subtitle != subtitle:
            self.parent.border_subtitle = subtitle

    def caption(self) -> tuple[str | None, str | None]:
        """The key to the process list; for group lines, how to read them (the legend has no line of its own)."""
        mode, size = mode_for(len(self.model.gpus), self.size.height or self._natural_lines(), self.size.width or 200)
        return None, (f"{size} a line: util ▁…█ of each, lowest GPU, highest mem W °C · g processes"
                      if mode == "groups" else "g processes")

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        n = len(self.model.gpus)
        if n == 0:
            return 1
        if viewport.height < SHORT_SCREEN:
            return SUMMARY_LINES
        size = group_size(n, viewport.height)
        return -(-n // size) + 2  # the header line, the GPUs (or groups), the gauge

    # ----------------------------------------------------------------- drawing
    def render(self) -> Text:
        """The whole panel as one Text (tests and snapshots of the text; the screen uses render_line)."""
        self._prepare(self.size.width or 200, self.size.height or self._natural_lines())
        out = Text(no_wrap=True, overflow="ellipsis")
        for k, (_key, text) in enumerate(self._frame):
            if k:
                out.append("\n")
            out.append_text(text.text())
        return out

    def _natural_lines(self) -> int:
        height = self.app.size.height if self.is_mounted else 50
        return self.get_content_height(Size(200, height), Size(200, height), 200)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._prepare(self.size.width, self.size.height)
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
            cells = text.cell_len
            if cells > width:  # never run into the neighbour: cut with an ellipsis
                cut = text.text()
                cut.truncate(width, overflow="ellipsis")
                segments, cells = list(cut.render(console)), cut.cell_len
            else:
                segments = text.segments()
            if cells < width:
                segments.append(Segment(" " * (width - cells)))
            strip = Strip(segments, width).apply_style(base)
            self._line_strips[key] = ((width, base), strip)
            strips.append(strip)
        return strips

    def _prepare(self, width: int, lines: int) -> None:
        """The frame's lines as (key, Line), each rebuilt only when its key (the values it shows) changed."""
        rows = [self.model.gpus[i] for i in sorted(self.model.gpus)]
        if not rows:
            self._frame = [("waiting", _text([("waiting for the GPU agent…", "dim")]))]
            return
        mode, size = mode_for(len(rows), max(1, lines), width)
        has = tuple(any(r.supports(name) for r in rows) for name in FIELDS)
        if mode == "summary":
            frame = self._summary(rows, width, size)
        else:
            frame = [self._cached(("head",), self._head_key(rows, width), partial(self._head, rows, width))]
            if mode == "rows":
                cols = self._cols(rows, dict(zip(FIELDS, has)), width)
                frame += self._rows(rows, has, cols)
            else:
                frame += self._groups(rows, has, size)
                cols = None
            spark_end = frame[1][1].cell_len if cols is not None and cols.spark_w else None
            seconds = self._history_s(cols.spark_w) if cols is not None else None
            frame.append(self._cached(("gauge",), (self._gauge_key(), width, spark_end, seconds),
                                      partial(self._gauge, width, spark_end, seconds)))
        self._frame = frame
        if len(self._lines) + len(self._line_strips) > 8 * (len(frame) + 8):  # lines of GPUs gone or of an old layout
            live = {key for key, _ in frame}
            self._lines = {k: v for k, v in self._lines.items() if k in live}
            self._line_strips = {k: v for k, v in self._line_strips.items() if k in live}

    def _cached(self, slot: Hashable, key: Hashable, build: Callable[[], Line]) -> tuple[Hashable, Line]:
        hit = self._lines.get(slot)
        if hit is None or hit[0] != key:
            self.rows_built += 1
            hit = (key, build())
            self._lines[slot] = hit
            self._line_strips.pop(slot, None)
        return slot, hit[1]

    def _history_s(self, spark_w: int) -> float | None:
        if not spark_w:
            return None
        caps = self.model.gpu_caps
        interval = (caps.interval_s if caps is not None else None) or DEFAULT_INTERVAL_S
        return spark_w * interval

    # ----------------------------------------------------------------- the header line
    def _head_key(self, rows: list[GpuRow], width: int) -> Hashable:
        caps = self.model.gpu_caps
        link = words.pcie_link(rows)
        names = tuple((r.static.name, r.static.memory_total_mib) if r.static else None for r in rows)
        return (width, names, self.model.driver, caps.cuda_version if caps else None, link)

    def _head(self, rows: list[GpuRow], width: int) -> Line:
        caps = self.model.gpu_caps
        cuda = caps.cuda_version if caps is not None else None
        return _text(words.header_pieces(rows, self.model.driver, cuda, width))

    # ----------------------------------------------------------------- a row per GPU
    def _cols(self, rows: list[GpuRow], has: dict[str, bool], width: int) -> Cols:
        """The columns that fit ``width``: the essentials, then SM clock, PCIe, the history, the rest."""
        idx_w = max(2, len(str(rows[-1].index)))
        ranks = [len(r.rank) for r in rows if r.rank]
        rank_w = min(12, max(ranks)) + 1 if ranks else 0
        thr = [len(p[0]) for r in rows if r.reading is not None and (p := words.throttle_piece(r.reading.throttle_reasons))]
        throttle_w = max(thr) + 1 if thr else 0
        util_bar, mem_bar = (10 if has["util_pct"] else 0), (5 if has["mem_used_mib"] else 0)
        used = (idx_w + 1 + rank_w + (util_bar + 5 if has["util_pct"] else 0) + (mem_bar + 10 if has["mem_used_mib"] else 0)
                + (10 if has["power_w"] else 0) + (5 if has["temp_c"] else 0) + throttle_w)
        room = width - used
        power_w = 10
        # too narrow: a shorter util bar, no memory bar, no rank (the process view has it), watts without the limit
        for cut in ("util", "mem", "rank", "power"):
            if room >= 0:
                break
            if cut == "util" and util_bar:
                util_bar, room = 5, room + 5
            elif cut == "mem" and mem_bar:
                mem_bar, room = 0, room + 6
            elif cut == "rank" and rank_w:
                rank_w, room = 0, room + rank_w
            elif cut == "power" and has["power_w"]:
                power_w, room = 6, room + 4

        def take(cells: int, wanted: bool = True) -> bool:
            nonlocal room
            if wanted and room >= cells:
                room -= cells
                return True
            return False

        sm = take(8, has["sm_clock_mhz"])
        pcie = take(12, has["pcie_tx_kbps"] or has["pcie_rx_kbps"])
        spark_w = SPARK_MIN if take(SPARK_MIN + 2, has["util_pct"]) else 0
        mem_bw = take(9, has["mem_util_pct"])
        mem_clock = take(8, has["mem_clock_mhz"])
        power_bar = 6 if take(7, has["power_w"]) else 0
        if spark_w:  # the history first gets 10 s or so, then the util bar doubles, then the history the rest
            grow = max(0, min(SPARK_GOOD - spark_w, room))
            spark_w, room = spark_w + grow, room - grow
        if util_bar and take(10):
            util_bar += 10
        if spark_w:
            spark_w += max(0, min(HISTORY - spark_w, room))
        return Cols(idx_w, rank_w, util_bar, mem_bar, power_bar, power_w, sm, pcie, mem_bw, mem_clock, throttle_w,
                    spark_w)

    def _rows(self, rows: list[GpuRow], has: tuple[bool, ...], cols: Cols) -> list[tuple[Hashable, Line]]:
        frame = []
        has_field = dict(zip(FIELDS, has))
        for row in rows:
            sp = self._spark(row, cols.spark_w) if cols.spark_w and row.supports("util_pct") else ""
            key = (cols, has, row.rank, sp, _row_key(row))
            frame.append(self._cached(("row", row.index), key, partial(self._row, row, cols, has_field, sp)))
        return frame

    def _spark(self, row: GpuRow, width: int) -> str:
        """The row's sparkline, recomputed only when a reading arrived (a frame without data reuses it)."""
        hit = self._sparks.get(row.index)
        if hit is not None and hit[0] is row.reading and hit[1] == width:
            return hit[2]
        sp = _fast_spark(row.util_hist, width)
        self._sparks[row.index] = (row.reading, width, sp)
        return sp

    @staticmethod
    def _row(row: GpuRow, cols: Cols, has: dict[str, bool], sp: str) -> Line:
        """One GPU: every bar drawn from the same current value as the number beside it."""
        out = Line()
        out.add(f"{row.index:>{cols.idx_w}} ", "bold")
        if cols.rank_w:
            out.add(f"{(row.rank or '-')[:cols.rank_w - 1]:<{cols.rank_w - 1}} ", "" if row.rank else "dim")
        if row.reading is None:
            out.add("no reading yet", "dim")
            return out
        if not any(row.supports(name) for name in FIELDS):
            out.add("reports no figures (see the agent's caps)", "dim")
            return out
        if has["util_pct"]:
            util = row.value("util_pct")
            _bar(out, util / 100 if util is not None else None, cols.util_bar, UTIL_FILL)
            out.add(f" {util:3.0f}%" if util is not None else " " * 5)
        if has["mem_used_mib"]:
            used, total = row.value("mem_used_mib"), _mem_total(row)
            if cols.mem_bar:
                out.add(" ")
                _bar(out, used / total if used is not None and total else None, cols.mem_bar, MEM_FILL)
            text = (f"{words.gib(used)}/{words.gib(total)}G" if total else f"{words.gib(used)}G") if used is not None else ""
            out.add(f" {text:<8}")
        if has["power_w"]:
            _power(out, row, cols)
        if has["temp_c"]:
            temp = row.value("temp_c")
            out.add(f" {temp:>2.0f}°C" if temp is not None else " " * 5,
                       _style(words.temp_severity(temp)) if temp is not None else "")
        _extras(out, row, cols)
        if cols.throttle_w:
            piece = words.throttle_piece(row.reading.throttle_reasons)
            out.add(f" {piece[0]:<{cols.throttle_w - 1}}" if piece else " " * cols.throttle_w,
                       _style(piece[1]) if piece else "")
        if cols.spark_w:  # history, set apart from the bars: a rule, a quieter colour
            out.add(" ▕", TRACK)
            out.add(sp or " " * cols.spark_w, HISTORY_STYLE)
        return out

    # ----------------------------------------------------------------- groups of GPUs
    def _groups(self, rows: list[GpuRow], has: tuple[bool, ...], size: int) -> list[tuple[Hashable, Line]]:
        label_w = len(str(rows[-1].index)) * 2 + 1
        frame = []
        has_field = dict(zip(FIELDS, has))
        for start in range(0, len(rows), size):
            group = rows[start:start + size]
            key = (has, size, label_w, tuple((g.index, _row_key(g)) for g in group))
            build = partial(self._group, group, has_field, size, label_w)
            frame.append(self._cached(("group", start // size), key, build))
        return frame

    @staticmethod
    def _group(group: list[GpuRow], has: dict[str, bool], size: int, label_w: int) -> Line:
        """One line for a group: a block per GPU (its util), the lowest GPU, the highest mem/power/temp."""
        out = Line()
        lo, hi = group[0].index, group[-1].index
        out.add(f"{f'{lo}-{hi}':>{label_w}} ", "bold")
        utils: list[tuple[float, int]] = []
        for g in group:
            u = g.value("util_pct")
            if u is None:
                out.add("·", "dim")
            else:
                out.add(BLOCKS[max(1, min(8, round(u / 100 * 8)))], UTIL_FILL)
                utils.append((u, g.index))
        out.add(" " * (size - len(group)))
        if has["util_pct"]:
            if utils:
                low, low_i = min(utils)
                out.add(f"  low {low:3.0f}% GPU{low_i:<3}")
            else:
                out.add(" " * 18)
        if has["mem_used_mib"]:
            mem = [(used, _mem_total(g)) for g in group if (used := g.value("mem_used_mib")) is not None]
            if mem:
                used, total = max(mem, key=lambda m: m[0])
                tot = f"/{words.gib(total)}" if total else ""
                out.add(f" {words.gib(used)}{tot}G".ljust(9))
            else:
                out.add(" " * 9)
        if has["power_w"]:
            pw = [(w, _power_limit(g)) for g in group if (w := g.value("power_w")) is not None]
            if pw:
                watts, limit = max(pw, key=lambda p: p[0])
                capped = any(lim and w >= 0.97 * lim for w, lim in pw)
                text = f" {watts:.0f}/{limit:.0f}W" if limit else f" {watts:.0f}W"
                out.add(text.ljust(10), "yellow" if capped else "")
            else:
                out.add(" " * 10)
        if has["temp_c"]:
            temps = [t for g in group if (t := g.value("temp_c")) is not None]
            out.add(f" {max(temps):>2.0f}°C" if temps else " " * 5,
                       _style(words.temp_severity(max(temps))) if temps else "")
        throttled = [(g.index, p) for g in group if g.reading is not None
                     and (p := words.throttle_piece(g.reading.throttle_reasons)) is not None]
        if throttled:
            throttled.sort(key=lambda t: t[1][1] != "bad")
            index, (text, severity) = throttled[0]
            more = f" +{len(throttled) - 1}" if len(throttled) > 1 else ""
            out.add(f" GPU{index} {text}{more}", _style(severity))
        return out

    # ----------------------------------------------------------------- the summary
    def _summary(self, rows: list[GpuRow], width: int, lines: int) -> list[tuple[Hashable, Line]]:
        """1-3 lines: the figures (1), a block per GPU (2), the device header first (3)."""
        imb = self.model.imbalance()
        figures = words.figure_pieces(rows, imb, throttling=lines == 1, balance=self.model.balance)
        model = words.model_piece(rows, compact=lines < SUMMARY_LINES)
        frame = []
        if lines >= SUMMARY_LINES:
            frame.append(self._cached(("head",), self._head_key(rows, width), partial(self._head, rows, width)))
            first = words.fit(figures, width)
        else:
            first = words.fit([(model, "bold"), *figures], width)
        frame.append(self._cached(("sum", 0), (width, tuple(first)), partial(_text, first)))
        if lines >= 2:
            key = (width, tuple((r.index, _row_key(r)) for r in rows))
            frame.append(self._cached(("sum", 1), key, partial(self._blocks, rows, width)))
        return frame

    @staticmethod
    def _blocks(rows: list[GpuRow], width: int) -> Line:
        """``now 0 ▇88 1 ▇87 … · no throttling``: each GPU's current util (``!`` hot or throttled), then
        the throttle state, so the spread's culprit and a slowdown are visible."""
        throttle = words.throttle_summary(rows)
        cells = []
        for r in rows:
            u = r.value("util_pct")
            piece = words.throttle_piece(r.reading.throttle_reasons) if r.reading is not None else None
            temp = r.value("temp_c")
            alarm = piece[1] if piece else (words.temp_severity(temp) if temp is not None else "")
            cells.append((r.index, u, alarm))
        # the widest form in which every GPU fits: "0 ▇85", then "▇85" (the position says which), then "▇"
        for form in ("index", "number", "block"):
            need = 3 + sum(1 + (len(str(i)) + 1 if form == "index" else 0) + (len(f"{u:.0f}") if u is not None and
                           form != "block" else 0) + (1 if alarm and form != "block" else 0) for i, u, alarm in cells)
            if need + len(throttle[0]) + 3 <= width:
                break
        out = Line()
        out.add("now", "dim")
        if form == "block":
            out.add(" ")
        for i, u, alarm in cells:
            if form != "block":
                out.add(f" {i} " if form == "index" else " ")
            block_style = _style(alarm) if alarm and form == "block" else (UTIL_FILL if u is not None else "dim")
            floor = 1 if form == "block" else 0  # beside a number, 0 % is an empty cell; alone, the lowest block
            out.add("·" if u is None else BLOCKS[max(floor, min(8, round(u / 100 * 8)))], block_style)
            if form != "block" and u is not None:
                out.add(f"{u:.0f}")
            if alarm and form != "block":
                out.add("!", _style(alarm))
        out.add(" · ", "dim")
        out.add(throttle[0], _style(throttle[1]))
        return out

    # ----------------------------------------------------------------- the gauge
    def _gauge_key(self) -> Hashable:
        if self.model.balance is not None:
            return ("balance", round(self.model.balance, 2), self.model.balance_source)
        imb = self.model.imbalance()
        return None if imb is None else (round(imb.spread), imb.low_index, round(imb.low), imb.high_index,
                                         round(imb.high))

    def _balance_gauge(self, width: int) -> Line:
        """``expert balance ████████░░ 0.81  (server log; 1.0 = even)``: SGLang's own balancedness."""
        out = Line()
        bal = self.model.balance or 0.0
        style = _style(words.balance_severity(bal))
        out.add("expert balance ", "bold")
        out.add(bar(bal, 20 if width >= 80 else 10), style or TRACK)
        out.add(f" {bal:.2f}", style)
        src = {"log": "server log", "/metrics": "/metrics", "heatmap": "heatmap"}.get(self.model.balance_source, "")
        for tail in (f"  ({src}; 1.0 = even · h: heatmap)", f"  ({src}; 1.0 = even)", f"  {src}"):
            if out.cell_len + len(tail) <= width:
                out.add(tail, "dim")
                break
        return out

    def _gauge(self, width: int, spark_end: int | None, seconds: float | None) -> Line:
        """``util spread ██░░ 3 pts  low GPU0 84%  high GPU1 87%``, and the history column's label; the
        expert balance instead when the server reports it (it says why a GPU lags; util only shows that one does)."""
        if self.model.balance is not None:
            return self._balance_gauge(width)
        out = Line()
        imb = self.model.imbalance()
        out.add("util spread ", "bold")
        if imb is None:
            out.add("-", "dim")
        else:
            style = _style(words.spread_severity(imb.spread))
            out.add(bar(imb.spread / 100, 20 if width >= 80 else 10), style or TRACK)  # the whole bar: 100 points
            out.add(f" {imb.spread:3.0f} pts", style)
            ends = f"  low GPU{imb.low_index} {imb.low:.0f}%  high GPU{imb.high_index} {imb.high:.0f}%"
            if round(imb.spread) == 0:
                ends = f"  all GPUs at {imb.high:.0f}%"
            elif out.cell_len + len(ends) > width:
                ends = f"  GPU{imb.low_index}–GPU{imb.high_index}"
            if out.cell_len + len(ends) <= width:
                out.add(ends, "dim")
        if spark_end is not None and seconds is not None:  # under the history column, ending where it ends
            for label in (f"↑ util history, last {seconds:.0f} s", f"↑ history {seconds:.0f} s"):
                at = spark_end - len(label)
                if at >= out.cell_len + 2:
                    out.add(" " * (at - out.cell_len))
                    out.add(label, "dim")
                    break
        return out


NARROW = frozenset(chr(c) for c in range(32, 127)) | frozenset(BLOCKS + "░▕↑↓°×·–…▁")
"""The characters this panel draws, one cell each: a line of only these is as wide as it is long."""


class Line(list[tuple[str, str]]):
    """One screen line as (text, style) pieces: cheaper to build than a Rich Text, and drawn straight
    into segments (a 4 Hz tick of 8 busy GPUs rebuilds every row)."""

    def add(self, text: str, style: str = "") -> None:
        self.append((text, style))

    @property
    def plain(self) -> str:
        return "".join(t for t, _ in self)

    @property
    def cell_len(self) -> int:
        """Cells on screen, without Rich's per-character measuring for the characters this panel draws."""
        plain = self.plain
        return len(plain) if NARROW.issuperset(plain) else cell_len(plain)

    def text(self) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis")
        for piece, style in self:
            out.append(piece, style)
        return out

    def segments(self) -> list[Segment]:
        return [Segment(piece, _rich_style(style)) for piece, style in self if piece]


@lru_cache(maxsize=256)
def _rich_style(style: str) -> Style | None:
    return Style.parse(style) if style else None


def _text(pieces: Sequence[words.Piece]) -> Line:
    out = Line()
    for text, severity in pieces:
        out.add(text, _style(severity))
    return out


def _bar(out: Line, fraction: float | None, width: int, fill: str) -> None:
    """A bar of ``width`` cells filled to ``fraction`` (blank where there is no value)."""
    if fraction is None:
        out.add(" " * width)
        return
    full = round(max(0.0, min(1.0, fraction)) * width)
    out.add("█" * full, fill)
    out.add("░" * (width - full), TRACK)


def _power(out: Line, row: GpuRow, cols: Cols) -> None:
    watts, limit = row.value("power_w"), _power_limit(row)
    if watts is None:
        out.add(" " * (cols.power_w + (cols.power_bar + 1 if cols.power_bar else 0)))
        return
    capped = bool(limit and watts >= 0.97 * limit)
    if cols.power_bar:
        out.add(" ")
        _bar(out, watts / limit if limit else None, cols.power_bar, "yellow" if capped else POWER_FILL)
    text = f"{watts:.0f}/{limit:.0f}W" if limit and cols.power_w == 10 else f"{watts:.0f}W"
    out.add(f" {text:>{cols.power_w - 1}}", "yellow" if capped else "")


def _extras(out: Line, row: GpuRow, cols: Cols) -> None:
    """The columns a wider panel adds: SM clock, PCIe traffic, memory bandwidth, memory clock."""
    r = row.reading
    if r is None:
        return
    if cols.sm_clock:
        sm = row.value("sm_clock_mhz")
        out.add(f" {sm:>4.0f}MHz" if sm is not None else " " * 8)
    if cols.pcie:
        tx = rate(r.pcie_tx_kbps) if row.supports("pcie_tx_kbps") else ""
        rx = rate(r.pcie_rx_kbps) if row.supports("pcie_rx_kbps") else ""
        out.add(f" ↑{tx:>4} ↓{rx:>4}" if tx or rx else " " * 12, "cyan")
    if cols.mem_bw:
        bw = row.value("mem_util_pct")
        out.add(f" bw {bw:3.0f}%" if bw is not None else " " * 9)
    if cols.mem_clock:
        clock = row.value("mem_clock_mhz")
        out.add(f" {clock:>4.0f}MHz" if clock is not None else " " * 8, "dim")


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


def _row_key(row: GpuRow) -> Hashable:
    """The figures a row shows, rounded as shown: equal keys draw equal text."""
    r = row.reading
    if r is None:
        return None
    sup = tuple(row.supports(f) for f in FIELDS)
    mem, total, power, limit = r.mem_used_mib, _mem_total(row), r.power_w, _power_limit(row)
    return (sup, None if r.util_pct is None else round(r.util_pct),
            None if mem is None else (round(mem / 1024), round(mem / total * 20) if total else None),
            None if total is None else round(total / 1024),
            None if power is None else round(power), None if limit is None else round(limit),
            None if r.temp_c is None else round(r.temp_c), None if r.sm_clock_mhz is None else round(r.sm_clock_mhz),
            rate(r.pcie_tx_kbps), rate(r.pcie_rx_kbps), tuple(r.throttle_reasons or ()),
            None if r.mem_util_pct is None else round(r.mem_util_pct),
            None if r.mem_clock_mhz is None else round(r.mem_clock_mhz))
