"""What the simulated server reports about expert balance, pass by pass, as SGLang 0.5.23 does.

- ``[Expert Balancedness] forward_pass_id=N current_pass_balancedness=0.812
  last_10_average_balancedness=... last_100_... last_1000_... gpu_physical_count_sum=N`` (0.5.23
  ``managers/scheduler_components/metrics_reporter.py``, rank 0, when
  ``expert_balancedness_report_mode`` is ``server_log`` or ``both``).  SGLang prints it on every
  forward pass; the simulator prints it every ``decode_log_interval`` passes (40, like its Decode
  line), which bounds the log at high time-scales; the windowed averages still cover the last 10,
  100 and 1000 passes (each pass's expected balancedness, the reported pass's own measured one).
- ``sglang:eplb_balancedness`` (Summary, ``forward_mode``) observed with the same figure, when the
  mode exports to Prometheus.
- the heatmap ``sglang:eplb_gpu_physical_count``: every ``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL``-th
  pass the pass's layer x GPU counts are added to :attr:`heatmap` (cumulative; /metrics turns them
  into the histogram's buckets as ``eplb/expert_distribution.py`` ``_handle_metric_eplb_heatmap``
  does).
"""

from __future__ import annotations

from collections import deque

from kimitui.sim.expert_routing import DRIFT_EVERY, NUM_LAYERS, ExpertRouting
from kimitui.sim.settings import ServerSettings

WINDOWS = (10, 100, 1000)
"""0.5.23 ``eplb/expert_distribution.py`` ``EPLB_BALANCEDNESS_WINDOW_SIZES``."""


class BalanceReport:
    """Expert balance of one simulated server: the routing model and what it reports."""

    def __init__(self, s: ServerSettings) -> None:
        self.s = s
        self.routing = ExpertRouting(s.ep_size, s.seed)
        self.to_log = s.expert_balancedness_report_mode in ("server_log", "both")
        self.to_prometheus = s.expert_balancedness_report_mode in ("prometheus", "both")
        self.heatmap: list[list[float]] = [[0.0] * self.routing.ep for _ in range(NUM_LAYERS)]
        """Cumulative counts per layer and GPU rank (the histogram's buckets, not cumulated over ranks)."""
        self.observed: list[float] = []
        """Balancedness figures for the Summary, taken (and cleared) by /metrics."""
        self._history: deque[float] = deque(maxlen=max(WINDOWS))
        self._expected = self.routing.balancedness()
        self.passes = 0

    @property
    def balancedness_now(self) -> float:
        return self._expected

    def on_pass(self, tokens: int) -> str | None:
        """One forward pass of ``tokens`` tokens; returns the balancedness log line when one is due."""
        self.passes += 1
        before = self.routing.passes
        self.routing.advance()
        if self.routing.passes // DRIFT_EVERY != before // DRIFT_EVERY:
            self._expected = self.routing.balancedness()
        self._history.append(self._expected)
        interval = self.s.eplb_heatmap_interval
        if interval > 0 and self.passes % interval == 0 and (self.to_log or self.to_prometheus):
            for row, add in zip(self.heatmap, self.routing.counts(tokens)):
                for g, n in enumerate(add):
                    row[g] += n
        if self.passes % max(1, self.s.decode_log_interval) or not (self.to_log or self.to_prometheus):
            return None
        counts = self.routing.counts(tokens, jitter=True)
        current = self.routing.balancedness(counts)
        self._history[-1] = current
        if self.to_prometheus:
            self.observed.append(current)
        if not self.to_log:
            return None
        hist = list(self._history)
        means = "".join(f"last_{w}_average_balancedness={sum(hist[-w:]) / len(hist[-w:]):.03f} " for w in WINDOWS)
        return (f"[Expert Balancedness] forward_pass_id={self.passes} current_pass_balancedness={current:.03f} "
                f"{means} gpu_physical_count_sum={sum(sum(r) for r in counts)}")

    def window_average(self) -> float:
        """The balancedness EPLB compares with its threshold (the recorder's window average)."""
        hist = list(self._history)[-self.s.eplb_rebalance_num_iterations:]
        return sum(hist) / len(hist) if hist else self._expected

    def rebalanced(self) -> None:
        self.routing.rebalance()
        self._expected = self.routing.balancedness()
