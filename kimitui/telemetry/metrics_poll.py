"""Poll the SGLang server's HTTP endpoints, each on its own interval, into events.

- ``/metrics`` (needs ``--enable-metrics``): parsed with prometheus_client's own
  parser -> :class:`ServerStats` (``source="metrics"``).  404 -> not enabled:
  said once, then that poll stops.
- ``/server_info`` (``/get_server_info`` on older servers) -> :class:`ServerInfo`
  with ``drift``: the knobs of the profile meant to run that the running server
  reports differently.
- ``/v1/loads`` (SGLang >= 2026-01) -> :class:`ServerStats` (``source="loads"``);
  404 -> absent in this version, polling it stops.
- ``/health`` -> :class:`ServerHealth` (it takes >= 1 s on a real server: it runs a
  one-token generation, and may take 20 s before answering 503).

Failures become :class:`ErrorEvent` (``source="metrics"``) when an endpoint
starts failing and every 30 s while it keeps failing; nothing is raised.  Two
quiet failures are said once, plainly: no ``/server_info`` (the server's args
cannot be read, so drift is not checked), and a ``/metrics`` that answers but
carries none of the names kimitui reads (the cockpit's server gauges stay empty).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kimitui.events import ErrorEvent, ErrorSeverity, ServerHealth, ServerInfo, ServerStats
from kimitui.knobs import redact, redact_map
from kimitui.session import Session
from kimitui.supervised import SupervisedTask
from kimitui.telemetry.expert_load import WATCHED, ExpertWindows
from kimitui.sglang.loads import stats_from_get_load, stats_from_loads
from kimitui.sglang.prom_text import families as prom_families
from kimitui.sglang.metrics import (
    CUDA_GRAPH,
    CUDA_GRAPH_PASSES,
    GAUGES,
    KNOWN_METRICS,
    PD_EXTRA_KEYS,
    PD_HISTOGRAMS,
    QUEUE_TIME,
    SGLANG_HIT_RATE,
    SPEC_EXTRA,
    SPLIT_EXTRA,
    VLLM_GAUGES,
    VLLM_HIT_RATE,
    VLLM_RATES,
    VLLM_UNSUPPORTED,
)
from kimitui.sglang.server_info import flat_args, server_drift, version

__all__ = ["KNOWN_METRICS", "PD_EXTRA_KEYS", "PD_HISTOGRAMS", "VLLM_UNSUPPORTED", "CounterRates", "MetricsPoller",
           "known_metric_names", "server_drift", "stats_from_get_load", "stats_from_loads", "stats_from_metrics"]

_REPEAT_ERROR_S = 30.0


class CounterRates:
    """Per-second rates of monotonic counters between consecutive scrapes (a reset restarts them)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}

    def rate(self, name: str, value: float, now: float) -> float | None:
        prev = self._last.get(name)
        self._last[name] = (now, value)
        if prev is None or now <= prev[0] or value < prev[1]:
            return None
        return (value - prev[1]) / (now - prev[0])

    def delta(self, name: str, value: float) -> float | None:
        prev = self._last.get(name)
        self._last[name] = (0.0, value)
        return None if prev is None or value < prev[1] else value - prev[1]


class _Gone(Exception):
    """The endpoint does not exist on this server: stop polling it."""


class ServerInfoMissing(_Gone):
    """Neither ``/server_info`` nor ``/get_server_info`` exists on this server."""


def known_metric_names(stats: ServerStats) -> bool:
    """Did this /metrics scrape fill any field kimitui shows (not just ``extra``)?"""
    return any(getattr(stats, field) is not None for field, _ in GAUGES.values()) or stats.cuda_graph is not None


UNREAD_SAMPLES = re.compile(r"^[^#\n{ ]*_(?:bucket|created)[{ ][^\n]*\n?", re.M)
"""Histogram buckets and ``_created`` stamps: nothing here reads them (a histogram gives its ``_sum`` and
``_count``), and they are two thirds of a real SGLang scrape's lines.  Dropped before the parser, they cost
0.4 ms a scrape instead of ~12 ms (the 0.5.18 capture: 18 -> 6 ms; the idle cockpit's largest cost, issue 33).
What is left is read by :mod:`kimitui.sglang.prom_text` (6 -> 0.8 ms)."""


def stats_from_metrics(text: str, *, host: str, rates: CounterRates | None = None,
                       now: float | None = None) -> ServerStats:
    """Prometheus text -> ServerStats; ranks/DP workers combined (sums, or means for ratios).

    SGLang's ``sglang:`` gauges map directly; vLLM's ``vllm:`` names map where they have an
    equivalent, its counters becoming rates through ``rates`` (kept by the poller across scrapes).
    """
    values: dict[str, list[float]] = {}
    hist: dict[str, list[float]] = {}
    passes: dict[str, float] = {}
    for family in prom_families(UNREAD_SAMPLES.sub("", text)):
        if family.name == CUDA_GRAPH_PASSES:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    mode = sample.labels.get("mode", "")
                    passes[mode] = passes.get(mode, 0.0) + float(sample.value)
        if family.type == "histogram" and (family.name in PD_HISTOGRAMS or family.name == QUEUE_TIME):
            for sample in family.samples:
                if sample.name.endswith(("_sum", "_count")):
                    hist.setdefault(sample.name, []).append(float(sample.value))
            continue
        if family.type not in ("gauge", "counter", "untyped", "unknown"):
            continue
        split = SPLIT_EXTRA.get(family.name)
        for sample in family.samples:
            if sample.name.endswith(("_created",)) or math.isnan(sample.value):
                continue
            name = f"{sample.name}.{sample.labels.get(split, '')}" if split else sample.name
            values.setdefault(name, []).append(float(sample.value))
    kw: dict[str, Any] = {}
    extra: dict[str, float] = {}
    for name, vals in values.items():
        mapped = GAUGES.get(name)
        if mapped is not None:
            field, how = mapped
            kw[field] = sum(vals) if how == "sum" else sum(vals) / len(vals)
        elif name == CUDA_GRAPH:
            if not passes:
                kw["cuda_graph"] = bool(vals) and min(vals) > 0
        elif name in SPEC_EXTRA:
            if max(vals) > 0:
                extra[SPEC_EXTRA[name]] = max(vals)
        elif name.startswith("sglang:"):
            extra[name.removeprefix("sglang:")] = sum(vals)
        elif name in VLLM_GAUGES:
            field, how = VLLM_GAUGES[name]
            kw[field] = sum(vals) if how == "sum" else sum(vals) / len(vals)
    if rates is not None and any(n.startswith("vllm:") for n in values):
        now = time.monotonic() if now is None else now
        for name, field in VLLM_RATES.items():
            if name in values:
                r = rates.rate(name, sum(values[name]), now)
                if r is not None:
                    if field == "gen_throughput":
                        kw[field] = r
                    else:
                        extra[field] = r
        hits, queries = (sum(values[n]) if n in values else None for n in VLLM_HIT_RATE)
        if hits is not None and queries is not None:
            dh, dq = rates.delta(VLLM_HIT_RATE[0], hits), rates.delta(VLLM_HIT_RATE[1], queries)
            if dh is not None and dq:
                kw["cache_hit_rate"] = dh / dq
    if rates is not None and all(n in values for n in SGLANG_HIT_RATE):
        dh, dq = (rates.delta(n, sum(values[n])) for n in SGLANG_HIT_RATE)
        if dh is not None and dq:
            kw["cache_hit_rate"] = min(1.0, dh / dq)
        elif dh is not None:
            kw.pop("cache_hit_rate", None)  # no prompt in between: no hit rate (the gauge's 0 is not one)
    extra.update(_pd_transfer_means(hist, rates))
    graphs = _decode_graphs(passes, rates)
    if graphs is not None:
        kw["cuda_graph"] = graphs
    if kw.get("utilization") is not None and kw["utilization"] < 0:
        del kw["utilization"]  # a PD prefill server's -1: no figure
    queue_time = _window_mean(hist, QUEUE_TIME, rates)
    if queue_time is not None:
        kw["queue_time_s"] = queue_time
    return ServerStats(host=host, source="metrics", extra=extra, **kw)


def _decode_graphs(passes: dict[str, float], rates: CounterRates | None) -> bool | None:
    """Did the decode passes since the previous scrape run CUDA graphs?  With none in between (or without
    ``rates``), did any since the server started.  None when it never decoded (or does not count passes)."""
    decode = sum(v for mode, v in passes.items() if mode.startswith("decode_"))
    graphs = sum(v for mode, v in passes.items() if mode.startswith("decode_") and not mode.endswith("_none"))
    if rates is not None and passes:
        d_decode = rates.delta(CUDA_GRAPH_PASSES + ":decode", decode)
        d_graphs = rates.delta(CUDA_GRAPH_PASSES + ":graphs", graphs)
        if d_decode and d_graphs is not None:
            return d_graphs > 0
    return graphs > 0 if decode > 0 else None


def _window_mean(hist: dict[str, list[float]], family: str, rates: CounterRates | None) -> float | None:
    """A histogram's mean over what it observed since the previous scrape (since start without ``rates``,
    or on the first scrape); None when it observed nothing in between."""
    total, count = hist.get(family + "_sum"), hist.get(family + "_count")
    if total is None or count is None:
        return None
    s, n = sum(total), sum(count)
    if rates is not None:
        ds, dn = rates.delta(family + "_sum", s), rates.delta(family + "_count", n)
        s, n = (ds, dn) if ds is not None and dn is not None else (0.0, 0.0)
    return s / n if n > 0 else None


def _pd_transfer_means(hist: dict[str, list[float]], rates: CounterRates | None) -> dict[str, float]:
    """The mean KV transfer latency (ms) and speed (GB/s) of the transfers since the previous scrape
    (since start without ``rates``); nothing when no transfer happened in between."""
    out: dict[str, float] = {}
    for family, key in PD_HISTOGRAMS.items():
        mean = _window_mean(hist, family, rates)
        if mean is not None:
            out[key] = mean
    return out


def is_vllm_metrics(text: str) -> bool:
    """A vLLM server's /metrics (its names start with ``vllm:``)."""
    return "\nvllm:" in text or text.startswith("vllm:")


def _metric_names(text: str) -> set[str]:
    try:
        return {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    except ValueError:
        return set()


QUIET_AFTER = 5
"""Scrapes in a row with nothing running or queued before the figures that only move with traffic are polled
``QUIET_FACTOR`` times less often."""
QUIET_FACTOR = 3.0
"""An idle server's /metrics and /v1/loads every 3 s instead of every second (issue 33: the cockpit at rest costs
near nothing; at 8 hosts its polls were a third of it).  The first scrape that sees a request, or a loads poll that
does, brings the usual interval back; a request that starts meanwhile is seen within one quiet interval."""
QUIET_POLLS = frozenset({"metrics", "loads"})


def _has_traffic(stats: ServerStats) -> bool:
    """A request running or queued (an unknown count reads as none)."""
    return (stats.running_reqs or 0) > 0 or (stats.queued_reqs or 0) > 0


class MetricsPoller(SupervisedTask):
    """Polls one SGLang server; ``start()``/``stop()``; publishes into the Session.

    Its task runs one loop per endpoint (each on its own interval); stopping it ends them all."""

    def __init__(
        self,
        session: Session,
        base_url: str,
        *,
        host: str = "sim",
        metrics_interval: float | None = 1.0,
        info_interval: float | None = 10.0,
        loads_interval: float | None = 1.0,
        health_interval: float | None = 2.0,
        expected_args: dict[str, Any] | None = None,
        timeout_s: float = 5.0,
        health_timeout_s: float = 25.0,
        startup_grace_s: float = 120.0,
        client: httpx.AsyncClient | None = None,
        only_extra: frozenset[str] | None = None,
    ) -> None:
        """``startup_grace_s``: a server still starting is not an error; until an endpoint
        first answers, its failures are only reported once this long has passed
        (``/health`` keeps publishing ``ok=False`` meanwhile).  ``only_extra``: publish just these
        figures of /metrics (a PD prefill server's transfer figures beside its decode server's)."""
        super().__init__()
        self.only_extra = only_extra
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.host = host
        self.intervals = {"metrics": metrics_interval, "server_info": info_interval, "loads": loads_interval,
                          "health": health_interval}
        self.expected_args = dict(expected_args or {})
        self.timeout_s = timeout_s
        self.health_timeout_s = health_timeout_s
        self._client = client
        self._own_client = client is None
        self.startup_grace_s = startup_grace_s
        self._started_at = 0.0
        self._ever_ok: set[str] = set()
        self._failing_since: dict[str, float] = {}
        self._last_error: dict[str, float] = {}
        self.stopped_polls: set[str] = set()
        """Endpoints this server lacks (404), no longer polled."""
        self.info: ServerInfo | None = None
        self._said_unknown_metrics = False
        self._unknown_metrics_since: float | None = None
        self.unknown_metrics_after_s = 30.0
        """How long SGLang's own /metrics may lack every gauge kimitui reads before it is said."""
        self._rates = CounterRates()
        self._windows = ExpertWindows()
        self._said_vllm = False
        self._old_get_load = False
        """This server has no /v1/loads: /get_load is polled instead."""
        self.quiet_scrapes = 0
        """Scrapes in a row that found nothing running and nothing queued (``QUIET_AFTER``)."""

    def set_expected(self, expected_args: dict[str, Any] | None) -> None:
        """A new profile is meant to run (after a swap): judge drift against it."""
        self.expected_args = dict(expected_args or {})

    def _task_name(self) -> str:
        return f"metrics-poller-{self.host}"

    async def start(self) -> None:
        if self.running:
            return
        self._started_at = time.monotonic()
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s)
        self._start_task()

    async def stop(self) -> None:
        await super().stop()
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        polls: dict[str, Callable[[], Awaitable[object]]] = {
            "metrics": self.poll_metrics, "server_info": self.poll_server_info,
            "loads": self.poll_loads, "health": self.poll_health,
        }
        async with asyncio.TaskGroup() as group:  # stopping cancels this task, and so every poll
            for name, poll in polls.items():
                interval = self.intervals[name]
                if interval:
                    group.create_task(self._loop(name, poll, interval), name=f"poll-{name}")

    async def _loop(self, name: str, poll: Callable[[], Awaitable[object]], interval: float) -> None:
        while True:
            began = time.monotonic()
            try:
                await poll()
                self._ok(name)
            except ServerInfoMissing as exc:
                self.stopped_polls.add(name)
                self._publish_error("this server has no /server_info (nor /get_server_info): its args are not "
                                    "shown and drift from the profile is not checked", str(exc))
                return
            except _Gone as exc:
                self.stopped_polls.add(name)
                self._publish_error(f"{name}: not available on this server; no longer polled", str(exc))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - failures are events, never raised
                self._failed(name, exc)
            await asyncio.sleep(max(0.0, self.interval_now(name, interval) - (time.monotonic() - began)))

    def interval_now(self, name: str, interval: float) -> float:
        """``interval``, or ``QUIET_FACTOR`` times it for a traffic figure of a server that has been idle a while."""
        if name in QUIET_POLLS and self.quiet_scrapes >= QUIET_AFTER:
            return interval * QUIET_FACTOR
        return interval

    def _note_traffic(self, stats: ServerStats) -> None:
        """Count the scrapes in a row that saw no request."""
        self.quiet_scrapes = 0 if _has_traffic(stats) else self.quiet_scrapes + 1

    # -- one poll each ---------------------------------------------------------------
    async def _get(self, path: str, timeout: float | None = None) -> httpx.Response:
        assert self._client is not None, "start() first"
        return await self._client.get(self.base_url + path, timeout=timeout or self.timeout_s)

    async def poll_metrics(self) -> ServerStats:
        resp = await self._get("/metrics")
        if resp.status_code == 404:
            raise _Gone("GET /metrics -> 404 (start SGLang with --enable-metrics)")
        resp.raise_for_status()
        try:
            stats = stats_from_metrics(resp.text, host=self.host, rates=self._rates)
            stats = self._expert_windows(resp.text, stats)
        except ValueError as exc:
            raise ValueError(f"/metrics is not Prometheus text: {exc}") from exc
        if not self._said_vllm and is_vllm_metrics(resp.text):
            self._said_vllm = True
            self._publish_error(
                "/metrics is vLLM's: running and waiting requests, KV-cache use, generation and prompt "
                "throughput and the prefix-cache hit rate are shown; not available there: "
                + ", ".join(VLLM_UNSUPPORTED), "vllm: names mapped by kimitui.telemetry.metrics_poll", severity="info")
        if self.only_extra is not None:
            stats = ServerStats(t=stats.t, host=self.host, source="metrics",
                                extra={k: v for k, v in stats.extra.items() if k in self.only_extra})
        elif known_metric_names(stats):
            self._unknown_metrics_since = None
        elif not self._said_unknown_metrics:
            self._check_unknown_metrics(resp.text, stats)
        self._note_traffic(stats)
        self.session.publish(stats)
        return stats

    def _expert_windows(self, text: str, stats: ServerStats) -> ServerStats:
        """Publish the heatmap's window (an ExpertLoad); add the window's balance figures to ``stats``."""
        if not any(name in text for name in WATCHED):
            return stats
        families = [f for f in text_string_to_metric_families(text) if f.name in WATCHED]
        load, extra = self._windows.feed(families, host=self.host, t=stats.t)
        if load is not None:
            self.session.publish(load)
        return stats.model_copy(update={"extra": {**stats.extra, **extra}}) if extra else stats

    def _check_unknown_metrics(self, text: str, stats: ServerStats) -> None:
        """Say once that /metrics carries none of the names kimitui reads.

        Not SGLang's names at all (another server, a proxy): said at once.  SGLang's names but none
        of the gauges: said only after ``unknown_metrics_after_s``, since SGLang may register its
        gauges only once the scheduler first logs stats."""
        names = _metric_names(text)
        now = time.monotonic()
        if self._unknown_metrics_since is None:
            self._unknown_metrics_since = now
        sglang = any(n.startswith("sglang:") for n in names)
        if sglang and now - self._unknown_metrics_since < self.unknown_metrics_after_s:
            return
        self._said_unknown_metrics = True
        seen = sorted(names)[:3]
        self._publish_error(
            "/metrics has none of the names kimitui reads (sglang:num_running_reqs, sglang:token_usage...): "
            "running, queued and KV-cache gauges stay empty",
            "it has " + (", ".join(seen) + (", ..." if len(names) > 3 else "") if seen else "no samples"))

    async def poll_server_info(self) -> ServerInfo:
        resp = await self._get("/server_info")
        if resp.status_code == 404:  # SGLang before 2025-11 only has the old path
            resp = await self._get("/get_server_info")
            if resp.status_code == 404:
                raise ServerInfoMissing("GET /server_info and /get_server_info -> 404")
        resp.raise_for_status()
        data = resp.json()
        if not isinstance(data, dict):
            raise ValueError(f"/server_info returned {type(data).__name__}, not an object")
        # secrets (api_key, a launch command's --api-key) are *** from here on: recordings keep these args
        args = redact_map(flat_args(data))
        drift = {k: [redact(k, v) for v in pair] for k, pair in server_drift(data, self.expected_args).items()}
        info = ServerInfo(host=self.host, url=self.base_url, version=version(data), args=args, drift=drift)
        self.info = info
        self.session.publish(info)
        return info

    async def poll_loads(self) -> ServerStats:
        if not self._old_get_load:
            resp = await self._get("/v1/loads?include=all")
            self._old_get_load = resp.status_code == 404
        if self._old_get_load:  # an older SGLang: its deprecated /get_load has the request and token counts
            resp = await self._get("/get_load")
            if resp.status_code == 404:
                raise _Gone("GET /v1/loads and /get_load -> 404")
        resp.raise_for_status()
        data = resp.json()
        if self._old_get_load and isinstance(data, list):
            stats = stats_from_get_load(data, host=self.host)
        elif isinstance(data, dict):
            stats = stats_from_loads(data, host=self.host)
        else:
            raise ValueError(f"{resp.url.path} did not return an object")
        if _has_traffic(stats) or "metrics" in self.stopped_polls:
            self._note_traffic(stats)  # traffic seen here ends the quiet at once; without /metrics, loads count it
        self.session.publish(stats)
        return stats

    async def poll_health(self) -> ServerHealth:
        sent = time.monotonic()
        try:
            resp = await self._get("/health", timeout=self.health_timeout_s)
        except httpx.HTTPError as exc:
            health = ServerHealth(host=self.host, url=self.base_url, ok=False, status=None,
                                  detail=f"{type(exc).__name__}: {exc}".strip(), latency_s=time.monotonic() - sent)
        else:
            health = ServerHealth(host=self.host, url=self.base_url, ok=resp.status_code == 200,
                                  status=resp.status_code, detail=resp.text[:200] if resp.status_code != 200 else "",
                                  latency_s=round(time.monotonic() - sent, 4))
        self.session.publish(health)
        return health

    # -- failure reporting -------------------------------------------------------------
    def _ok(self, name: str) -> None:
        self._ever_ok.add(name)
        self._failing_since.pop(name, None)

    def _failed(self, name: str, exc: Exception) -> None:
        now = time.monotonic()
        if name not in self._ever_ok and now - self._started_at < self.startup_grace_s:
            return  # the server is probably still starting
        first = name not in self._failing_since
        if first:
            self._failing_since[name] = now
        if first or now - self._last_error.get(name, 0.0) >= _REPEAT_ERROR_S:
            self._last_error[name] = now
            self._publish_error(f"polling {name} failed", f"{type(exc).__name__}: {exc}")

    def _publish_error(self, message: str, detail: str, severity: ErrorSeverity = "error") -> None:
        self.session.publish(ErrorEvent(host=self.host, source="metrics", message=message,
                                        detail=f"{self.base_url}: {detail}", severity=severity))
