"""One sweep as the cockpit holds it (its levels, stragglers, capacity), and a curve's point.

Plain records: the sweep state fills them (:mod:`kimitui.tui.model.sweep_state`), the levels table,
the curve, the spread and the straggler list read them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.energy import LevelEnergy, WindowPower
from kimitui.analysis.knee import Knee, knee_of_levels
from kimitui.analysis.causes.tail import LevelLoss
from kimitui.capacity.answer import CapacityAnswer
from kimitui.capacity.answer import CurvePoint as CapacityPoint
from kimitui.events import LevelResult, RequestResult, Straggler, SweepProgress, SweepResult, SweepSpec
from kimitui.tui.model.packing import KeptResult
from kimitui.tui.model.spec_watch import SpecWatch


@dataclass
class SweepView:
    sweep_id: str
    profile: str | None
    spec: SweepSpec
    started_t: float
    concurrency: int | None = None
    progress: SweepProgress | None = None
    levels: list[LevelResult] = field(default_factory=list)
    results: deque[RequestResult] = field(default_factory=lambda: deque(maxlen=4096))
    """Finished requests of the current level, their figures only (``strip_chunks``)."""
    chunks: dict[str, KeptResult] = field(default_factory=dict)
    """The current level's results with their chunk offsets packed, until its LevelResult names the stragglers."""
    stragglers: list[Straggler] = field(default_factory=list)
    straggler_results: dict[str, KeptResult] = field(default_factory=dict)
    """Request id -> the straggler's result with its chunk offsets (at most ``STRAGGLER_RESULTS``)."""
    outcome: SweepResult | None = None
    spec_watch: SpecWatch = field(default_factory=SpecWatch)
    """The running level's accept length against the reference level (the live collapse notice)."""
    level_starts: dict[int, float] = field(default_factory=dict)
    """C -> when its (last) level started: the window its EPLB rebalances are counted in."""
    attributions: dict[str, Attribution] = field(default_factory=dict)
    """Request id -> why that straggler was slow (:mod:`kimitui.analysis.causes`, via ``CockpitModel.causes``)."""
    losses: dict[tuple[int, int], LevelLoss] = field(default_factory=dict)
    """(C, repeat) -> where the finished level's throughput went, by cause (the running level has none)."""
    capacity_points: dict[int, CapacityPoint] = field(default_factory=dict)
    """C -> the SLO judged on that level's requests (its last repeat): :attr:`capacity` reads them."""
    capacity: CapacityAnswer | None = None
    """The highest finished level at which the cockpit's SLO holds (``[capacity] slo``)."""
    energy: dict[tuple[int, int], LevelEnergy] = field(default_factory=dict)
    """(C, repeat) -> the finished level's power and energy figures (:mod:`kimitui.tui.model.sweep_energy`),
    once a GPU sample past its window arrived; a level with no figures says why (``reason``)."""
    idle: WindowPower | None = None
    """All GPUs' idle power before the sweep (measured once; None: not measured yet)."""

    @property
    def knee(self) -> Knee:
        """Where this sweep's throughput curve bends, from its finished levels (:mod:`kimitui.analysis.knee`)."""
        return knee_of_levels(self.levels)

    def straggler_result(self, request_id: str) -> RequestResult | None:
        """A straggler's full request result (chunk offsets to 0.1 ms), if this sweep kept it."""
        kept = self.straggler_results.get(request_id)
        return kept.result() if kept is not None else None

    @property
    def live_point(self) -> tuple[int, float] | None:
        """(C, tok/s so far) for the running level: the point that moves."""
        p = self.progress
        if self.outcome is not None or p is None or p.level_elapsed_s <= 0:
            return None
        return p.concurrency, p.level_tokens / p.level_elapsed_s


@dataclass
class CurvePoint:
    concurrency: int
    agg_tok_s: float | None
    steady_tok_s: float | None
    status: str = "ok"
    """Only an ``ok`` level is a point of the curve; the others are drawn as a mark on the axis."""
    reason: str = ""
