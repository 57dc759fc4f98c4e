"""A span of time during which one cause was active, with what showed it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Episode:
    """``cause`` was active over ``[start, end]`` (client clock); ``evidence`` says what showed it.

    ``key`` tells episodes apart for counting ("3 EPLB rebalances"); ``request_hint`` is set where the
    cause hits only some requests (a KV retraction picks the latest admitted), so overlap alone is
    weaker evidence; ``figures`` keeps the numbers a headline quotes (``duration_s``, ``gpus``...).
    """

    cause: str
    start: float
    end: float
    evidence: str
    key: str = ""
    open: bool = False
    """Still going when last seen (a rebalance whose end has not arrived)."""
    figures: dict[str, float | str] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end - self.start)

    def overlap(self, a: float, b: float) -> float:
        return max(0.0, min(self.end, b) - max(self.start, a))


class EpisodeRun:
    """Builds episodes of one cause from consecutive observations: extends the open one while the
    cause holds and observations come at most ``join_s`` apart, starts a new one otherwise."""

    def __init__(self, cause: str, join_s: float, keep: list[Episode]) -> None:
        self.cause = cause
        self.join_s = join_s
        self.keep = keep
        self.current: Episode | None = None

    def observe(self, start: float, end: float, evidence: str, **figures: float | str) -> Episode:
        cur = self.current
        if cur is not None and start - cur.end <= self.join_s:
            cur.end = max(cur.end, end)
            cur.evidence = evidence if len(evidence) > len(cur.evidence) else cur.evidence
            for k, v in figures.items():
                old = cur.figures.get(k)
                if isinstance(v, float) and isinstance(old, float):
                    cur.figures[k] = max(old, v) if k.endswith("_max") else min(old, v) if k.endswith("_min") else v
                else:
                    cur.figures[k] = v
            return cur
        ep = Episode(self.cause, start, end, evidence, key=f"{self.cause}@{start:.3f}", figures=dict(figures))
        self.keep.append(ep)
        self.current = ep
        return ep

    def idle(self) -> None:
        """The cause did not hold in the latest observation: the next one starts a new episode."""
        self.current = None
