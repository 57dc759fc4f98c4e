"""Noise estimates for A/B ratios: repeats when there are some, else a seeded bootstrap over requests.

Every estimate is a standard error of the *log* of a figure, so two sides
combine by root-sum-of-squares and a ratio's interval is
``exp(log(b/a) ± z·sqrt(se_a² + se_b²))`` — symmetric in relative terms,
which is how operators read "−44 % ± 3 %".  Deterministic: the bootstrap's
generator is seeded from the caller's seed and the figure's name.
"""

from __future__ import annotations

import math
import random
import statistics
import zlib
from collections.abc import Callable, Sequence

from kimitui.events import RequestResult

Z95 = 1.96
BOOTSTRAP_RESAMPLES = 300


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def log_se_of_repeats(values: Sequence[float | None]) -> float | None:
    """Standard error of log(mean) from per-repeat values; None with fewer than two usable."""
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if len(vals) < 2:
        return None
    logs = [math.log(v) for v in vals]
    return statistics.stdev(logs) / math.sqrt(len(logs))


def log_se_bootstrap(samples: Sequence[object], stat: Callable[[Sequence[object]], float | None],
                     *, seed: int, key: str, resamples: int = BOOTSTRAP_RESAMPLES) -> float | None:
    """Bootstrap standard error of log(stat(samples)); None with fewer than three samples."""
    if len(samples) < 3:
        return None
    rng = random.Random(seed ^ zlib.crc32(key.encode()))
    logs: list[float] = []
    n = len(samples)
    for _ in range(resamples):
        value = stat(rng.choices(samples, k=n))
        if value is not None and value > 0 and math.isfinite(value):
            logs.append(math.log(value))
    if len(logs) < resamples // 2:
        return None
    return statistics.pstdev(logs)


def _values(requests: Sequence[RequestResult], attr: str) -> list[float]:
    return [v for r in requests if r.ok and (v := getattr(r, attr)) is not None and math.isfinite(v)]


REQUEST_ATTR = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_p50_s"}
"""LevelResult percentile name -> the RequestResult field it summarises."""


def request_stat(figure: str) -> tuple[str, Callable[[Sequence[object]], float | None]] | None:
    """What to bootstrap for a figure: ``(attr, statistic over values)``; None if requests cannot say."""
    if figure in ("agg_tok_s", "steady_tok_s"):
        # a level's throughput varies as its requests' own rate does: ratio of sums over requests
        return "throughput", _throughput
    attr, _, q = figure.rpartition("_")
    attr = REQUEST_ATTR.get(attr, attr)
    if q == "p50":
        return attr, lambda vals: statistics.median(vals) if vals else None  # type: ignore[arg-type]
    if q == "mean":
        return attr, lambda vals: statistics.fmean(vals) if vals else None  # type: ignore[arg-type]
    return None


def _throughput(pairs: Sequence[object]) -> float | None:
    tokens = sum(p[0] for p in pairs)  # type: ignore[index]
    secs = sum(p[1] for p in pairs)  # type: ignore[index]
    return tokens / secs if secs > 0 else None


def samples_for(requests: Sequence[RequestResult], attr: str) -> list[object]:
    if attr == "throughput":
        return [(r.completion_tokens, r.e2e_s) for r in requests
                if r.ok and r.e2e_s is not None and r.e2e_s > 0 and r.completion_tokens > 0]
    return list(_values(requests, attr))


def ratio_interval(a: float, b: float, se_a: float | None, se_b: float | None,
                   z: float = Z95) -> tuple[float, float | None, float | None]:
    """(b/a, low, high); the bounds are None when either side's noise is unknown."""
    ratio = b / a
    if se_a is None or se_b is None:
        return ratio, None, None
    half = z * math.sqrt(se_a**2 + se_b**2)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)
