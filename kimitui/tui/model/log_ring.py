"""The cockpit's log ring: one entry per line as an operator reads it.

A TP8 server prints its start-up, EPLB and warning lines once per rank.  The ring folds each rank's
copy into the entry already held (:class:`~kimitui.analysis.log_lines.RankMerger`), whose text then
names the rank set (``TP0–7 EP0–7``): eight times fewer entries, so the same 5,000 cover eight times
as long, and a search or a rebuild after a seek reads merged lines too.  A CUDA-graph capture's tqdm
bar (52 redraws, no timestamp) is one entry, ``Capturing batches 37/52 (bs=64)``, updated in place, and so is the
weights' ``Loading safetensors checkpoint shards: 38% Completed | 24/64`` bar.  kimitui's own polling
(``GET /metrics``...) is marked once here, so a filter hides it without parsing every line again.

Pure: no Textual; the log panel reads ``entries`` and drains ``pending``.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from kimitui.analysis.log_lines import MERGE_LOOKBACK, MergedLine, RankMerger, is_own_polling
from kimitui.sglang.log import capture_progress, kind_is, shards_bar

POLLING = "polling"
"""The filter's name for kimitui's own polling (``-polling`` hides it, as ``-access`` hides a kind)."""
HIDE_POLLING = "-" + POLLING


@dataclass
class LogEntry:
    """A line for the log panel: a server log line or a cockpit event told as one."""

    t: float
    severity: str
    kind: str
    text: str
    """As shown: once a second rank's copy joined, with the rank set in place of the rank tag."""
    polling: bool = False
    """kimitui's own GET of ``/metrics``, ``/health``...: hidden unless the operator asks for every line."""
    ranked: bool = False
    """The line carries a rank tag: other ranks' copies may still join it."""
    copies: int = 1
    node: str | None = None
    """Which process of a deployment printed it (``decode-0``, ``node-1@gpu-b``); None: a lone server, or kimitui."""


_RANK_TAG = re.compile(r"^\[[^\]]*\]\s*")
"""A rank tag before a message (``[TP0 EP0] ``): copies of one bar from every rank are one bar."""


class LogRing:
    """The last ``size`` entries, and those the panel has not drawn yet (``pending``, as bounded)."""

    def __init__(self, size: int) -> None:
        self.entries: deque[LogEntry] = deque(maxlen=size)
        self.pending: deque[LogEntry] = deque(maxlen=size)
        self.widest = 1
        """The most copies any line came in: how many ranks print a line that every rank prints."""
        self._widest_from: LogEntry | None = None
        """The entry that set ``widest``: while it is the only witness, it may still grow past it."""
        self._merger = RankMerger()
        self._recent: deque[tuple[MergedLine, LogEntry]] = deque(maxlen=MERGE_LOOKBACK)
        self._bar: LogEntry | None = None
        """The entry of the progress bar (a CUDA-graph capture, the weights' shards) now being redrawn: the
        next redraw updates it, if it is still the last."""
        self._bar_key = ""
        """Which bar ``_bar`` shows (``Capturing batches ``, ``Loading safetensors checkpoint``)."""

    def add(self, t: float, severity: str, kind: str, text: str, node: str | None = None) -> LogEntry:
        """Hold a line; a rank's copy of a recent line updates that entry (returned) instead.

        ``node``: which process of a deployment printed it (``decode-0``, ``node-1@gpu-b``): shown before
        the line, and only copies from the same process are merged."""
        startup = kind_is(kind, "startup")
        capture = capture_progress(text) if startup and "Capturing " in text else None
        if capture is not None:
            return self._bar_redraw(t, severity, kind, f"Capturing {capture.what} ", capture.folded(), node)
        line = self._merger.add(t, severity, f"{kind}\0{node}" if node else kind, text)
        if line is None:
            joined = self._merger.last_joined
            for merged, entry in reversed(self._recent):
                if merged is joined:
                    entry.text, entry.copies = merged.shown, merged.copies
                    if merged.copies > self.widest:
                        self.widest, self._widest_from = merged.copies, entry
                    return entry
            line = MergedLine(t, severity, kind, text)  # joined a line the ring no longer tracks: keep it
        shards = shards_bar(_RANK_TAG.sub("", text, count=1)) if startup and "shards:" in text else None
        if shards is not None:  # "Loading safetensors checkpoint shards: 38% Completed | 24/64", 16 redraws
            held = self._bar
            if (held is not None and self.entries and self.entries[-1] is held and held.node == node
                    and self._bar_key == shards):  # this bar's next redraw: its entry shows it (ranks merged)
                held.t, held.text = t, line.shown
                self._recent.append((line, held))
                return held
        entry = LogEntry(t, severity, kind, text, polling=is_own_polling(kind, text), ranked=bool(line.ranks),
                         node=node)
        self._recent.append((line, entry))
        self.entries.append(entry)
        self.pending.append(entry)
        if shards is not None:
            self._bar, self._bar_key = entry, shards
        return entry

    def _bar_redraw(self, t: float, severity: str, kind: str, bar: str, shown: str, node: str | None) -> LogEntry:
        """A progress bar's redraw (``bar``: which bar, the text its lines start with): the bar's entry
        updated when it is the last line, else a new entry."""
        held = self._bar
        if (held is not None and self.entries and self.entries[-1] is held and held.node == node
                and self._bar_key == bar):  # this bar's last redraw, not the next bar
            held.t, held.text = t, shown
            return held
        entry = LogEntry(t, severity, kind, shown, node=node)
        self._bar, self._bar_key = entry, bar
        self.entries.append(entry)
        self.pending.append(entry)
        return entry

    def may_grow(self, entry: LogEntry) -> bool:
        """Whether more ranks' copies may still join: a rank-tagged line with fewer copies than an earlier
        line came in (the first line of all ranks is its own measure, so it may always grow)."""
        return entry.ranked and (entry.copies < self.widest or entry.copies == 1 or entry is self._widest_from)
