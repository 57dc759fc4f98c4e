"""The server log: a Textual ``Log`` written in batches, with filter, pause and search.

Lines are kept as plain strings (``Log`` renders only what is visible); the
severity letter in a fixed column lets a highlighter colour errors and warnings
without per-line renderables.

Never behind (issue 15).  Textual's ``Log`` fell behind in two ways, both fixed here rather than
worked around per call site:

* it scrolls on a write only if it was at the end *before* the write, and it measures the lines'
  width in a thread afterwards; when they are wider than the panel, the horizontal scrollbar that
  measurement brings takes a row, the end moves one row down, and no later write scrolls again.
  Every ``clear()`` (a search, a filter, a seek) measures from zero, so each one could strand the
  view.  The panel *anchors* the ``Log`` instead: Textual keeps an anchored view at the end on every
  layout, until the operator scrolls up (released), and again once they scroll back to the end.
* at ``max_lines`` a write prunes the oldest lines but refreshes rows past the new end, so a view
  that stays at the bottom is never repainted: the screen froze on what it showed when the log
  filled.  The panel writes with ``scroll_end=False``, which makes ``Log`` refresh the whole view.

A rank-tagged line whose other ranks' copies may still come is held back one tick (``HOLD_S``), so
a copy arriving in the next batch joins the line (``TP0–7``) instead of the line going out with one
rank's tag.
"""

from __future__ import annotations

import re
import time
from typing import Unpack

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Log, Static

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.log_ring import HIDE_POLLING, LogEntry
from kimitui.tui.model.log_status import status_text
from kimitui.tui.render import clock
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

SEVERITY_LETTER = {"debug": "D", "info": "I", "warning": "W", "error": "E", "critical": "C"}
SEVERITY_CYCLE = ("debug", "warning", "error")
MAX_LINES = 5_000
HOLD_S = 0.25
"""How long a rank-tagged line waits for the other ranks' copies: under one tick of the app's pump
(0.33 s), so it goes out on the next tick, well inside the 1 s the newest line may take."""

__all__ = ["HIDE_POLLING", "LogPanel", "format_entry", "status_text"]


_SERVER_STAMP = re.compile(r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?((?: [A-Z_]+[0-9–,]+)*)\] ?")
_UVICORN_LEVEL = re.compile(r"INFO: +")


def short_text(text: str) -> str:
    """The line without what the panel's own columns already say: SGLang's date and time
    (``[2025-11-30 10:21:07 TP0–7 EP0–7] msg`` -> ``[TP0–7 EP0–7] msg``), uvicorn's ``INFO:``."""
    m = _SERVER_STAMP.match(text)
    if m is not None:
        tags = m.group(1).strip()
        return f"[{tags}] {text[m.end():]}" if tags else text[m.end():]
    m = _UVICORN_LEVEL.match(text)
    return text[m.end():] if m is not None else text


KIND_WIDTH = 8
"""The kind column's cells: every kind SGLang's lines get (``startup``, ``warning``...) fits whole."""
KIND_LABEL = {"connection": "link"}
"""kimitui's own kinds longer than the column, as the column says them (issue 32: ``connection`` read
``connecti``); the kind filter keeps the full name."""


def kind_label(kind: str) -> str:
    """The kind as its column says it, never cut silently: a known short form, the first word of a kind of
    several (``node node-1`` -> ``node``) or, last, the name elided with ``…``."""
    if len(kind) <= KIND_WIDTH:
        return kind
    label = KIND_LABEL.get(kind) or kind.split()[0]
    return label if len(label) <= KIND_WIDTH else label[:KIND_WIDTH - 1] + "…"


def format_entry(e: LogEntry) -> str:
    node = f"[{e.node}] " if e.node else ""  # a deployment's process: decode-0, node-1@gpu-b
    return (f"{clock(e.t)} {SEVERITY_LETTER.get(e.severity, '?')} {kind_label(e.kind):<{KIND_WIDTH}} "
            f"{node}{short_text(e.text)}")


class SeverityHighlighter(Highlighter):
    """Red for errors, yellow for warnings, reverse video for the search text."""

    def __init__(self) -> None:
        self.search = ""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if len(plain) > 9:
            letter = plain[9]
            if letter in "EC":
                text.stylize("bold red")
            elif letter == "W":
                text.stylize("yellow")
            elif letter == "D":
                text.stylize("dim")
        if self.search:
            for m in re.finditer(re.escape(self.search), plain, re.IGNORECASE):
                text.stylize("reverse", m.start(), m.end())


class TailLog(Log):
    """Textual's ``Log``, whose last line can be written again.

    A progress bar's redraws are one entry of the ring, updated in place (a CUDA-graph capture's 52, the
    weights' shards); written once, the line on screen kept the bar's first redraw.  ``Log`` has no call
    to rewrite a line, so this reaches its line list and render cache (Textual is pinned exactly;
    tests/test_log_tail_rewrite.py breaks if their names move)."""

    def replace_last_line(self, text: str) -> bool:
        """Show ``text`` in place of the last line; False when there is none."""
        lines = self._lines
        y = len(lines) - 1
        if y >= 0 and lines[y] == "":
            y -= 1  # a write that ended in a newline leaves an empty line after it
        if y < 0:
            return False
        lines[y] = text
        self._update_maximum_width(self._updates, cell_len(self._process_line(text)))
        self.refresh_lines(y)
        return True


class LogPanel(Vertical, ModelView):
    DEFAULT_CSS = """
    LogPanel { height: 1fr; }
    LogPanel > #log-status { height: 1; color: $text-muted; }
    LogPanel > Log { height: 1fr; overflow-x: auto; scrollbar-size-vertical: 1; }
    """
    shows = frozenset({"log"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.min_severity = "debug"
        self.kind: str | None = HIDE_POLLING
        """A kind to show alone, ``-kind`` to hide one, None for all; kimitui's own polling starts hidden."""
        self.search = ""
        self.paused = False
        self._highlighter = SeverityHighlighter()
        self._held: list[tuple[float, LogEntry]] = []
        """Taken from the model's pending ring, not written yet: (when taken, entry), oldest first."""
        self._release: Timer | None = None
        """Writes what is held once it is due, should no new line come to flush it before."""
        self._noted = False
        """Whether the panel's subtitle says that no line matches (so it is cleared once one does)."""
        self._tail: tuple[LogEntry, str] | None = None
        """The last line written (its entry, its text then): a bar's entry redrawn since is written again."""

    def compose(self) -> ComposeResult:
        yield Static(id="log-status")
        log = TailLog(highlight=True, max_lines=MAX_LINES, id="log")
        log.highlighter = self._highlighter
        yield log

    def on_mount(self) -> None:
        self.log_widget.anchor()
        self._status()

    def on_resize(self, event: events.Resize) -> None:
        self._status()

    @property
    def log_widget(self) -> TailLog:
        return self.query_one(TailLog)

    def flush(self) -> int:
        """Write the model's pending lines (filtered); returns how many were written."""
        if self.paused:
            self._status()
            return 0
        now = time.monotonic()
        self._rewrite_tail()
        self._held.extend((now, e) for e in self.model.log_pending)
        self.model.log_pending.clear()
        ready = self._ready(now)
        entries = self.model.filtered_logs(self.min_severity, self.kind, self.search, ready)
        lines = [format_entry(e) for e in entries]
        if lines:  # the anchor keeps the view at the end; scroll_end=False repaints it (see the module doc)
            self.log_widget.write_lines(lines, scroll_end=False)
            self._tail = (entries[-1], lines[-1])
        if self._held and self._release is None:
            self._release = self.set_timer(HOLD_S, self._release_held)
        return len(lines)

    def _rewrite_tail(self) -> None:
        """The last line again, if its entry changed since it was written (a progress bar's redraw)."""
        if self._tail is None:
            return
        entry, shown = self._tail
        text = format_entry(entry)
        if text != shown and self.log_widget.replace_last_line(text):
            self._tail = (entry, text)

    def _release_held(self) -> None:
        self._release = None
        self.flush()

    def _ready(self, now: float) -> list[LogEntry]:
        """The held entries that may go out now, in order: up to the first that may still grow and is young."""
        ring = self.model.log_ring
        n = 0
        for taken, entry in self._held:
            if now - taken < HOLD_S and ring.may_grow(entry):
                break
            n += 1
        ready = [e for _, e in self._held[:n]]
        del self._held[:n]
        return ready

    def redraw(self) -> None:
        self.flush()

    def caption(self) -> tuple[str | None, str | None]:
        """An empty log under a filter says so, lest it read as a server that went quiet."""
        filtering = self.min_severity != "debug" or bool(self.search) or self.kind not in (HIDE_POLLING, None)
        if self.log_widget.line_count == 0 and filtering and self.model.logs:
            self._noted = True
            return None, f"none of {len(self.model.logs)} lines match: f, t, / widen it"
        if self._noted:
            self._noted = False
            return None, ""
        return None, None

    def _caption_now(self) -> None:
        """After an operator's filter change, not at the next line: the app sets captions only on a redraw."""
        _, subtitle = self.caption()
        if subtitle is not None and isinstance(self.parent, Widget):
            self.parent.border_subtitle = subtitle

    def rebuild(self) -> None:
        """Rewrite from the model's ring after a filter, search or resume, and follow the end again."""
        self.model.log_pending.clear()
        self._held.clear()
        log = self.log_widget
        log.clear()
        self._highlighter.search = self.search
        entries = self.model.filtered_logs(self.min_severity, self.kind, self.search)
        lines = [format_entry(e) for e in entries]
        log.write_lines(lines[-MAX_LINES:], scroll_end=False)
        self._tail = (entries[-1], lines[-1]) if entries else None
        log.anchor()
        self._status()
        self._caption_now()

    # -- operator controls --------------------------------------------------------
    def cycle_severity(self) -> str:
        i = SEVERITY_CYCLE.index(self.min_severity) if self.min_severity in SEVERITY_CYCLE else 0
        self.min_severity = SEVERITY_CYCLE[(i + 1) % len(SEVERITY_CYCLE)]
        self.rebuild()
        return self.min_severity

    def cycle_kind(self) -> str | None:
        """Polling hidden (the default), every line, then each kind alone."""
        kinds: list[str | None] = [HIDE_POLLING, None, *self.model.log_kinds()]
        i = kinds.index(self.kind) if self.kind in kinds else 0
        self.kind = kinds[(i + 1) % len(kinds)]
        self.rebuild()
        return self.kind

    def set_search(self, text: str) -> None:
        self.search = text.strip()
        self.rebuild()

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        if not self.paused:
            self.flush()  # what arrived meanwhile waited, bounded, in the model's pending ring
        self._status()
        return self.paused

    def _status(self) -> None:
        width = self.size.width or 80
        waiting = len(self.model.log_pending) + len(self._held)
        text = Text(status_text(width, min_severity=self.min_severity, kind=self.kind, search=self.search,
                                paused=self.paused, waiting=waiting))
        if self.paused:
            text.stylize("bold yellow")
        self.query_one("#log-status", Static).update(text, layout=False)  # one fixed line: no relayout
