"""What a simulated server holds, declared once for the route mixins that read it.

:class:`kimitui.sim.server.SimServer` sets every attribute in its ``__init__``;
the HTTP mixins (:mod:`kimitui.sim.http_info`, :mod:`kimitui.sim.http_gen`)
inherit these declarations so they are checked against real types.
"""

from __future__ import annotations

from kimitui.sim.faults import FaultPlan
from kimitui.sim.logfmt import SimLog
from kimitui.sim.pd import PdRole
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.prometheus import SimMetrics
from kimitui.sim.scheduler import Scheduler, SimClock
from kimitui.sim.settings import ServerSettings


class SimServerState:
    """The server's state, as the route handlers see it."""

    s: ServerSettings
    model: PerfModel
    clock: SimClock
    log: SimLog
    faults: FaultPlan
    sched: Scheduler | None
    """``None`` until start-up has built the scheduler."""
    metrics: SimMetrics | None
    """``None`` unless the profile enables metrics."""
    accepting: bool
    """Requests are admitted (from uvicorn's start, before the warm-up)."""
    ready: bool
    """/health answers 200 (after the warm-up)."""
    port: int
    pd: PdRole | None
    """A PD server's prefill or decode side; ``None`` unless ``--disaggregation-mode`` is set."""
