"""The log panel's state, and the toasts: what the fold tells the operator in words.

Every panel state writes here (a swap's outcome, a failed request, a lost link), so the log and
the toasts have one writer; the log panel reads ``logs``/``pending`` and filters with ``filtered``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from kimitui.events import Event, LogLine
from kimitui.tui.model.fold import LOG, FoldTable, Notice, NoticeSeverity, Parts
from kimitui.tui.model.log_ring import POLLING, LogEntry, LogRing

SEVERITY_RANK = {"debug": 0, "info": 1, "warning": 2, "error": 3, "critical": 4}


class LogState:
    """The merged log ring (``logs``, ``pending``) and the toasts not shown yet (``notices``)."""

    def __init__(self, lines: int) -> None:
        self.ring = LogRing(lines)
        """Each rank's copy of a line merged into one entry; ``logs`` and ``pending`` are its deques."""
        self.logs: deque[LogEntry] = self.ring.entries
        self.pending: deque[LogEntry] = self.ring.pending
        self.notices: list[Notice] = []
        """Toasts not shown yet: the app takes them every pump (``take_notices``)."""

    def fold(self, ev: Event) -> Parts:
        return _FOLD.fold(self, ev)

    def say(self, t: float, severity: str, kind: str, text: str) -> None:
        """A line of kimitui's own in the log."""
        self.ring.add(t, severity, kind, text)

    def notify(self, severity: NoticeSeverity, message: str) -> None:
        self.notices.append(Notice(severity, message))

    def take_notices(self) -> list[Notice]:
        out, self.notices = self.notices, []
        return out

    def _on_log_line(self, ev: LogLine) -> Parts:
        self.ring.add(ev.t, ev.severity, ev.line_kind, ev.raw, ev.node)  # node: which process of a deployment
        return LOG

    def filtered(self, min_severity: str = "debug", kind: str | None = None,
                 search: str = "", entries: Iterable[LogEntry] | None = None) -> list[LogEntry]:
        """Log entries at or above a severity, of one kind (``-kind``: all but it; ``-polling``: all but
        kimitui's own polling), containing a text."""
        floor = SEVERITY_RANK.get(min_severity, 0)
        needle = search.lower()
        hide = kind[1:] if kind and kind.startswith("-") else None
        only = kind if kind and not hide else None
        return [e for e in (self.logs if entries is None else entries)
                if SEVERITY_RANK.get(e.severity, 1) >= floor
                and (only is None or e.kind == only)
                and (hide is None or (not e.polling if hide == POLLING else e.kind != hide))
                and (not needle or needle in e.text.lower())]

    def kinds(self) -> list[str]:
        return sorted({e.kind for e in self.logs})


_FOLD = FoldTable[LogState]().on(LogLine, LogState._on_log_line)
