"""One row per finished level (status, both aggregates, requests, time, latency percentiles, failures)
plus the running one with its requests done/total and ETA; the panel's subtitle is the whole sweep's
progress (levels, requests, elapsed, ETA: :mod:`kimitui.analysis.sweep_eta`).

A level that is not ``ok`` says so in its status cell and has its aggregates struck through (they
are not the server's throughput); ``⚠ client`` marks a level whose latencies the load process
itself distorted.  The last column says why.

Issue 18: ``loss`` names the cause behind most of what a finished level delivered under its own median
decode pace (:mod:`kimitui.analysis.causes.tail`), and the panel's title says the worst level's sentence
("C=1: aggregate 13.3 tok/s vs 61 expected: 96 % of the loss is one EPLB rebalance") as far as it fits:
the table has no selected row or tooltip to say it for each level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Unpack

from rich.cells import cell_len
from rich.text import Text
from textual.coordinate import Coordinate
from textual.widget import Widget
from textual.widgets import DataTable

from kimitui.analysis.causes.tail import SMALL_LOSS, LevelLoss
from kimitui.analysis.level_stats import client_limited_throughput, effective_status
from kimitui.analysis.spec import collapses, format_speedup, level_accept_len, speedups
from kimitui.analysis.sweep_eta import SweepEta, duration, eta_text, level_requests, summary, sweep_eta
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.sweep_view import SweepView
from kimitui.tui.model.level_eplb import rebalances_by_level
from kimitui.tui.model.sweep_energy import j_text, per_kw_text, watts_text
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

COLUMNS = ("C", "status", "agg", "steady", "reqs", "time", "TTFT p50/99", "TPOT p50/99", "decode p50/99", "fail",
           "strag", "why")
SPEC_COLUMNS = ("acc len", "×base")
"""After ``steady`` when the sweep has speculative figures: the level's accept length (yellow when it
collapsed, :mod:`kimitui.analysis.spec`) and its per-user decode speed-up over the baseline at that C."""
EPLB_COLUMN = "EPLB"
"""After ``steady`` (and the speculative columns) when a level had EPLB rebalances: how many, and the seconds
decoding stalled (``≡1 9s``): the dip of that level's aggregate, explained where it is read."""
LOSS_COLUMN = "loss"
"""After the EPLB column when a level delivered 5 % or more under its own median decode pace: the cause
behind most of that loss and its share (``EPLB 96%``, :mod:`kimitui.analysis.causes.tail`)."""
ENERGY_COLUMNS = ("J/tok", "tok/s/kW", "cost/M")
"""Issue 34, before ``fail`` when the levels have power figures: joules per output token (the aggregate window),
tokens per second per kW of all GPUs' mean power, and (``[cost]`` configured) the cost per million output
tokens.  Last in :data:`PRIORITY`: where the panel is narrow they give way first, and its subtitle says so."""
PRIORITY = ("C", "status", "agg", "decode p50/99", LOSS_COLUMN, "acc len", EPLB_COLUMN, "steady", "×base", "fail",
            "strag", "reqs", "TTFT p50/99", "time", "TPOT p50/99", *ENERGY_COLUMNS)
"""Issue 32: which columns a narrow panel keeps, first to last (shown in ``COLUMNS`` order, ``why`` last where
room is left): the per-user decode pace before the extras that explain the aggregate, TPOT (its inverse) last.
A ``status`` column where every level is plain ``ok`` says nothing and comes after ``steady``; while a level
runs it comes right after the decode column (its row reads ``▶ 64 … running``)."""
RUNNING = "▶ "
"""Issue 32: the running level's C cell starts with it (``▶ 64``; ``64…`` was read as a cut figure)."""
STATUS_STYLE = {"ok": "green", "failed": "bold red", "aborted": "bold yellow", "cut": "bold yellow"}
PANEL_TITLE = "Levels & stragglers"


def loss_title(worst: LevelLoss | None, width: int) -> str:
    """The panel's title with the worst level's sentence, the longest wording that fits ``width`` columns."""
    if worst is None:
        return PANEL_TITLE
    level = f"C={worst.concurrency}" + (f"#{worst.repeat}" if worst.repeat else "")
    sentence = worst.sentence()
    tail = sentence.partition(": ")[2] or sentence  # "96 % of the loss is one EPLB rebalance"
    for text in (f"{PANEL_TITLE} · {level}: {sentence}", f"Levels · {level}: {sentence}",
                 f"Levels · {level}: {tail}", f"{level}: {tail}"):
        if len(text) <= width:
            return text
    return PANEL_TITLE


def pair(p50: float | None, p99: float | None, fmt: Callable[[float | None], str]) -> str:
    return f"{fmt(p50)}/{fmt(p99)}"


def _rate(v: float | None) -> str:
    """tok/s: one decimal where it matters (C=1 ~ 65), none above 100."""
    return "-" if v is None else (f"{v:.1f}" if v < 100 else f"{v:.0f}")


def _per_user(v: float | None) -> str:
    """tok/s per user: ``1327/135``; a decimal only under 10 (``8.1``), where it is a tenth of the figure."""
    return "-" if v is None else (f"{v:.1f}" if v < 10 else f"{v:.0f}")


def visible_columns(columns: tuple[str, ...], rows: list[tuple[str | Text, ...]], width: int) -> tuple[str, ...]:
    """The columns that fit ``width`` cells, each as wide as its widest cell (or label) plus the table's padding,
    taken in :data:`PRIORITY` order and shown in ``columns`` order; ``why``, where a level has one, ends the row
    in what is left (cut where it must)."""
    def need(i: int) -> int:
        return max([cell_len(columns[i])] + [cell_len(str(row[i])) for row in rows]) + 2

    order = [c for c in PRIORITY if c in columns]
    said = {str(row[columns.index("status")]) for row in rows} if "status" in columns else set()
    if said and said <= {"ok", "running"}:
        after = "steady" if "running" not in said else "decode p50/99"
        order.remove("status")
        order.insert(order.index(after) + 1 if after in order else len(order), "status")
    kept: set[str] = set()
    used = 0
    for col in order:
        i = columns.index(col)
        if used + need(i) <= width or not kept:
            kept.add(col)
            used += need(i)
    why = columns.index("why") if "why" in columns else -1
    explained = why >= 0 and any(str(row[why]) for row in rows)
    return tuple(c for c in columns if c in kept or (c == "why" and explained and width > used))


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}"


def progress_of(model: CockpitModel) -> SweepEta | None:
    """The sweep's progress and ETA as of the newest event the cockpit folded (a replay's clock too)."""
    sw = model.sweep
    if sw is None:
        return None
    now = sw.outcome.t if sw.outcome is not None else max(model.last_t or sw.started_t, sw.started_t)
    prog = sw.progress if sw.progress is not None and sw.progress.concurrency == sw.concurrency else None
    return sweep_eta(sw.spec, sw.levels, prog, now - sw.started_t, time_scale=model.sim_time_scale or 1.0,
                     age_s=max(0.0, now - prog.t) if prog is not None else 0.0,
                     outcome=sw.outcome.outcome if sw.outcome is not None else None)


def _requests_cell(sw: SweepView, c: int, done: int) -> str:
    total = level_requests(sw.spec, c)
    return f"{done}/{total}" if total is not None else str(done)


class LevelExtras:
    """Per C, the speculative and EPLB cells of the level table, per finished level its loss cell and the
    worst level's loss (pure: from the model and analysis)."""

    def __init__(self, model: CockpitModel) -> None:
        self.spec = False
        self.eplb = False
        self.loss = False
        self.cells: dict[str, dict[str, str | Text]] = {}
        self.losses: dict[str, Text] = {}
        """Row key (``C:repeat``) -> the loss cell; none for the running level (it has lost nothing yet)."""
        self.worst: LevelLoss | None = None
        """The level that lost the most (5 % or more) of what its median pace promised."""
        self.energy = False
        self.cost = False
        self.energy_cells: dict[str, dict[str, str | Text]] = {}
        """Row key (``C:repeat``) -> its J/tok, tok/s/kW and cost cells."""
        self.idle = ""
        """``idle 736 W``: all GPUs' power before the sweep, said once in the subtitle."""
        sw = model.sweep
        if sw is None:
            return
        self._energy(model, sw)
        base = (model.profile_levels.get(model.baseline or "", {})
                if model.baseline and model.baseline != sw.profile else {})
        ups = speedups(sw.levels, list(base.values()))
        collapsed = {c.concurrency for c in collapses(sw.levels)}
        for lv in sw.levels:
            cells = self.cells.setdefault(str(lv.concurrency), {})
            acc = level_accept_len(lv)
            if acc is not None:
                self.spec = True
                cells["acc len"] = Text(f"{acc:.2f}" + (" ▼" if lv.concurrency in collapsed else ""),
                                        "bold yellow" if lv.concurrency in collapsed else "")
                up = ups.get(lv.concurrency)
                cells["×base"] = format_speedup(up.decode if up is not None else None)
        for c, reb in rebalances_by_level(model).items():  # the curve marks the same levels with ≡
            self.eplb = True
            self.cells.setdefault(str(c), {})[EPLB_COLUMN] = Text(reb.text, "magenta")
        for (c, repeat), loss in sorted(sw.losses.items()):
            if loss.loss_fraction >= SMALL_LOSS:
                self.loss = True
                cause = loss.main_cause
                named = cause not in (None, "unknown")
                self.losses[f"{c}:{repeat}"] = Text(loss.cell(), "bold red" if named else "dim")
                if self.worst is None or loss.loss_fraction > self.worst.loss_fraction:
                    self.worst = loss
        live = sw.spec_watch
        if live.concurrency is not None and live.mean is not None and sw.outcome is None:
            self.spec = True
            self.cells.setdefault(str(live.concurrency), {})["acc len"] = f"{live.mean:.2f}…"


    def _energy(self, model: CockpitModel, sw: SweepView) -> None:
        energy_state = model.sweep_state.energy
        if sw.idle is not None and sw.idle.ok:
            self.idle = f"idle {watts_text(sw.idle.mean_w)}"
        for lv in sw.levels:
            e = sw.energy.get((lv.concurrency, lv.repeat))
            if e is None:
                continue
            cost = energy_state.cost(lv, e)
            self.energy = self.energy or e.j_per_token is not None
            self.cost = self.cost or cost is not None
            missing = Text("no power", "dim") if e.j_per_token is None else None
            self.energy_cells[f"{lv.concurrency}:{lv.repeat}"] = {
                "J/tok": missing or j_text(e.j_per_token), "tok/s/kW": missing or per_kw_text(e.tokens_per_kj),
                "cost/M": "-" if cost is None or cost.per_mtok is None else f"{cost.per_mtok:.2f}"}


def level_extras(model: CockpitModel) -> LevelExtras:
    return LevelExtras(model)


class LevelTable(DataTable[str | Text], ModelView):
    """Few rows (one per level), so a redraw rebuilds them; it is read, not navigated (so no
    horizontal scrollbar: the columns that fit the panel are chosen by :func:`visible_columns`).

    Issue 32: the table is as tall as its rows (every level of the sweep) and the straggler list under it
    gets the rest of the panel; it never scrolls a level out."""

    DEFAULT_CSS = """
    LevelTable { height: auto; overflow-x: hidden; }
    """
    shows = frozenset({"levels"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(cursor_type="none", zebra_stripes=True, **kwargs)
        self.model = model
        self.can_focus = False
        self._last: list[tuple[str, tuple[str | Text, ...]]] = []
        self._eta: SweepEta | None = None
        self._columns: tuple[str, ...] = COLUMNS
        self._extras = LevelExtras(model)

    def caption(self) -> tuple[str | None, str | None]:
        # the panel's border keeps a few cells for its corners and title gap
        width = max(20, self.size.width - 4)
        sub = summary(self._eta, width) if self._eta is not None else None
        extra = [self._extras.idle] if self._extras.idle else []
        if self._extras.energy and not any(c in self._columns for c in ENERGY_COLUMNS):
            extra.insert(0, "J/tok hidden: widen")  # the energy columns gave way first: said before the idle power
        for word in extra:
            if sub is None or len(sub) + len(word) + 3 <= width:
                sub = word if sub is None else f"{sub} · {word}"
        return loss_title(self._extras.worst, width), sub

    def on_mount(self) -> None:
        self._columns = COLUMNS
        self.add_columns(*COLUMNS)
        self.redraw()

    def _all_columns(self) -> tuple[str, ...]:
        """Every column this sweep has figures for, in the order they are read."""
        extra = self._extras
        cols = list(COLUMNS)
        at = cols.index("steady") + 1  # beside the aggregates they explain
        if extra.loss:
            cols.insert(at, LOSS_COLUMN)
        if extra.eplb:
            cols.insert(at, EPLB_COLUMN)
        if extra.spec:
            cols[at:at] = SPEC_COLUMNS
        if extra.energy:
            at = cols.index("fail")
            cols[at:at] = ENERGY_COLUMNS if extra.cost else ENERGY_COLUMNS[:2]
        return tuple(cols)

    def on_resize(self) -> None:
        """The subtitle's wording and the columns that fit depend on the width (the app sets captions only
        after a redraw)."""
        title, subtitle = self.caption()
        if isinstance(self.parent, Widget):
            self.parent.border_title = title
            if subtitle is not None:
                self.parent.border_subtitle = subtitle
        self.redraw()

    def redraw(self) -> None:
        """Rebuild only when the rows changed; the moving live row is updated in place."""
        self._eta = progress_of(self.model)
        full = self._rows()
        columns = self._all_columns()
        cells = [self._fit(key, row, columns) for key, row in full]
        width = self.scrollable_content_region.width  # less the scrollbar of a panel too short for every level
        wanted = visible_columns(columns, cells, width) if width > 0 else columns
        if width > 0 and full and full[-1][0] == "live" and "status" not in wanted:
            live = cells[-1]  # no room for the status column: the running row says it in its C cell
            cells[-1] = (f"{live[0]} running", *live[1:])
            wanted = visible_columns(columns, cells, width)
        if wanted != self._columns:
            self.clear(columns=True)
            self.add_columns(*wanted)
            self._columns, self._last = wanted, []
        rows = [(key, tuple(row[columns.index(col)] for col in wanted)) for (key, _), row in zip(full, cells)]
        old = self._last
        if rows == old:
            return
        if old and len(rows) == len(old) and rows[:-1] == old[:-1] and rows[-1][0] == "live" == old[-1][0]:
            for col, (a, b) in enumerate(zip(old[-1][1], rows[-1][1])):
                if a != b:
                    self.update_cell_at(Coordinate(len(rows) - 1, col), b, update_width=True)
        else:
            self.clear()
            for key, row in rows:
                self.add_row(*row, key=key)
            if rows and rows[-1][0] == "live":  # a panel too short for every level shows the running one
                self.call_after_refresh(self.scroll_end, animate=False)
            self.call_after_refresh(self._refit)
        self._last = rows

    def _refit(self) -> None:
        """New rows can bring a scrollbar (or take it away): choose the columns again for the width left."""
        if self.is_mounted and self._last:
            self.redraw()

    def _fit(self, key: str, cells: tuple[str | Text, ...], columns: tuple[str, ...]) -> tuple[str | Text, ...]:
        """The base columns' cells, with the speculative, EPLB and loss cells inserted where the columns are."""
        if columns == COLUMNS:
            return cells
        extra = {**self._extras.cells.get(str(cells[0]).removeprefix(RUNNING).split("#")[0], {})}
        extra[LOSS_COLUMN] = self._extras.losses.get(key, "")
        extra.update(self._extras.energy_cells.get(key, {}))
        return tuple(extra.get(col, "") if col in SPEC_COLUMNS or col in (EPLB_COLUMN, LOSS_COLUMN, *ENERGY_COLUMNS)
                     else cells[COLUMNS.index(col)] for col in columns)

    def _rows(self) -> list[tuple[str, tuple[str | Text, ...]]]:
        self._extras = level_extras(self.model)
        sw = self.model.sweep
        rows: list[tuple[str, tuple[str | Text, ...]]] = []
        if sw is None:
            return rows
        said: set[bool] = set()  # the client's meaning is worded once per sweep, on its first level; the rest carry the mark
        for lv in sorted(sw.levels, key=lambda lv: (lv.concurrency, lv.repeat)):
            fail = f"{lv.failed}" if not lv.failures else f"{lv.failed} " + ",".join(
                f"{k}:{v}" for k, v in sorted(lv.failures.items()))
            status, reason = effective_status(lv, sw.spec.max_error_rate)
            label = Text(status, STATUS_STYLE.get(status, ""))
            why = [reason] if status != "ok" and reason else []
            if lv.client_distorted:
                limited = client_limited_throughput(lv)
                label.append(" ⚠ client" if limited else " · client", "bold yellow" if limited else "dim")
                if limited not in said:
                    said.add(limited)
                    why.append("⚠ client could not keep up: this level's figures decide nothing" if limited
                               else "· client stamped latencies late: TTFT/TPOT not judged, throughput is")
            figure = (lambda v: v) if status == "ok" else (lambda v: Text(v, "dim strike"))
            rows.append((f"{lv.concurrency}:{lv.repeat}", (
                str(lv.concurrency) + (f"#{lv.repeat}" if lv.repeat else ""), label,
                figure(_rate(lv.agg_tok_s)), figure(_rate(lv.steady_tok_s)),
                _requests_cell(sw, lv.concurrency, lv.requests), duration(lv.wall_s) if lv.wall_s else "-",
                pair(lv.ttft.p50, lv.ttft.p99, _ms) + "ms", pair(lv.tpot.p50, lv.tpot.p99, _ms) + "ms",
                pair(lv.decode_tok_s.p50, lv.decode_tok_s.p99, _per_user),
                fail, str(len(lv.stragglers)) if lv.stragglers else "", "; ".join(why),
            )))
        live = sw.live_point
        if live is not None and sw.concurrency is not None and sw.outcome is None:
            prog = sw.progress
            run = self._eta.running if self._eta is not None else None
            reqs = _requests_cell(sw, live[0], run.done + run.failed) if run is not None else ""
            eta = eta_text(run.eta_s, run.estimated) if run is not None else ""
            rows.append(("live", (f"{RUNNING}{live[0]}", "running", _rate(live[1]), "", reqs, eta, "", "", "",
                                  str(prog.failed) if prog else "", "", "")))
        return rows
