"""What this load client can drive: its CPU per streamed chunk against the chunk rate a plan asks for.

Why: a level whose chunks arrive faster than the load process can stamp them measures the client,
not the server (its latencies are stamped late, its tok/s is the client's ceiling).  That is known
before the sweep starts: the client's CPU per chunk (measured: :mod:`kimitui.loadgen.drive_calibrate`,
or a finished level's :class:`~kimitui.events.ClientSummary`) against the chunks per second each
planned level should bring, from the expected aggregate tok/s at its concurrency
(:class:`kimitui.analysis.sweep_eta.RateModel`, the seeds' curve unless a sweep measured one) times
the simulator's time scale (one token per chunk: the worst case; a speculative server sends fewer).

Pure: no clock, no I/O.  :func:`check_drive` is the whole rule; :meth:`DriveCheck.line` says it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kimitui.analysis.sweep_eta import RateModel
from kimitui.events import LevelResult

DRIVE_CORE_SHARE = 0.5
"""The share of one core the load process may spend on chunks.  Measured on the 2-core dev machine
against the simulator (which shares the cores): at ~35 us/chunk the client's busiest second reached
26 % of a core at 7.5k chunks/s and 50 % at 14.6k, and the levels past ~half a core showed event-loop
lags of 50-120 ms; bursts (a decode step delivers C chunks at once) need the other half."""
MIN_RATE_FOR_COST = 500.0
"""Chunks/s a finished level must have carried for its CPU to say something per chunk (below it the
load process's fixed ticks dominate)."""


@dataclass(frozen=True)
class ChunkCost:
    """CPU seconds the load process spends per streamed chunk, and where that figure comes from."""

    cpu_s: float
    basis: str
    """``calibrated``, ``measured at C=256``: said in the line."""

    def drives(self, core_share: float = DRIVE_CORE_SHARE) -> float:
        """Chunks per second within ``core_share`` of one core."""
        return core_share / self.cpu_s if self.cpu_s > 0 else math.inf


@dataclass(frozen=True)
class LevelDrive:
    concurrency: int
    chunks_s: float
    """Chunks per second the level should bring."""
    over: bool


@dataclass(frozen=True)
class DriveCheck:
    """A plan against what the client drives: which levels exceed it, and what would not."""

    cost: ChunkCost
    levels: tuple[LevelDrive, ...]
    time_scale: float | None
    """The simulator's time scale; None: a real host (nothing to slow down)."""
    max_chunks_s: float
    max_time_scale: float | None
    """The highest time scale at which every level is within reach (None: a real host, or none would be)."""
    max_concurrency: int
    """The highest concurrency within reach at this time scale (0: not even C=1)."""
    core_share: float = DRIVE_CORE_SHARE

    @property
    def over(self) -> tuple[int, ...]:
        """The planned levels the client cannot drive."""
        return tuple(lv.concurrency for lv in self.levels if lv.over)

    @property
    def exceeds(self) -> bool:
        return any(lv.over for lv in self.levels)

    def line(self) -> str | None:
        """The one line said before a sweep whose plan exceeds the client; None when it does not."""
        if not self.exceeds:
            return None
        over = self.over
        worst = max(lv.chunks_s for lv in self.levels)
        which = f"C={over[0]}" if len(over) == 1 else "C=" + ", ".join(str(c) for c in over)
        scale = f" at time scale {self.time_scale:g}" if self.time_scale else ""
        head = (f"this client can drive about {_fig(self.max_chunks_s)} chunks/s ({self.cost.cpu_s * 1e6:.0f} us of "
                f"CPU per chunk, {self.cost.basis}; {self.core_share:.0%} of a core), and {which}{scale} "
                f"expect{'s' if len(over) == 1 else ''} up to {_fig(worst)} chunks/s: "
                f"{'its' if len(over) == 1 else 'their'} figures would measure the client, not the server")
        offers = []
        if self.max_time_scale is not None and self.time_scale:
            offers.append(f"time scale {_scale(self.max_time_scale)} or lower drives the whole plan")
        if self.max_concurrency >= 1:
            offers.append(f"levels up to C={self.max_concurrency} are within reach{scale}")
        return head + ("; " + ", or ".join(offers) if offers else "")

    def to_json(self) -> dict[str, object]:
        return {"cpu_us_per_chunk": round(self.cost.cpu_s * 1e6, 2), "basis": self.cost.basis,
                "max_chunks_s": round(self.max_chunks_s), "time_scale": self.time_scale,
                "over": list(self.over), "max_time_scale": self.max_time_scale,
                "max_concurrency": self.max_concurrency,
                "levels": {str(lv.concurrency): round(lv.chunks_s) for lv in self.levels}}


def _fig(v: float) -> str:
    return f"{v:,.0f}"


def _scale(v: float) -> str:
    """A time scale offered: rounded down, so the offer is within reach."""
    return f"{math.floor(v):g}" if v >= 1 else f"{math.floor(v * 10) / 10:g}"


def check_drive(levels: Sequence[int], cost: ChunkCost, *, time_scale: float | None = None,
                rates: RateModel | None = None, rate_rps: float | None = None,
                tokens_per_request: float | None = None, core_share: float = DRIVE_CORE_SHARE) -> DriveCheck:
    """Each planned level's chunk rate against what ``cost`` drives in ``core_share`` of a core.

    ``rates``: real-time aggregate tok/s by concurrency (default the seeds' EP8 curve); ``time_scale``:
    the simulator's (None on a real host); ``rate_rps`` x ``tokens_per_request``: a rate-mode plan's
    arrivals, which bound its chunk rate whatever the concurrency cap.
    """
    model = rates or RateModel.seeds(1.0)
    scale = time_scale if time_scale and time_scale > 0 else 1.0
    budget = cost.drives(core_share)
    arrivals = rate_rps * tokens_per_request if rate_rps and tokens_per_request else math.inf
    rows = []
    for c in sorted(set(levels)):
        chunks = min(model.agg(c) * scale, arrivals)
        rows.append(LevelDrive(c, chunks, chunks > budget))
    return DriveCheck(cost, tuple(rows), time_scale if time_scale and time_scale > 0 else None, budget,
                      _max_time_scale(levels, model, budget, arrivals) if time_scale else None,
                      _max_concurrency(max(levels, default=1), model, scale, budget, arrivals), core_share)


def _max_time_scale(levels: Sequence[int], model: RateModel, budget: float, arrivals: float) -> float | None:
    """The highest time scale at which every level fits (arrivals within budget fit at any); None: no bound."""
    bounds = [budget / model.agg(c) for c in levels if arrivals > budget]
    return min(bounds) if bounds else None


def _max_concurrency(top: int, model: RateModel, scale: float, budget: float, arrivals: float) -> int:
    """The highest C <= top whose chunk rate is within budget (the curve rises with C)."""
    def fits(c: int) -> bool:
        return min(model.agg(c) * scale, arrivals) <= budget

    if not fits(1):
        return 0
    lo, hi = 1, top
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def cost_from_levels(levels: Sequence[LevelResult]) -> ChunkCost | None:
    """The client's CPU per chunk as finished levels measured it: the level that carried the most chunks
    per second (its busiest second of CPU over its mean chunk rate: on the safe side); None without one."""
    best: tuple[float, LevelResult] | None = None
    for lv in levels:
        if lv.client is None or lv.client.cpu_max_pct is None or lv.wall_s <= 0 or lv.output_tokens <= 0:
            continue
        rate = lv.output_tokens / lv.wall_s
        if rate >= MIN_RATE_FOR_COST and (best is None or rate > best[0]):
            best = (rate, lv)
    if best is None:
        return None
    rate, lv = best
    assert lv.client is not None and lv.client.cpu_max_pct is not None
    return ChunkCost(lv.client.cpu_max_pct / 100.0 / rate, f"measured at C={lv.concurrency}")


def real_time_rates(levels: Sequence[LevelResult], time_scale: float | None) -> RateModel | None:
    """A measured curve (ok levels' aggregate tok/s) brought back to real time: divided by the time scale
    it was measured at, so the check can scale it to any other."""
    scale = time_scale if time_scale and time_scale > 0 else 1.0
    return RateModel.measured([(lv.concurrency, (lv.agg_tok_s or 0.0) / scale) for lv in levels
                               if lv.status == "ok"], "measured")
