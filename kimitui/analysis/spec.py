"""Speculative decoding over a sweep: accept length per level, its collapse, the speed-up.

Pure functions over :class:`~kimitui.events.LevelResult` (no Textual, no I/O): the
cockpit's level table, the compare view and ``kimitui report`` all read them, so the
screen and the report say the same.

**Accept length** counts the bonus token, as SGLang does (completion tokens / verify
passes): 1.0 means no draft was ever accepted, so the *gain* a level gets from its
drafter is ``accept_len - 1`` tokens per verify pass.

**Collapse rule.**  Operators report that a drafter's speed-up at C=1 shrinks or
vanishes at high concurrency: the target's batch grows, verify passes get costlier and
acceptance falls.  A level's acceptance has *collapsed* when its gain is below
:data:`COLLAPSE_GAIN_RATIO` (half) of the gain the reference level saw, the reference being
the sweep's lowest-concurrency valid level with speculative figures (C=1 in the seeds'
sweeps).  Half the gain is where a drafter stops paying for itself on these hosts: the
verify pass of ``k`` draft tokens costs about ``1 + 0.12 k`` plain decode steps (the
simulator's model of a block verify), so with half the C=1 gain a DFlash block of 16 nets
at most what an EAGLE chain of 3 did.  A reference gain under :data:`MIN_REF_GAIN` (0.2
tokens per pass) is no speculation worth watching: no notice then.  The same rule runs
live on the scheduler's own ``accept len`` (the Decode log line, every 40 iterations), so
the notice comes while the level runs, before its throughput point lands on the curve.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kimitui.events import LevelResult

COLLAPSE_GAIN_RATIO = 0.5
"""A level's gain (accept length - 1) below this share of the reference level's is a collapse."""
MIN_REF_GAIN = 0.2
"""A reference gain below this (tokens per verify pass beyond the bonus) is not worth a notice."""


def level_accept_len(level: LevelResult) -> float | None:
    """The level's accept length: token-weighted (SGLang's own), else the per-request mean."""
    if level.spec_accept_len_level is not None:
        return level.spec_accept_len_level
    return level.spec_accept_len.mean


@dataclass(frozen=True)
class SpecReference:
    """The level acceptance is judged against (lowest C with figures)."""

    concurrency: int
    accept_len: float

    @property
    def gain(self) -> float:
        return self.accept_len - 1.0


def reference(levels: Iterable[LevelResult]) -> SpecReference | None:
    """The lowest-concurrency valid level that has speculative figures, or None."""
    best: SpecReference | None = None
    for level in levels:
        acc = level_accept_len(level)
        if not level.valid or acc is None:
            continue
        if best is None or level.concurrency < best.concurrency:
            best = SpecReference(level.concurrency, acc)
    return best


@dataclass(frozen=True)
class Collapse:
    """A level whose acceptance collapsed against the reference, in words."""

    concurrency: int
    accept_len: float
    ref: SpecReference

    @property
    def kept(self) -> float:
        """Share of the reference gain the level kept (0..1, may be negative when below 1.0)."""
        return (self.accept_len - 1.0) / self.ref.gain

    @property
    def message(self) -> str:
        return (f"speculation collapsed at C={self.concurrency}: accept length {self.accept_len:.2f} "
                f"vs {self.ref.accept_len:.2f} at C={self.ref.concurrency} "
                f"({max(0.0, self.kept):.0%} of its gain kept)")


def collapse_of(accept_len: float | None, concurrency: int, ref: SpecReference | None) -> Collapse | None:
    """The collapse rule for one figure (a finished level's, or the live log's)."""
    if accept_len is None or ref is None or concurrency <= ref.concurrency or ref.gain < MIN_REF_GAIN:
        return None
    if accept_len - 1.0 < COLLAPSE_GAIN_RATIO * ref.gain:
        return Collapse(concurrency, accept_len, ref)
    return None


def collapses(levels: Sequence[LevelResult]) -> list[Collapse]:
    """Every valid level whose acceptance collapsed, in concurrency order."""
    ref = reference(levels)
    out = [c for lv in levels if lv.valid
           if (c := collapse_of(level_accept_len(lv), lv.concurrency, ref)) is not None]
    return sorted(out, key=lambda c: c.concurrency)


@dataclass(frozen=True)
class SpeedUp:
    """One level against the baseline's level at the same concurrency."""

    concurrency: int
    decode: float | None
    """Per-request decode tok/s p50, this / baseline: what one user feels."""
    aggregate: float | None
    """Seed-comparable aggregate tok/s, this / baseline: what the host delivers."""


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def speedups(levels: Sequence[LevelResult], baseline: Sequence[LevelResult]) -> dict[int, SpeedUp]:
    """concurrency -> speed-up, for each C both sweeps measured validly (the last repeat of each wins)."""
    base = {lv.concurrency: lv for lv in baseline if lv.valid}
    out: dict[int, SpeedUp] = {}
    for lv in levels:
        b = base.get(lv.concurrency)
        if not lv.valid or b is None:
            continue
        out[lv.concurrency] = SpeedUp(lv.concurrency, _ratio(lv.decode_tok_s.p50, b.decode_tok_s.p50),
                                      _ratio(lv.agg_tok_s, b.agg_tok_s))
    return out


def format_speedup(ratio: float | None) -> str:
    """``×1.84`` (or ``–`` when unknown): how the table, compare view and report print a ratio."""
    return "–" if ratio is None else f"×{ratio:.2f}"
