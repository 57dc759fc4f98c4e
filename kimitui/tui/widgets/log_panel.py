"""The server log: a Textual ``Log`` written in batches, with filter, pause and search.

Lines are kept as plain strings (``Log`` renders only what is visible); the
severity letter in a fixed column lets a highlighter colour errors and warnings
without per-line renderables.
"""

from __future__ import annotations

import re
from typing import Unpack

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log, Static

from kimitui.tui.cockpit_state import CockpitModel, LogEntry
from kimitui.tui.render import clock
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions

SEVERITY_LETTER = {"debug": "D", "info": "I", "warning": "W", "error": "E", "critical": "C"}
SEVERITY_CYCLE = ("debug", "warning", "error")
MAX_LINES = 5_000
HIDE_ACCESS = "-access"


def format_entry(e: LogEntry) -> str:
    return f"{clock(e.t)} {SEVERITY_LETTER.get(e.severity, '?')} {e.kind[:8]:<8} {e.text}"


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


class LogPanel(Vertical, ModelView):
    DEFAULT_CSS = """
    LogPanel { height: 1fr; }
    LogPanel > #log-status { height: 1; color: $text-muted; }
    LogPanel > Log { height: 1fr; }
    """
    shows = frozenset({"log"})

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.min_severity = "debug"
        self.kind: str | None = HIDE_ACCESS
        """A kind to show alone, ``-kind`` to hide one, None for all; the pollers' access lines start hidden."""
        self.search = ""
        self.paused = False
        self._highlighter = SeverityHighlighter()

    def compose(self) -> ComposeResult:
        yield Static(id="log-status")
        log = Log(highlight=True, max_lines=MAX_LINES, id="log")
        log.highlighter = self._highlighter
        yield log

    def on_mount(self) -> None:
        self._status()

    @property
    def log_widget(self) -> Log:
        return self.query_one(Log)

    def flush(self) -> int:
        """Write the model's pending lines (filtered); returns how many were written."""
        if self.paused:
            self._status()
            return 0
        pending = list(self.model.log_pending)
        self.model.log_pending.clear()
        lines = [format_entry(e) for e in self.model.filtered_logs(
            self.min_severity, self.kind, self.search, pending)]
        if lines:
            log = self.log_widget
            reading = log.has_focus and not log.is_vertical_scroll_end  # the operator scrolled up to read
            log.write_lines(lines, scroll_end=not reading)
        return len(lines)

    def redraw(self) -> None:
        self.flush()

    def rebuild(self) -> None:
        """Rewrite from the model's ring after a filter, search or resume."""
        self.model.log_pending.clear()
        log = self.log_widget
        log.clear()
        self._highlighter.search = self.search
        lines = [format_entry(e) for e in self.model.filtered_logs(self.min_severity, self.kind, self.search)]
        log.write_lines(lines[-MAX_LINES:], scroll_end=True)
        log.refresh()
        self._status()

    # -- operator controls --------------------------------------------------------
    def cycle_severity(self) -> str:
        i = SEVERITY_CYCLE.index(self.min_severity) if self.min_severity in SEVERITY_CYCLE else 0
        self.min_severity = SEVERITY_CYCLE[(i + 1) % len(SEVERITY_CYCLE)]
        self.rebuild()
        return self.min_severity

    def cycle_kind(self) -> str | None:
        kinds: list[str | None] = [HIDE_ACCESS, None, *self.model.log_kinds()]
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
        parts = [f"severity ≥ {self.min_severity}" if self.min_severity != "debug" else "all severities",
                 "all kinds" if self.kind is None else
                 (f"{self.kind[1:]} hidden" if self.kind.startswith("-") else f"only {self.kind}")]
        if self.search:
            parts.append(f"search “{self.search}”")
        if self.paused:
            parts.append(f"PAUSED ({len(self.model.log_pending)} new)")
        text = Text("  ·  ".join(parts) + "   [f severity  t kind  / search  p pause]")
        if self.paused:
            text.stylize("bold yellow")
        self.query_one("#log-status", Static).update(text, layout=False)  # one fixed line: no relayout
