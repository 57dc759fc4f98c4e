"""kimitui's own figures in the Prometheus text format: a session sink that keeps the latest of each, and a
collector that turns them into metric families when a scrape asks.

Per event the sink only stores (the newest GPU sample of a host replaces the one before it; a server
figure overwrites its slot): the cockpit publishes ~40 GPU samples a second at 8 hosts, and building
series is the scrape's cost, every 15 s or so, on the HTTP server's thread.  The sink runs on the
session's event loop and the scrape on its own thread: both touch the kept state only under one lock,
and the scrape copies it out before it formats anything.

Each exporter holds its own :class:`prometheus_client.CollectorRegistry` (never the process-global one),
so two exporters in one process never clash.  The metric list: ``docs/prometheus.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kimitui.analysis.cost import CostRates, level_cost
from kimitui.analysis.energy import EnergyFolder, LevelEnergy, WindowPower
from kimitui.events import (
    ConnectionState,
    Event,
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    ProfileState,
    ProfileSwitch,
    RequestResult,
    ServerHealth,
    ServerStats,
    SweepStarted,
)
from kimitui.export.levels import HostSweeps
from kimitui.session import Session

MIB = 1048576.0

GPU_FIELDS: tuple[tuple[str, str, float, str], ...] = (
    ("kimitui_gpu_utilization_percent", "util_pct", 1.0, "GPU (SM) utilisation over NVML's sampling window"),
    ("kimitui_gpu_memory_utilization_percent", "mem_util_pct", 1.0, "memory controller utilisation"),
    ("kimitui_gpu_memory_used_bytes", "mem_used_mib", MIB, "GPU memory in use"),
    ("kimitui_gpu_memory_total_bytes", "mem_total_mib", MIB, "GPU memory in all"),
    ("kimitui_gpu_power_watts", "power_w", 1.0, "power draw"),
    ("kimitui_gpu_power_limit_watts", "power_limit_w", 1.0, "enforced power limit"),
    ("kimitui_gpu_temperature_celsius", "temp_c", 1.0, "GPU temperature"),
    ("kimitui_gpu_sm_clock_hertz", "sm_clock_mhz", 1e6, "SM clock"),
    ("kimitui_gpu_memory_clock_hertz", "mem_clock_mhz", 1e6, "memory clock"),
    ("kimitui_gpu_pcie_tx_bytes_per_second", "pcie_tx_kbps", 1e3, "PCIe transmit throughput (NVML's KB/s)"),
    ("kimitui_gpu_pcie_rx_bytes_per_second", "pcie_rx_kbps", 1e3, "PCIe receive throughput (NVML's KB/s)"),
)
"""(metric, GpuReading field, factor to the metric's unit, help).  A field the GPU does not report
(None) has no sample, never a zero."""

THROTTLING = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                        "hw_power_brake_slowdown"})
"""Clock-event reasons that hold the clock down (``gpu_idle`` and the clock settings do not)."""

SERVER_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("kimitui_server_generation_tok_s", "gen_throughput", "generation throughput the server reports"),
    ("kimitui_server_running_requests", "running_reqs", "requests the scheduler is running"),
    ("kimitui_server_queued_requests", "queued_reqs", "requests waiting in the scheduler's queue"),
    ("kimitui_server_kv_usage_ratio", "token_usage", "KV-cache token usage (0..1)"),
    ("kimitui_server_cache_hit_ratio", "cache_hit_rate", "prefix-cache hit rate (0..1)"),
)
"""(metric, ServerStats field, help): the newest non-None value of each, whichever source said it."""

LEVEL_LABELS = ["host", "profile", "sweep", "level", "repeat"]
LEVEL_QUANTILES: tuple[tuple[str, str, str], ...] = (
    ("kimitui_level_ttft_seconds", "ttft", "time to first token"),
    ("kimitui_level_tpot_seconds", "tpot", "time per output token"),
    ("kimitui_level_itl_seconds", "itl", "inter-token latency (per-request p50s)"),
    ("kimitui_level_decode_tok_s", "decode_tok_s", "per-request decode speed"),
)
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"))


@dataclass
class _Kept:
    """Everything a scrape reads (the loop thread writes it under the exporter's lock)."""

    gpus: dict[str, GpuSample] = field(default_factory=dict)
    stats: dict[str, dict[str, float]] = field(default_factory=dict)
    health: dict[str, ServerHealth] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    profiles: dict[str, tuple[str, str]] = field(default_factory=dict)
    swaps: dict[tuple[str, str], int] = field(default_factory=dict)
    stragglers: dict[tuple[str, str, str], int] = field(default_factory=dict)
    events: dict[tuple[str, str], int] = field(default_factory=dict)
    levels: list[tuple[str, str, str, LevelResult]] = field(default_factory=list)
    """Only in a snapshot: (host, profile, sweep, level) of every kept level."""
    energy: dict[tuple[str, str, int, int], LevelEnergy] = field(default_factory=dict)
    """(host, sweep, C, repeat) -> the level's energy figures (issue 34), once its GPU samples settled them."""
    idle: dict[tuple[str, str], WindowPower] = field(default_factory=dict)
    """(host, sweep) -> all GPUs' idle power before the sweep."""


class MetricsExporter(Collector):
    """A session sink (``exporter(event)``) and the Prometheus collector of what it kept."""

    def __init__(self, session: Session | None = None, rates: CostRates | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.rates = rates
        """The config's ``[cost]``: with it, each level's cost per million tokens is exported too."""
        self._energy = EnergyFolder()
        """Each level's energy from the host's GPU samples (loop thread only; what it settles is kept)."""
        self._lock = threading.Lock()
        self._kept = _Kept()
        self._hosts: dict[str, HostSweeps] = {}
        self._handlers: dict[str, Callable[[Event], None]] = {
            "gpu_sample": self._on_gpu, "server_stats": self._on_stats, "server_health": self._on_health,
            "connection": self._on_link, "profile_state": self._on_state, "profile_switch": self._on_switch,
            "sweep_started": self._on_sweep, "level_started": self._on_level_started,
            "request_result": self._on_request,
        }
        self.registry.register(self)
        self._detach: Callable[[], None] | None = session.add_sink(self) if session is not None else None

    def detach(self) -> None:
        """Stop receiving the session's events (what was kept stays scrapeable)."""
        if self._detach is not None:
            self._detach()
            self._detach = None

    # -- the sink: per event, store and count --------------------------------------------
    def __call__(self, event: Event) -> None:
        """Fold one event in: store and count only (the scrape builds the series, not the event loop)."""
        host = event.host
        sweeps = self._hosts.get(host)
        if sweeps is None:  # a new host: under the lock, since a scrape walks the hosts
            with self._lock:
                sweeps = self._hosts[host] = HostSweeps()
        sweeps.timeline.add(event)  # loop thread only: never read by a scrape, so outside the lock
        handler = self._handlers.get(event.kind)
        with self._lock:
            key = (host, event.kind)
            self._kept.events[key] = self._kept.events.get(key, 0) + 1
            if handler is not None:
                handler(event)
        if isinstance(event, LevelResult):  # attributes its stragglers outside the lock (it can take a while)
            self._on_level(event)
        self._fold_energy(event)

    def _fold_energy(self, event: Event) -> None:
        """Each level's energy once settled, and each sweep's idle power (only the kept sweeps' stay)."""
        settled = self._energy.add(event)
        idle = self._energy.idle_of(event.sweep_id) if isinstance(event, SweepStarted) else None
        if not settled and idle is None:
            return
        with self._lock:
            if isinstance(event, SweepStarted) and idle is not None:
                self._kept.idle[(event.host, event.sweep_id)] = idle
            for e in settled:
                host = self._energy.sweep_host.get(e.sweep_id, event.host)
                self._kept.energy[(host, e.sweep_id, e.concurrency, e.repeat)] = e
            kept = {(h, sw) for h, hs in self._hosts.items() for sw in hs.sweeps}
            for gone in [k for k in self._kept.energy if (k[0], k[1]) not in kept]:
                del self._kept.energy[gone]
            for idle_key in [k for k in self._kept.idle if k not in kept]:
                del self._kept.idle[idle_key]

    def _on_gpu(self, ev: Event) -> None:
        assert isinstance(ev, GpuSample)
        self._kept.gpus[ev.host] = ev

    def _on_stats(self, ev: Event) -> None:
        assert isinstance(ev, ServerStats)
        slot = self._kept.stats.setdefault(ev.host, {})
        for _, attr, _ in SERVER_FIELDS:
            value = getattr(ev, attr)
            if value is not None:
                slot[attr] = float(value)

    def _on_health(self, ev: Event) -> None:
        assert isinstance(ev, ServerHealth)
        self._kept.health[ev.host] = ev

    def _on_link(self, ev: Event) -> None:
        assert isinstance(ev, ConnectionState)
        self._kept.links[ev.host] = ev.state

    def _on_state(self, ev: Event) -> None:
        assert isinstance(ev, ProfileState)
        self._kept.profiles[ev.host] = (ev.profile or "", ev.state)

    def _on_switch(self, ev: Event) -> None:
        assert isinstance(ev, ProfileSwitch)
        key = (ev.host, ev.outcome)
        self._kept.swaps[key] = self._kept.swaps.get(key, 0) + 1
        if ev.outcome == "ok":
            self._kept.profiles[ev.host] = (ev.to_profile, "serving")

    def _profile_of(self, host: str) -> str:
        return self._kept.profiles.get(host, ("", ""))[0]

    def _on_sweep(self, ev: Event) -> None:
        assert isinstance(ev, SweepStarted)
        profile = ev.profile or self._profile_of(ev.host)
        self._hosts[ev.host].started(ev.sweep_id, profile)

    def _on_level_started(self, ev: Event) -> None:
        assert isinstance(ev, LevelStarted)
        self._hosts[ev.host].level_started(ev)

    def _on_request(self, ev: Event) -> None:
        assert isinstance(ev, RequestResult)
        self._hosts[ev.host].result(ev)

    def _on_level(self, ev: LevelResult) -> None:
        sweeps = self._hosts[ev.host]
        with self._lock:
            known = sweeps.sweeps.get(ev.sweep_id)
            profile = known.profile if known is not None else self._profile_of(ev.host)
            sweeps.store(ev, profile)
        causes = sweeps.causes(ev)
        if causes:
            with self._lock:
                for cause in causes:
                    key = (ev.host, profile, cause)
                    self._kept.stragglers[key] = self._kept.stragglers.get(key, 0) + 1

    # -- the collector: per scrape, copy out then format ---------------------------------
    def snapshot(self) -> _Kept:
        """A copy of what is kept, taken under the lock (the values are immutable events and numbers)."""
        with self._lock:
            k = self._kept
            levels = [(host, sw.profile, sweep_id, lv) for host, hs in self._hosts.items()
                      for sweep_id, sw in hs.sweeps.items() for lv in sw.levels.values()]
            return _Kept(dict(k.gpus), {h: dict(s) for h, s in k.stats.items()}, dict(k.health), dict(k.links),
                         dict(k.profiles), dict(k.swaps), dict(k.stragglers), dict(k.events), levels,
                         dict(k.energy), dict(k.idle))

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        yield from gpu_families(snap.gpus)
        yield from server_families(snap)
        yield from profile_families(snap)
        yield from level_families(snap.levels)
        yield from energy_families(snap, self.rates)
        yield from counter_families(snap)


def _throttled(r: GpuReading) -> float | None:
    if r.throttle_reasons is None:
        return None
    return 1.0 if THROTTLING.intersection(r.throttle_reasons) else 0.0


def gpu_families(samples: dict[str, GpuSample]) -> Iterator[Metric]:
    """Every GPU's newest reading, one family per figure, labelled host and gpu."""
    for name, attr, factor, doc in GPU_FIELDS:
        fam = GaugeMetricFamily(name, doc, labels=["host", "gpu"])
        for host, sample in samples.items():
            for r in sample.gpus:
                value = getattr(r, attr)
                if value is not None:
                    fam.add_metric([host, str(r.index)], value * factor)
        yield fam
    fam = GaugeMetricFamily("kimitui_gpu_throttled", "1 while a clock-event reason holds the SM clock down",
                            labels=["host", "gpu"])
    stamp = GaugeMetricFamily("kimitui_gpu_sample_timestamp_seconds",
                              "wall-clock time of the host's newest GPU sample (stale when the link is down)",
                              labels=["host"])
    for host, sample in samples.items():
        stamp.add_metric([host], sample.t)
        for r in sample.gpus:
            flag = _throttled(r)
            if flag is not None:
                fam.add_metric([host, str(r.index)], flag)
    yield fam
    yield stamp


def server_families(snap: _Kept) -> Iterator[Metric]:
    """The server figures each host's followers reported, its health and its link."""
    for name, attr, doc in SERVER_FIELDS:
        fam = GaugeMetricFamily(name, doc, labels=["host"])
        for host, stats in snap.stats.items():
            if attr in stats:
                fam.add_metric([host], stats[attr])
        yield fam
    up = GaugeMetricFamily("kimitui_server_up", "1 when the newest health check passed", labels=["host"])
    took = GaugeMetricFamily("kimitui_server_health_latency_seconds",
                             "how long /health took to answer (a slow answer: the scheduler stood still)",
                             labels=["host"])
    for host, health in snap.health.items():
        up.add_metric([host], 1.0 if health.ok else 0.0)
        if health.latency_s is not None:
            took.add_metric([host], health.latency_s)
    link = GaugeMetricFamily("kimitui_link_up", "1 while the host's link is connected", labels=["host"])
    for host, state in snap.links.items():
        link.add_metric([host], 1.0 if state == "connected" else 0.0)
    yield from (up, took, link)


def profile_families(snap: _Kept) -> Iterator[Metric]:
    """What runs on each host: one series per host, replaced when the profile or its state changes."""
    info = GaugeMetricFamily("kimitui_profile_info", "the profile running on the host and its state (always 1)",
                             labels=["host", "profile", "state"])
    for host, (profile, state) in snap.profiles.items():
        info.add_metric([host, profile, state], 1.0)
    yield info


def level_families(levels: list[tuple[str, str, str, LevelResult]]) -> Iterator[Metric]:
    """Each kept sweep level's figures, labelled host, profile, sweep, level (C) and repeat."""
    scalars: list[tuple[GaugeMetricFamily, Callable[[LevelResult], float | None]]] = [
        (GaugeMetricFamily("kimitui_level_aggregate_tok_s", "output tokens / level wall time", labels=LEVEL_LABELS),
         lambda lv: lv.agg_tok_s),
        (GaugeMetricFamily("kimitui_level_steady_tok_s", "output rate at steady state", labels=LEVEL_LABELS),
         lambda lv: lv.steady_tok_s),
        (GaugeMetricFamily("kimitui_level_requests", "measured requests", labels=LEVEL_LABELS),
         lambda lv: float(lv.requests)),
        (GaugeMetricFamily("kimitui_level_requests_ok", "requests that completed", labels=LEVEL_LABELS),
         lambda lv: float(lv.ok)),
        (GaugeMetricFamily("kimitui_level_requests_failed", "requests that failed", labels=LEVEL_LABELS),
         lambda lv: float(lv.failed)),
        (GaugeMetricFamily("kimitui_level_stragglers", "stragglers found in the level", labels=LEVEL_LABELS),
         lambda lv: float(len(lv.stragglers))),
        (GaugeMetricFamily("kimitui_level_valid", "1 when the level was measured as asked (may be a peak)",
                           labels=LEVEL_LABELS), lambda lv: 1.0 if lv.valid else 0.0),
    ]
    quantiled = [(GaugeMetricFamily(name, doc, labels=[*LEVEL_LABELS, "quantile"]), attr)
                 for name, attr, doc in LEVEL_QUANTILES]
    for host, profile, sweep, lv in levels:
        labels = [host, profile, sweep, str(lv.concurrency), str(lv.repeat)]
        for fam, read in scalars:
            value = read(lv)
            if value is not None:
                fam.add_metric(labels, value)
        for qfam, attr in quantiled:
            pct = getattr(lv, attr)
            for q, slot in QUANTILES:
                value = getattr(pct, slot)
                if value is not None:
                    qfam.add_metric([*labels, q], value)
    yield from (fam for fam, _ in scalars)
    yield from (fam for fam, _ in quantiled)


ENERGY_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("kimitui_level_power_watts", "mean_w", "all GPUs' mean power over the level's aggregate window"),
    ("kimitui_level_power_peak_watts", "peak_w", "all GPUs' highest summed power at a sample inside the window"),
    ("kimitui_level_energy_joules", "energy_j", "all GPUs' energy over the level's aggregate window"),
    ("kimitui_level_joules_per_token", "j_per_token", "energy per output token over the aggregate window"),
    ("kimitui_level_joules_per_token_steady", "j_per_token_steady", "energy per output token over the steady window"),
    ("kimitui_level_tokens_per_kilojoule", "tokens_per_kj", "output tokens per kJ (= aggregate tok/s per kW)"),
    ("kimitui_level_marginal_joules_per_token", "marginal_j_per_token", "energy per output token above idle power"),
)
"""(metric, LevelEnergy attribute, help): a level's energy (docs/sweeps.md); a figure GPU samples did not cover
has no sample, never a zero."""


def energy_families(snap: _Kept, rates: CostRates | None = None) -> Iterator[Metric]:
    """Each kept level's energy figures (and cost, with ``rates``), labelled as its other figures; each sweep's idle
    power, labelled host, profile and sweep."""
    profiles = {(host, sweep): profile for host, profile, sweep, _ in snap.levels}
    results = {(host, sweep, lv.concurrency, lv.repeat): lv for host, _, sweep, lv in snap.levels}
    fams = [(GaugeMetricFamily(name, doc, labels=LEVEL_LABELS), attr) for name, attr, doc in ENERGY_FIELDS]
    cost = GaugeMetricFamily("kimitui_level_cost_per_million_tokens",
                             "cost per million output tokens at the configured [cost] (currency label)",
                             labels=[*LEVEL_LABELS, "currency"])
    for (host, sweep, c, rep), e in sorted(snap.energy.items()):
        labels = [host, profiles.get((host, sweep), ""), sweep, str(c), str(rep)]
        for fam, attr in fams:
            value = getattr(e, attr)
            if value is not None:
                fam.add_metric(labels, float(value))
        lv = results.get((host, sweep, c, rep))
        priced = level_cost(rates, tok_s=lv.agg_tok_s if lv is not None else None, gpus=e.gpus or None,
                            j_per_token=e.j_per_token)
        if priced is not None and priced.per_mtok is not None:
            cost.add_metric([*labels, priced.currency], priced.per_mtok)
    idle = GaugeMetricFamily("kimitui_sweep_idle_power_watts", "all GPUs' mean power before the sweep started",
                             labels=["host", "profile", "sweep"])
    for (host, sweep), w in sorted(snap.idle.items()):
        if w.mean_w is not None:
            idle.add_metric([host, profiles.get((host, sweep), ""), sweep], w.mean_w)
    yield from (fam for fam, _ in fams)
    yield cost
    yield idle


def counter_families(snap: _Kept) -> Iterator[Metric]:
    """Swaps by outcome, stragglers by cause, and the events this exporter received."""
    swaps = CounterMetricFamily("kimitui_profile_swaps", "profile swaps by outcome", labels=["host", "outcome"])
    for (host, outcome), n in snap.swaps.items():
        swaps.add_metric([host, outcome], n)
    stragglers = CounterMetricFamily("kimitui_stragglers", "stragglers by the cause they were attributed to",
                                     labels=["host", "profile", "cause"])
    for (host, profile, cause), n in snap.stragglers.items():
        stragglers.add_metric([host, profile, cause], n)
    events = CounterMetricFamily("kimitui_exporter_events", "session events this exporter received",
                                 labels=["host", "kind"])
    for (host, kind), n in snap.events.items():
        events.add_metric([host, kind], n)
    yield from (swaps, stragglers, events)
