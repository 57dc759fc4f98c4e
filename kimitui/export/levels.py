"""Sweep levels and their stragglers' causes, as the Prometheus exporter keeps them: bounded by sweeps.

A level's series are labelled by host, profile, sweep, C and repeat, so every sweep adds series; only
the last :data:`KEEP_SWEEPS` sweeps of each host are kept (an older sweep's label sets leave the
scrape).  Stragglers are attributed once, when their level's result arrives, against a cause timeline
of that host's events (the cockpit re-attributes while late events settle; a counter cannot take a
straggler back, so the exporter counts the first answer).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from kimitui.analysis.causes.sweep_causes import attribute_level
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import LevelResult, LevelStarted, RequestResult

log = logging.getLogger(__name__)

KEEP_SWEEPS = 8
"""Sweeps per host whose level series stay in the scrape (cardinality stays bounded)."""
KEEP_GPU_MOMENTS = 7_200
"""GPU samples each host's cause timeline keeps: 30 min at the agent's 4 Hz (as the cockpit's)."""
KEEP_RESULTS = 4_096
"""Request results of the running level kept for its attribution (a C=4096 level's worth)."""


@dataclass
class SweepLevels:
    """One sweep's profile and its finished levels, by (C, repeat)."""

    profile: str
    levels: dict[tuple[int, int], LevelResult] = field(default_factory=dict)


@dataclass
class _Running:
    """The level under way on one host and its measured requests so far."""

    sweep_id: str
    concurrency: int
    repeat: int
    results: deque[RequestResult] = field(default_factory=lambda: deque(maxlen=KEEP_RESULTS))


class HostSweeps:
    """One host's recent sweeps, the running level's requests and the cause timeline of its events."""

    def __init__(self) -> None:
        self.sweeps: dict[str, SweepLevels] = {}
        self.timeline = CauseTimeline()
        self.timeline.gpus.moments = deque(maxlen=KEEP_GPU_MOMENTS)
        self._running: _Running | None = None

    def started(self, sweep_id: str, profile: str) -> None:
        """A new sweep: remembered (with its profile); the oldest beyond :data:`KEEP_SWEEPS` forgotten."""
        self.sweeps.setdefault(sweep_id, SweepLevels(profile))
        while len(self.sweeps) > KEEP_SWEEPS:
            del self.sweeps[next(iter(self.sweeps))]

    def level_started(self, ev: LevelStarted) -> None:
        self._running = _Running(ev.sweep_id, ev.concurrency, ev.repeat)

    def result(self, ev: RequestResult) -> None:
        """Keep a measured request of the running level (its chunk times tell a straggler's stretches)."""
        run = self._running
        if run is not None and not ev.warmup and ev.sweep_id == run.sweep_id and ev.concurrency == run.concurrency:
            run.results.append(ev)

    def store(self, ev: LevelResult, profile: str) -> None:
        """Keep a finished level's figures (the scrape reads these: call under the exporter's lock)."""
        if ev.sweep_id not in self.sweeps:  # a level whose SweepStarted this exporter never saw
            self.started(ev.sweep_id, profile)
        self.sweeps[ev.sweep_id].levels[(ev.concurrency, ev.repeat)] = ev

    def causes(self, ev: LevelResult) -> list[str]:
        """The cause of each of the level's stragglers (``unknown`` included); lets the level's requests go.

        Reads only what the event loop's thread touches (the running level, the timeline), so it runs
        outside the exporter's lock: a C=256 level of stalled requests takes a while to attribute."""
        run = self._running
        results: list[RequestResult] = []
        if run is not None and (run.sweep_id, run.concurrency, run.repeat) == (ev.sweep_id, ev.concurrency, ev.repeat):
            results = list(run.results)
            self._running = None  # only the running level's requests are ever kept
        if not ev.stragglers:
            return []
        try:
            attrs, _ = attribute_level(ev, results, self.timeline)
        except Exception:  # a cause that cannot be told must not cost the level's figures
            log.exception("straggler attribution failed for %s C=%d", ev.sweep_id, ev.concurrency)
            return ["unknown"] * len(ev.stragglers)
        return [a.cause for a in attrs]
