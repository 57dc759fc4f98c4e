"""The stragglers' state: what explains a slow request, kept while its sweep runs.

The straggler list and its detail read each straggler's chunk times (kept packed in its sweep),
the window of GPU samples and log lines around it (``history``) and its cause (``causes``, which
attributes every finished level from the evidence every event brings).
"""

from __future__ import annotations

from kimitui.events import Event, LevelResult, RequestResult
from kimitui.tui.model.cause_book import CauseBook
from kimitui.tui.model.compact_history import CompactHistory
from kimitui.tui.model.fold import CAUSE_PARTS, NOTHING, Parts
from kimitui.tui.model.sweep_view import SweepView

STRAGGLER_RESULTS = 256
"""Stragglers per sweep whose request result (with its chunk offsets) the cockpit keeps."""


class StragglerState:
    """The straggler window's memory and the cause book; the sweep state calls it as levels start and end."""

    def __init__(self) -> None:
        self.history = CompactHistory()
        self.causes = CauseBook()
        """Every event's evidence of a cause; it attributes each finished level into its SweepView."""

    def see(self, ev: Event) -> None:
        """Every event: a GPU sample or log line for the window, any evidence of a cause."""
        self.history.add(ev)
        self.causes.add(ev)

    def refresh(self, now: float | None) -> Parts:
        """Throttled: a look per second of event time while a level settles."""
        return CAUSE_PARTS if self.causes.refresh(now) else NOTHING

    def sweep_started(self, sw: SweepView) -> None:
        self.history.keep_since = sw.started_t  # its stragglers' windows stay however long it runs
        sw.losses = self.causes.sweep_started(sw.sweep_id)

    def level_done(self, sw: SweepView, ev: LevelResult) -> None:
        """The level's stragglers keep their chunk times; the cause book attributes them (before the chunks go)."""
        sw.stragglers.extend(ev.stragglers)
        for s in ev.stragglers:
            kept = sw.chunks.get(s.request_id)
            if kept is not None and len(sw.straggler_results) < STRAGGLER_RESULTS:
                sw.straggler_results[s.request_id] = kept
        self.causes.level_done(ev, _level_results(sw, ev), sw.attributions, sw.losses)


def _level_results(sw: SweepView, ev: LevelResult) -> list[RequestResult]:
    """The level's measured requests as its attribution needs them: the stragglers' with their chunk times
    (none for a level that is not the running one: its stragglers are attributed from their gaps)."""
    if sw.concurrency not in (None, ev.concurrency):
        return []
    ids = {s.request_id for s in ev.stragglers}
    return [kept.result() if r.request_id in ids and (kept := sw.chunks.get(r.request_id)) is not None else r
            for r in sw.results if r.concurrency == ev.concurrency]
