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


def log_se_of_repeats(values: Sequence[float | None]) -> float | None:
    """Standard error of log(mean) from per-repeat values; None with fewer than two usable."""
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if len(vals) < 2:
        return None
    logs = [math.log(v) for v in vals]
    return statistics.stdev(logs) / math.sqrt(len(logs))


Statistic = Callable[[list[int]], "float | None"]
"""A figure computed from one resample, given as indices into the level's requests."""


def resample_indices(rng: random.Random, n: int) -> list[int]:
    """``n`` indices drawn uniformly with replacement (from random bytes: ~5x faster than ``choices``)."""
    return [i % n for i in memoryview(rng.randbytes(4 * n)).cast("I")]


def log_se_bootstrap(n: int, stat: Statistic, *, seed: int, key: str,
                     resamples: int = BOOTSTRAP_RESAMPLES) -> float | None:
    """Bootstrap standard error of log(stat) over ``n`` samples; None with fewer than three."""
    if n < 3:
        return None
    rng = random.Random(seed ^ zlib.crc32(key.encode()))
    logs: list[float] = []
    for _ in range(resamples):
        value = stat(resample_indices(rng, n))
        if value is not None and value > 0 and math.isfinite(value):
            logs.append(math.log(value))
    if len(logs) < resamples // 2:
        return None
    return statistics.pstdev(logs)


REQUEST_ATTR = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_p50_s"}
"""LevelResult percentile name -> the RequestResult field it summarises."""


def request_statistic(figure: str, requests: Sequence[RequestResult]) -> tuple[int, Statistic] | None:
    """(sample count, statistic over a resample) to bootstrap for a figure; None if requests cannot say."""
    ok = [r for r in requests if r.ok]
    if figure in ("agg_tok_s", "steady_tok_s"):
        # a level's throughput varies as its requests' own rates do: ratio of sums over requests
        pairs = [(r.completion_tokens, r.e2e_s) for r in ok
                 if r.e2e_s is not None and r.e2e_s > 0 and r.completion_tokens > 0]
        tokens = [float(p[0]) for p in pairs]
        secs = [p[1] for p in pairs]

        def throughput(idx: list[int]) -> float | None:
            total = sum(map(secs.__getitem__, idx))
            return sum(map(tokens.__getitem__, idx)) / total if total > 0 else None

        return len(pairs), throughput
    attr, _, q = figure.rpartition("_")
    attr = REQUEST_ATTR.get(attr, attr)
    vals = sorted(v for r in ok if (v := getattr(r, attr, None)) is not None and math.isfinite(v))
    n = len(vals)
    if q == "p50":
        def med(idx: list[int]) -> float:  # vals is sorted, so sorted indices give sorted values
            idx.sort()
            mid = n // 2
            return vals[idx[mid]] if n % 2 else (vals[idx[mid - 1]] + vals[idx[mid]]) / 2

        return n, med
    if q == "mean":
        return n, lambda idx: sum(map(vals.__getitem__, idx)) / n
    return None


def ratio_interval(a: float, b: float, se_a: float | None, se_b: float | None,
                   z: float = Z95) -> tuple[float, float | None, float | None]:
    """(b/a, low, high); the bounds are None when either side's noise is unknown."""
    ratio = b / a
    if se_a is None or se_b is None:
        return ratio, None, None
    half = z * math.sqrt(se_a**2 + se_b**2)
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)
