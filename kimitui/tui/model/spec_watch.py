"""The running level's speculative acceptance, watched live against the sweep's reference level.

SGLang's Decode line says the scheduler's accept length every 40 iterations (``ServerStats`` from the
log, ``extra["accept_len"]``).  While a level runs, :class:`SpecWatch` averages those figures and
applies :func:`kimitui.analysis.spec.collapse_of` against the sweep's reference (its lowest C with
speculative figures, C=1 in the seeds' sweeps): a collapse is said while the level still runs,
before its throughput point reaches the curve.  The first :data:`SETTLE` lines of a level are left
out (the batch is still filling up to C), and each level is said once.  No Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kimitui.analysis.spec import Collapse, collapse_of, reference
from kimitui.events import LevelResult

SETTLE = 2
"""Decode lines of a level not judged: the running batch is still growing to C."""
MIN_SAMPLES = 3


@dataclass
class SpecWatch:
    """The running level's accept-length samples, and the levels already said to have collapsed."""

    concurrency: int | None = None
    samples: list[float] = field(default_factory=list)
    seen: int = 0
    said: set[int] = field(default_factory=set)

    def level_started(self, concurrency: int) -> None:
        self.concurrency, self.samples, self.seen = concurrency, [], 0

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None

    def sample(self, accept_len: float, levels: list[LevelResult]) -> Collapse | None:
        """One Decode line's accept length; the collapse to say now, if this made one."""
        if self.concurrency is None:
            return None
        self.seen += 1
        if self.seen <= SETTLE:
            return None
        self.samples.append(accept_len)
        if len(self.samples) < MIN_SAMPLES or self.concurrency in self.said:
            return None
        found = collapse_of(self.mean, self.concurrency, reference(levels))
        if found is not None:
            self.said.add(found.concurrency)
        return found

    def finished(self, levels: list[LevelResult], level: LevelResult) -> Collapse | None:
        """A level's result: its collapse, unless already said while it ran."""
        from kimitui.analysis.spec import level_accept_len

        if level.concurrency in self.said:
            return None
        found = collapse_of(level_accept_len(level), level.concurrency, reference(levels))
        if found is not None:
            self.said.add(found.concurrency)
        return found
