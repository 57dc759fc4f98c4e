"""Slow KV transfers between a PD prefill and decode server (docs/pd.md): the ``kv_transfer`` cause.

A decode server starts a request only when its KV has arrived from the prefill server, so a slow
transfer holds the stream before its first token (a long TTFT) and, while the transfer queue backs up,
every request behind it.  Two signs, from SGLang 0.5.23:

* ``/metrics``: the mean of ``sglang:kv_transfer_latency_ms`` since the previous scrape (the poller's
  ``extra["kv_transfer_latency_ms"]``, :mod:`kimitui.telemetry.metrics_poll`) jumping to
  :data:`JUMP_FACTOR` times its usual level (the lowest mean seen recently) and at least :data:`JUMP_MIN_MS`;
  the episode is the scrape interval it was measured in;
* the decode log: ``#transfer-req: N`` on a Decode line (``metrics_reporter.py``, PD decode only) at
  :data:`BACKLOG_MIN` or more and :data:`JUMP_FACTOR` times its usual level; the episode is the time
  since the previous Decode line.
"""

from __future__ import annotations

from collections import deque

from kimitui.analysis.causes.episodes import Episode, EpisodeRun
from kimitui.sglang.log import DecodeFields

JUMP_FACTOR = 4.0
JUMP_MIN_MS = 50.0
BACKLOG_MIN = 4
BASELINE_WINDOW = 30
"""How many recent observations the usual level is the lowest of."""
MAX_SPAN_S = 30.0
"""An episode never reaches back further than this before the observation that showed it."""


class PdSources:
    """Folds PD figures (a server's stats, its Decode lines) into ``kv_transfer`` episodes."""

    def __init__(self, lists: dict[str, list[Episode]]) -> None:
        self._run = EpisodeRun("kv_transfer", 1.0, lists["kv_transfer"])
        self._latency: deque[float] = deque(maxlen=BASELINE_WINDOW)
        self._backlog: deque[float] = deque(maxlen=BASELINE_WINDOW)
        self._last_stats: dict[str, float] = {}
        self._last_decode: dict[str, float] = {}

    def add_stats(self, host: str, extra: dict[str, float], at: float) -> None:
        prev, self._last_stats[host] = self._last_stats.get(host), at
        latency = extra.get("kv_transfer_latency_ms")
        if latency is None:
            return
        usual = min(self._latency) if self._latency else None
        self._latency.append(latency)
        if usual is None or latency < max(JUMP_MIN_MS, JUMP_FACTOR * usual):
            return
        start = max(prev if prev is not None else at - 1.0, at - MAX_SPAN_S)
        ep = self._run.observe(start, at, "", latency_ms_max=float(latency), usual_ms=float(usual))
        ep.evidence = (f"KV transfer latency {float(ep.figures['latency_ms_max']):.0f} ms "
                       f"(usually {float(ep.figures['usual_ms']):.0f} ms): sglang:kv_transfer_latency_ms")

    def add_decode(self, host: str, fields: DecodeFields, at: float) -> None:
        prev, self._last_decode[host] = self._last_decode.get(host), at
        n = fields.get("transfer_reqs")
        if not isinstance(n, (int, float)) or isinstance(n, bool):
            return
        usual = min(self._backlog) if self._backlog else 0.0
        self._backlog.append(float(n))
        if n < BACKLOG_MIN or n < JUMP_FACTOR * max(1.0, usual):
            return
        start = max(prev if prev is not None else at - 1.0, at - MAX_SPAN_S)
        ep = self._run.observe(start, at, "", transfer_reqs_max=float(n))
        ep.evidence = (f"decode server waiting on KV transfers: #transfer-req up to "
                       f"{int(float(ep.figures['transfer_reqs_max']))}")
