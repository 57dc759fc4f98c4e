"""Measuring one point of a capacity search: a one-level sweep through the load process, or a level
already in a recording of the same workload.

A live probe is the same sweep ``kimitui sweep`` runs, with one level: its events go through the
session (so ``--out`` records them, with a ``Marker`` naming the probe) and its requests are
collected by a sink to judge the SLO on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kimitui.capacity.answer import Probe
from kimitui.capacity.slo import Slo
from kimitui.events import Event, LevelResult, Marker, RequestResult, SweepSpec
from kimitui.loadgen.runner import SweepRunner
from kimitui.report.sweep_summary import summarize
from kimitui.report.verdict import WORKLOAD_FIELDS
from kimitui.session import Session

RATE_CAP = 1024
"""In-flight requests a rate probe allows (arrivals beyond it wait, and that shows as dispatch delay)."""
RATE_SECONDS = 10.0
"""A rate probe's default request count covers about this many seconds of arrivals."""


class ProbeAborted(Exception):
    """The operator stopped the search while a probe ran."""


def probe_spec(spec: SweepSpec, x: float, *, rate: bool) -> SweepSpec:
    """The one-level sweep that measures x: C=x (max(2C, 16) requests unless the workload says how many),
    or arrivals at x req/s (max(16, 10 s of arrivals))."""
    sized = spec.requests_per_level is not None or spec.duration_s is not None
    update: dict[str, Any] = {"repeats": 1}
    if rate:
        update.update(mode="rate", rate_rps=x, levels=[RATE_CAP])
        if not sized:
            update["requests_per_level"] = max(16, math.ceil(RATE_SECONDS * x))
    else:
        update["levels"] = [int(x)]
        if not sized:
            update["requests_per_level"] = max(2 * int(x), 16)
    return spec.model_copy(update=update)


def probe_label(x: float, rate: bool) -> str:
    return f"capacity probe {x:g} req/s" if rate else f"capacity probe C={int(x)}"


class LiveProbe:
    """``measure(x)`` against a live server: one level, its events published into ``session``."""

    def __init__(self, session: Session, spec: SweepSpec, slo: Slo, *, rate: bool = False,
                 profile: str | None = None) -> None:
        self.session = session
        self.spec = spec
        self.slo = slo
        self.rate = rate
        self.profile = profile
        self.aborted = False
        self._runner: SweepRunner | None = None

    async def __call__(self, x: float) -> Probe:
        if self.aborted:
            raise ProbeAborted()
        spec = probe_spec(self.spec, x, rate=self.rate)
        self.session.publish(Marker(host=self.session.host, label=probe_label(x, self.rate)))
        runner = SweepRunner(self.session, spec, profile=self.profile)
        got: list[RequestResult] = []

        def collect(ev: Event) -> None:
            if isinstance(ev, RequestResult) and ev.sweep_id == runner.sweep_id and not ev.warmup:
                got.append(ev)

        remove = self.session.add_sink(collect)
        self._runner = runner
        try:
            await runner.start()
            result = await runner.wait()
        finally:
            remove()
            self._runner = None
        if result.outcome == "aborted" or self.stopped():
            raise ProbeAborted()
        level = runner.levels[-1] if runner.levels else LevelResult(
            host=self.session.host, sweep_id=runner.sweep_id, concurrency=spec.levels[0], status="failed",
            status_reason=result.reason or f"the sweep {result.outcome} without a level")
        return Probe(x, (level,), got, self.slo.check(got, [level]))

    def stopped(self) -> bool:
        """Whether :meth:`abort` was called (also while the runner had not started yet)."""
        return self.aborted

    async def abort(self) -> None:
        """Stop the probe in flight (its finished requests are recorded) and every later one."""
        self.aborted = True
        runner = self._runner
        if runner is not None and runner.running:
            await runner.abort()


def workload_matches(recorded: SweepSpec, wanted: SweepSpec, *, rate: bool) -> bool:
    """Whether a recorded sweep measured the same thing per level (:data:`WORKLOAD_FIELDS`); on the rate
    axis the rate is the point, not the workload."""
    fields = [f for f in WORKLOAD_FIELDS if not (rate and f == "rate_rps")]
    return all(getattr(recorded, f) == getattr(wanted, f) for f in fields)


def recorded_probes(paths: Sequence[str], spec: SweepSpec, slo: Slo, *, rate: bool) -> dict[float, Probe]:
    """Levels of matching sweeps in the recordings, as probes by x (repeats and same-x levels pooled)."""
    wanted = probe_spec(spec, 1.0, rate=rate)
    pooled: dict[float, tuple[list[LevelResult], list[RequestResult], set[str]]] = {}
    for path in paths:
        summary = summarize(path)
        for run in summary.sweeps:
            if not workload_matches(run.spec, wanted, rate=rate):
                continue
            for c, row in run.levels.items():
                x = float(run.spec.rate_rps or 0.0) if rate else float(c)
                if x <= 0:
                    continue
                levels, requests, sources = pooled.setdefault(x, ([], [], set()))
                levels.extend(row.repeats)
                requests.extend(row.requests)
                sources.add(f"{summary.source}#{run.sweep_id}")
    return {x: Probe(x, tuple(lvs), reqs, slo.check(reqs, lvs), ", ".join(sorted(src)))
            for x, (lvs, reqs, src) in pooled.items()}


class ReusingProbe:
    """``measure(x)`` that takes x from a recording the first time it is asked, and measures it otherwise
    (a grey-zone re-measure then adds a live level to the recorded one)."""

    def __init__(self, live: LiveProbe, recorded: dict[float, Probe]) -> None:
        self.live = live
        self.recorded = dict(recorded)

    async def __call__(self, x: float) -> Probe:
        probe = self.recorded.pop(x, None)
        return probe if probe is not None else await self.live(x)
