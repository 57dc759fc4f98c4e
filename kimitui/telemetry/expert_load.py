"""SGLang's expert-balance series on ``/metrics``, turned into per-scrape windows.

Three series are cumulative, so a window is the difference of two scrapes:

- ``sglang:eplb_gpu_physical_count`` (0.5.23 ``observability/metrics_collector.py``
  ``ExpertDispatchCollector``; filled by ``eplb/expert_distribution.py``
  ``_handle_metric_eplb_heatmap`` every ``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL``-th pass): a
  histogram per ``layer`` whose buckets are GPU ranks, ``le`` cumulative.  De-cumulated, then
  differenced: what each layer sent to each rank since the last scrape -> an :class:`ExpertLoad`.
- ``sglang:eplb_balancedness`` (a Summary, label ``forward_mode``): the window's mean is
  delta sum / delta count.
- ``sglang:dp_attention_token_imbalance_ratio`` (a Histogram): likewise its window's mean.

A counter that went backwards (the server restarted) starts the window afresh: nothing is reported
for that scrape rather than a negative load.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric

from kimitui.events import ExpertLoad

HEATMAP = "sglang:eplb_gpu_physical_count"
BALANCEDNESS = "sglang:eplb_balancedness"
DP_IMBALANCE = "sglang:dp_attention_token_imbalance_ratio"
WATCHED = frozenset({HEATMAP, BALANCEDNESS, DP_IMBALANCE})


def balancedness(counts: list[list[float]]) -> float | None:
    """Per layer mean/max over GPU ranks, averaged over the layers that ran (0.5.23
    ``eplb/expert_distribution.py`` ``compute_utilization_rate``); 1.0 = perfectly even."""
    rates = [sum(row) / len(row) / max(row) for row in counts if row and max(row) > 0]
    return sum(rates) / len(rates) if rates else None


def _cumulative_buckets(family: Metric) -> dict[int, dict[float, float]]:
    """layer -> {le: cumulative count} over every series of the family (ranks summed)."""
    out: dict[int, dict[float, float]] = {}
    for s in family.samples:
        if not s.name.endswith("_bucket") or "layer" not in s.labels:
            continue
        try:
            layer, le = int(s.labels["layer"]), float(s.labels["le"])
        except (KeyError, ValueError):
            continue
        if math.isinf(le) or math.isnan(s.value):
            continue
        buckets = out.setdefault(layer, {})
        buckets[le] = buckets.get(le, 0.0) + s.value
    return out


def _per_rank(buckets: dict[float, float]) -> list[float]:
    """Cumulative ``le`` buckets (0, 1, ... ranks) -> the count of each rank."""
    out: list[float] = []
    prev = 0.0
    for le in sorted(buckets):
        out.append(max(0.0, buckets[le] - prev))
        prev = buckets[le]
    return out


def _sum_count(family: Metric) -> tuple[float, float] | None:
    total = count = 0.0
    seen = False
    for s in family.samples:
        if s.name.endswith("_sum"):
            total += s.value
            seen = True
        elif s.name.endswith("_count"):
            count += s.value
    return (total, count) if seen else None


class ExpertWindows:
    """Keeps the previous scrape's cumulative values; turns each scrape into its window's figures."""

    def __init__(self) -> None:
        self._heat: dict[int, list[float]] = {}
        self._sums: dict[str, tuple[float, float]] = {}

    def feed(self, families: Iterable[Metric], *, host: str, t: float) -> tuple[ExpertLoad | None, dict[str, float]]:
        """(the heatmap's window, if any layer moved; extra figures: ``eplb_balancedness``, ``dp_token_imbalance``)."""
        load: ExpertLoad | None = None
        extra: dict[str, float] = {}
        for family in families:
            if family.name == HEATMAP:
                load = self._heatmap(family, host=host, t=t)
            elif family.name in (BALANCEDNESS, DP_IMBALANCE):
                mean = self._window_mean(family)
                if mean is not None:
                    extra["eplb_balancedness" if family.name == BALANCEDNESS else "dp_token_imbalance"] = mean
        return load, extra

    def _heatmap(self, family: Metric, *, host: str, t: float) -> ExpertLoad | None:
        now = {layer: _per_rank(b) for layer, b in _cumulative_buckets(family).items()}
        prev, self._heat = self._heat, now
        if not prev:
            return None  # the first scrape: counts since the server started, not a window
        layers, counts = [], []
        for layer in sorted(now):
            before = prev.get(layer, [0.0] * len(now[layer]))
            delta = [a - b for a, b in zip(now[layer], before + [0.0] * (len(now[layer]) - len(before)))]
            if any(d < 0 for d in delta):
                return None  # a reset: the next scrape is a window again
            layers.append(layer)
            counts.append(delta)
        if not any(any(row) for row in counts):
            return None
        return ExpertLoad(host=host, t=t, layers=layers, counts=counts, balancedness=balancedness(counts))

    def _window_mean(self, family: Metric) -> float | None:
        sc = _sum_count(family)
        if sc is None:
            return None
        prev = self._sums.get(family.name)
        self._sums[family.name] = sc
        if prev is None:
            return sc[0] / sc[1] if sc[1] else None
        dsum, dcount = sc[0] - prev[0], sc[1] - prev[1]
        return dsum / dcount if dcount > 0 and dsum >= 0 else None
