"""The sweep's stragglers with their cause (issue 18); choosing one opens why, and what the GPUs and log did
during its slowest gap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.catalogue import short
from kimitui.analysis.causes.words import pct
from kimitui.events import Straggler
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.render import clock, num
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


class StragglerList(DataTable[str | Text], ModelView):
    @dataclass
    class Chosen(Message):
        straggler: Straggler

    DEFAULT_CSS = """
    StragglerList { height: 1fr; min-height: 3; }
    """
    shows = frozenset({"stragglers"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.model = model
        self._shown: list[Straggler] = []
        self._causes: list[Attribution | None] = []
        self._stepped = False
        """Whether ``j``/``J`` or ``x`` has placed the highlight (or the list has the focus): else a step starts at
        an end, not one past the row the table highlights by default."""

    def on_mount(self) -> None:
        self.add_columns("C", "tok/s", "gap", "cause", "at", "median", "request", "why")  # what a narrow panel shows first
        self.redraw()

    def redraw(self) -> None:
        sw = self.model.sweep
        stragglers = list(sw.stragglers) if sw else []
        causes = [sw.attributions.get(s.request_id) for s in stragglers] if sw else []
        if stragglers == self._shown and causes == self._causes:
            return
        row = self.cursor_row
        self.clear()
        self._shown, self._causes = stragglers, causes
        for i, (s, a) in enumerate(zip(stragglers, causes)):
            self.add_row(str(s.concurrency), Text(num(s.decode_tok_s, ".1f"), "bold red"),
                         Text(f"{s.max_gap_s:.1f}s" if s.max_gap_s is not None else "-", "red"), cause_cell(a),
                         clock(s.gap_start) if s.gap_start else "-", num(s.median_decode_tok_s), s.request_id[-12:],
                         s.reason, key=str(i))
        if stragglers:
            self.move_cursor(row=min(max(row, 0), len(stragglers) - 1))
        else:
            self._stepped = False  # a new sweep: the next j starts at its first straggler

    def step(self, forward: bool = True) -> Straggler | None:
        """Move the highlight to the next (or previous) straggler and return it; None past either end.

        ``j``/``J`` live: the first press lands on the first (or, going back, the newest) straggler."""
        if not self._shown:
            return None
        row = self.cursor_row if self._stepped or self.has_focus else (-1 if forward else len(self._shown))
        row += 1 if forward else -1
        if not 0 <= row < len(self._shown):
            return None
        self._stepped = True
        self.move_cursor(row=row)
        return self._shown[row]

    def newest(self) -> Straggler | None:
        """The straggler found last (the list is in the order levels reported them), highlighted."""
        if not self._shown:
            return None
        self._stepped = True
        self.move_cursor(row=len(self._shown) - 1)
        return self._shown[-1]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        i = int(event.row_key.value or 0)
        if 0 <= i < len(self._shown):
            self.post_message(self.Chosen(self._shown[i]))


CONFIDENCE_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim yellow", "none": "dim"}
"""Red: kimitui is sure; yellow: likely (``?``) or possible (``??``); dim: nothing it saw covers the gap."""


def cause_cell(a: Attribution | None) -> Text:
    """``EPLB 99%``; ``KV full? 62%`` when only likely, ``prefill?? 30%`` when only possible; ``unknown``;
    ``…`` while it has none (the cockpit attributes a straggler when its level's result lands)."""
    if a is None:
        return Text("…", "dim")
    if not a.known:
        return Text("unknown", "dim")
    mark = {"high": "", "medium": "?", "low": "??"}.get(a.confidence, "")
    return Text(f"{short(a.cause)}{mark} {pct(a.coverage).replace(' ', '')}", CONFIDENCE_STYLE.get(a.confidence, ""))
