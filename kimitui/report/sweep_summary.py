"""What a recording says about its sweeps: per sweep, the profile, its knobs, the workload and the levels.

Pure functions over events; no I/O beyond reading the recording, no Textual.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.sweep_causes import sweep_causes
from kimitui.analysis.causes.tail import LevelLoss
from kimitui.analysis.cost import CostRates, LevelCost, level_cost
from kimitui.analysis.energy import EnergyFolder, LevelEnergy, WindowPower
from kimitui.analysis.knee import CurvePoint, Knee, find_knee
from kimitui.analysis.eplb import LevelRebalances, Rebalance, RebalanceTracker, level_rebalances, rebalances_in
from kimitui.analysis.level_stats import client_limited_throughput, effective_status
from kimitui.events import (
    Event,
    LevelResult,
    LevelStarted,
    LogLine,
    Marker,
    Note,
    ProfileSwitch,
    RequestResult,
    ServerInfo,
    Straggler,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.knobs import RUNTIME_STATE, is_knob, redact
from kimitui.recording import Recording, RecordingHeader, RecordingIndex, SkippedLine
from kimitui.report.cause_evidence import cause_events, sweep_spans

VOLATILE_KNOBS = frozenset({
    "host", "port", "nccl_port", "dist_init_addr", "file_storage_path",
    "log_level", "log_level_http", "log_requests", "log_requests_level", "show_time_cost", "decode_log_interval",
    "enable_metrics", "bucket_time_to_first_token", "bucket_inter_token_latency", "bucket_e2e_request_latency",
    "crash_dump_folder", "served_model_name", "model_path", "tokenizer_path", "download_dir", "random_seed",
}) | RUNTIME_STATE
"""Server args that say where/how it runs or logs, not how fast it serves, and the server's runtime state
(:data:`kimitui.knobs.RUNTIME_STATE`): ignored when diffing knobs (so are values that are objects: status
blobs, not knobs).  Runtime state and secrets never reach ``SweepRun.knobs`` at all (:func:`launch_knobs`)."""


def launch_knobs(args: dict[str, Any]) -> dict[str, Any]:
    """A server's args as knobs: its runtime state (``status``, ``memory_usage``) and its secrets left out."""
    return {k: redact(k, v) for k, v in args.items() if is_knob(k)}


def knob_switch(sw: ProfileSwitch | None) -> ProfileSwitch | None:
    """A profile switch whose ``diff`` holds knobs only (a recording made before secrets were ``***`` too)."""
    if sw is None or not sw.diff or all(is_knob(k) for k in sw.diff):
        return sw
    return sw.model_copy(update={"diff": {k: v for k, v in sw.diff.items() if is_knob(k)}})


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


STATUS_ORDER = ("failed", "aborted", "cut", "ok")
"""Worst first: a pooled level takes its worst repeat's status."""


def level_status(lv: LevelResult, spec: SweepSpec | None = None) -> tuple[str, str]:
    """(status, reason) of one level result; a recording made before levels carried a status
    gets it derived from its counts (the sweep's own rule, :func:`kimitui.analysis.level_stats.effective_status`)."""
    return effective_status(lv, spec.max_error_rate if spec is not None else 0.5)


@dataclass
class LevelRow:
    """One concurrency level of one sweep, its repeats pooled."""

    concurrency: int
    repeats: list[LevelResult] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    """Measured (non-warmup) requests of every repeat."""
    spec: SweepSpec | None = None
    """The sweep's workload (its ``max_error_rate`` derives old recordings' status)."""
    energy: list[LevelEnergy] = field(default_factory=list)
    """Each repeat's energy figures (:mod:`kimitui.analysis.energy`), in repeat order; empty: none folded."""
    rates: CostRates | None = None
    """The configured prices (``[cost]``); None: no cost is shown."""
    gpus_hint: int | None = None
    """GPUs the server runs on when no power samples say (the knobs' ``tp_size`` x ``pp_size``)."""

    @property
    def status(self) -> str:
        """``ok`` only when every repeat is: one failed repeat makes the pooled figures suspect."""
        return min((level_status(r, self.spec)[0] for r in self.repeats), key=STATUS_ORDER.index, default="ok")

    @property
    def status_reason(self) -> str:
        bad = [(i, *level_status(r, self.spec)) for i, r in enumerate(self.repeats)]
        bad = [b for b in bad if b[1] != "ok"]
        if not bad:
            return ""
        if len(self.repeats) == 1:
            return bad[0][2]
        return "; ".join(f"repeat {i}: {st}" + (f" ({why})" if why else "") for i, st, why in bad)

    @property
    def valid(self) -> bool:
        """May be a peak, a curve point or a verdict's evidence."""
        return self.status == "ok"

    @property
    def client_distorted(self) -> str | None:
        """Why the load process distorted this level's latency figures (first repeat that says so)."""
        return next((r.client_distorted for r in self.repeats if r.client_distorted), None)

    @property
    def client_limited(self) -> bool:
        """Whether the load process held back this level's throughput in any repeat (not only its stamps)."""
        return any(client_limited_throughput(r) for r in self.repeats)

    @property
    def errors(self) -> dict[str, str]:
        """The first message per error class, over the repeats (else from the requests themselves)."""
        out: dict[str, str] = {}
        for r in self.repeats:
            for k, v in r.errors.items():
                out.setdefault(k, v)
        for q in self.requests:
            if not q.ok and q.error:
                out.setdefault(q.error_class or "unknown", q.error)
        return dict(sorted(out.items()))

    @property
    def prompt_tokens_p50(self) -> float | None:
        """Prompt tokens as the server counted them (median), else from the requests' usage."""
        value = self._pct("prompt_tokens", "p50")
        if value is not None:
            return value
        counts = sorted(q.prompt_tokens for q in self.requests if q.ok and q.prompt_tokens is not None)
        if not counts:
            return None
        mid = len(counts) // 2
        return float(counts[mid]) if len(counts) % 2 else (counts[mid - 1] + counts[mid]) / 2

    def _avg(self, attr: str) -> float | None:
        return _mean([getattr(r, attr) for r in self.repeats])

    def _pct(self, attr: str, q: str) -> float | None:
        return _mean([getattr(getattr(r, attr), q) for r in self.repeats])

    @property
    def agg_tok_s(self) -> float | None:
        return self._avg("agg_tok_s")

    @property
    def steady_tok_s(self) -> float | None:
        return self._avg("steady_tok_s")

    @property
    def n_requests(self) -> int:
        return sum(r.requests for r in self.repeats)

    @property
    def n_ok(self) -> int:
        return sum(r.ok for r in self.repeats)

    @property
    def n_failed(self) -> int:
        return sum(r.failed for r in self.repeats)

    @property
    def failures(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.repeats:
            for k, v in r.failures.items():
                out[k] = out.get(k, 0) + v
        return out

    @property
    def stragglers(self) -> list[Straggler]:
        return [s for r in self.repeats for s in r.stragglers]

    @property
    def stopped(self) -> str | None:
        return next((r.stopped for r in self.repeats if r.stopped), None)

    def _energy(self, attr: str) -> float | None:
        """The mean over repeats of an energy figure; None unless every repeat has it (a repeat the GPUs did not
        cover would tilt the mean to the others)."""
        vals = [getattr(e, attr) for e in self.energy]
        if not vals or len(vals) < len(self.repeats) or any(v is None or not math.isfinite(v) for v in vals):
            return None
        return sum(vals) / len(vals)

    @property
    def j_per_token(self) -> float | None:
        """J per output token over the seed-comparable aggregate window (repeats' mean)."""
        return self._energy("j_per_token")

    @property
    def j_per_token_steady(self) -> float | None:
        return self._energy("j_per_token_steady")

    @property
    def tokens_per_kj(self) -> float | None:
        """Aggregate tok/s per kW of all GPUs (= tokens per kJ)."""
        return self._energy("tokens_per_kj")

    @property
    def marginal_j_per_token(self) -> float | None:
        return self._energy("marginal_j_per_token")

    @property
    def mean_w(self) -> float | None:
        return self._energy("mean_w")

    @property
    def peak_w(self) -> float | None:
        vals = [e.peak_w for e in self.energy if e.peak_w is not None]
        return max(vals) if vals and len(vals) == len(self.repeats) else None

    @property
    def gpus(self) -> int | None:
        """GPUs counted: from the power samples, else the server's ``tp_size`` x ``pp_size``."""
        seen = max((e.gpus for e in self.energy), default=0)
        return seen or self.gpus_hint

    @property
    def energy_reason(self) -> str:
        """Why there are no energy figures (empty when there are)."""
        if self.j_per_token is not None:
            return ""
        if not self.energy:
            return "no GPU samples cover this level"
        return next((f"repeat {e.repeat}: {e.reason}" if len(self.repeats) > 1 else e.reason
                     for e in self.energy if e.reason), "no output tokens")

    @property
    def cost(self) -> LevelCost | None:
        """Cost per million output tokens at this level's aggregate rate; None when no price is configured."""
        return level_cost(self.rates, tok_s=self.agg_tok_s, gpus=self.gpus, j_per_token=self.j_per_token)

    @property
    def cost_per_mtok(self) -> float | None:
        cost = self.cost
        return cost.per_mtok if cost is not None else None

    def figure(self, name: str) -> float | None:
        """A named figure (see ``FIGURES`` and ``ENERGY_FIGURES`` in :mod:`kimitui.report.verdict`)."""
        if name == "agg_tok_s":
            return self.agg_tok_s
        if name == "steady_tok_s":
            return self.steady_tok_s
        if name in ("j_per_token", "tokens_per_kj", "cost_per_mtok"):
            value: float | None = getattr(self, name)
            return value
        attr, _, q = name.rpartition("_")
        return self._pct(attr, q)

    def repeat_figure(self, name: str) -> list[float | None]:
        """A figure per repeat (the noise of repeats): throughputs from the results, energy and cost per repeat."""
        if name in ("agg_tok_s", "steady_tok_s"):
            return [getattr(r, name) for r in self.repeats]
        if name in ("j_per_token", "tokens_per_kj"):
            return [getattr(e, name) for e in self.energy]
        if name == "cost_per_mtok":
            out: list[float | None] = []
            for r, e in zip(self.repeats, self.energy):
                c = level_cost(self.rates, tok_s=r.agg_tok_s, gpus=self.gpus, j_per_token=e.j_per_token)
                out.append(c.per_mtok if c is not None else None)
            return out
        return []


def count_rebalances(records: Iterable[Rebalance]) -> LevelRebalances:
    """How many rebalances, and decoding's stall in all (SGLang's ``time=``), as the level table counts them."""
    return level_rebalances(records, -math.inf, None)


@dataclass
class SweepRun:
    """One recorded sweep with everything a report or a verdict needs."""

    sweep_id: str
    spec: SweepSpec
    profile: str | None
    host: str
    started: float
    levels: dict[int, LevelRow] = field(default_factory=dict)
    outcome: str | None = None
    """``completed``/``stopped``/``aborted``/``failed``; None if the recording ends mid-sweep."""
    reason: str = ""
    knobs: dict[str, Any] | None = None
    """The server's effective args when the sweep started; None if the recording lacks them."""
    knobs_source: str = ""
    switch: ProfileSwitch | None = None
    """The last profile switch before this sweep (its ``diff`` names what changed)."""
    source: str = ""
    """The recording it came from."""
    level_starts: dict[tuple[int, int], float] = field(default_factory=dict)
    """(C, repeat) -> when that level started (its EPLB rebalances are counted from there to its result)."""
    rebalances: list[Rebalance] = field(default_factory=list)
    """The EPLB rebalances logged while this sweep ran (:mod:`kimitui.analysis.eplb`)."""
    attributions: dict[str, Attribution] = field(default_factory=dict)
    """Request id -> why that straggler was slow (:mod:`kimitui.analysis.causes`)."""
    losses: dict[tuple[int, int], LevelLoss] = field(default_factory=dict)
    """(C, repeat) -> where the level's throughput went, by cause."""
    idle: WindowPower | None = None
    """All GPUs' idle power before the sweep (:func:`kimitui.analysis.energy.idle_window`); None: not folded."""

    def set_cost(self, rates: CostRates | None) -> None:
        """Price every level with the configured ``[cost]`` (None: no cost anywhere)."""
        for row in self.levels.values():
            row.rates = rates

    @property
    def rates(self) -> CostRates | None:
        return next((row.rates for row in self.levels.values()), None)

    @property
    def has_energy(self) -> bool:
        """Whether any level has energy figures (GPU power samples covered it)."""
        return any(row.j_per_token is not None for row in self.levels.values())

    @property
    def knee(self) -> Knee:
        """The knee of this sweep's throughput-vs-concurrency curve (:mod:`kimitui.analysis.knee`)."""
        points = [CurvePoint(row.concurrency, row.agg_tok_s, row._pct("tpot", "p50"), row._pct("ttft", "p99"),
                             usable=row.valid and not row.client_limited,
                             why="" if row.valid and not row.client_limited else
                             f"C={row.concurrency} {row.status if not row.valid else 'client-limited'}")
                  for row in self.ordered_levels]
        return find_knee(points)

    def row_losses(self, row: LevelRow) -> list[LevelLoss]:
        """The losses of a level's repeats."""
        return [loss for r in row.repeats if (loss := self.losses.get((row.concurrency, r.repeat))) is not None]

    def row_loss(self, row: LevelRow) -> LevelLoss | None:
        """The worst repeat's loss (the one a reader should hear about)."""
        losses = self.row_losses(row)
        return max(losses, key=lambda x: x.loss_fraction) if losses else None

    def level_windows(self, row: LevelRow) -> list[tuple[float, float]]:
        """Each repeat's (start, end): its ``level_started`` to its result; an older recording without the
        start falls back to the result's time less its wall time (repeats of a C are not contiguous:
        a sweep runs every level, then repeats)."""
        out = []
        for r in row.repeats:
            start = self.level_starts.get((row.concurrency, r.repeat))
            if start is None or start > r.t:
                start = r.t - r.wall_s if r.wall_s > 0 else r.t
            out.append((start, r.t))
        return out

    def rebalances_of(self, row: LevelRow) -> list[Rebalance]:
        """The rebalances (not the skips) that overlapped any repeat of the level, each once."""
        hits: dict[int, Rebalance] = {}
        for start, end in self.level_windows(row):
            hits.update((id(r), r) for r in rebalances_in(self.rebalances, start, end))
        return sorted(hits.values(), key=lambda r: r.start)

    def level_rebalances(self, row: LevelRow) -> LevelRebalances:
        """How many EPLB rebalances fell in a level (its repeats pooled), and the seconds decoding stalled."""
        return count_rebalances(self.rebalances_of(row))

    @property
    def label(self) -> str:
        return f"{self.profile or 'profile not recorded'} ({self.sweep_id})"

    @property
    def ordered_levels(self) -> list[LevelRow]:
        return [self.levels[c] for c in sorted(self.levels)]

    @property
    def peak(self) -> tuple[int, float] | None:
        """(concurrency, seed-comparable aggregate) of the best ``ok`` level: a failed, aborted or
        cut level is never the peak."""
        return self.peak_among(self.levels)

    def peak_among(self, levels: Iterable[int]) -> tuple[int, float] | None:
        """The peak over some levels only (a comparison's common ones)."""
        best = [(row.agg_tok_s, c) for c in levels if (row := self.levels.get(c)) is not None
                and row.valid and row.agg_tok_s is not None]
        if not best:
            return None
        value, c = max(best)
        return c, value

    @property
    def n_requests(self) -> int:
        return sum(r.n_requests for r in self.levels.values())

    @property
    def n_stragglers(self) -> int:
        return sum(len(r.stragglers) for r in self.levels.values())


@dataclass
class RecordingSummary:
    source: str
    header: RecordingHeader
    sweeps: list[SweepRun]
    notes: list[Note] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    switches: list[ProfileSwitch] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)


REPORT_KINDS = frozenset({"server_info", "profile_switch", "sweep_started", "level_started", "level_result",
                          "request_result", "sweep_result", "note", "marker"})
"""What a report reads besides the causes' evidence (:func:`~kimitui.report.cause_evidence.cause_events`: log
lines and GPU samples near its sweeps); progress snapshots, server stats and other log lines are never parsed."""


def summarize(source: Recording | str | os.PathLike[str]) -> RecordingSummary:
    """Group a recording's events into sweeps (knobs, workload, levels, requests).

    ``skipped`` lists the unreadable lines among those a report reads (and a cut last line).
    """
    if isinstance(source, Recording):
        header, events, skipped = source.header, source.events, list(source.skipped)
        name = str(source.path) if source.path is not None else "recording"
    else:
        index = RecordingIndex.open(source)
        events = list(index.events_of(REPORT_KINDS))
        events = sorted([*events, *cause_events(index, sweep_spans(events))], key=lambda e: e.t)
        header, skipped, name = index.header, sorted(index.skipped, key=lambda s: s.line_no), str(index.path)
    return RecordingSummary(source=name, header=header, sweeps=sweeps_of(events, name),
                            notes=[e for e in events if isinstance(e, Note)],
                            markers=[e for e in events if isinstance(e, Marker)],
                            switches=[e for e in events if isinstance(e, ProfileSwitch)],
                            skipped=skipped)


def _assign_causes(runs: list[SweepRun], events: list[Event]) -> None:
    """Attribute every straggler and split every level's loss (a recording made before causes existed too)."""
    if not any(r.n_stragglers or r.levels for r in runs):
        return
    causes = sweep_causes(events)
    for run in runs:
        run.attributions = {s.request_id: a for row in run.levels.values() for s in row.stragglers
                            if (a := causes.attributions.get(s.request_id)) is not None}
        run.losses = {(c, rep): loss for (sid, c, rep), loss in causes.losses.items() if sid == run.sweep_id}


def _assign_energy(runs: Iterable[SweepRun], folder: EnergyFolder) -> None:
    """Each level's energy figures (every repeat's, in order) and each sweep's idle power."""
    folder.finish()
    for run in runs:
        run.idle = folder.idle_of(run.sweep_id)
        hint = _gpus_of(run.knobs)
        for row in run.levels.values():
            row.gpus_hint = hint
            row.energy = [e for r in row.repeats if (e := folder.level(run.sweep_id, row.concurrency, r.repeat))]


def _gpus_of(knobs: dict[str, Any] | None) -> int | None:
    """GPUs a server runs on by its args (``tp_size`` x ``pp_size``); None when they do not say."""
    if not knobs:
        return None
    tp, pp = knobs.get("tp_size"), knobs.get("pp_size") or 1
    return tp * pp if isinstance(tp, int) and isinstance(pp, int) and tp > 0 and pp > 0 else None


def _assign_rebalances(runs: list[SweepRun], records: list[Rebalance]) -> None:
    for n, run in enumerate(runs):
        end = runs[n + 1].started if n + 1 < len(runs) else None
        run.rebalances = [r for r in records if r.start >= run.started - 60 and (end is None or r.start < end)]


def sweeps_of(events: list[Event], source: str = "") -> list[SweepRun]:
    tracker = RebalanceTracker(keep=100_000)
    energy = EnergyFolder()
    runs: dict[str, SweepRun] = {}
    info: dict[str, ServerInfo] = {}
    switch: dict[str, ProfileSwitch] = {}
    run: SweepRun | None
    for ev in events:
        energy.add(ev)
        if isinstance(ev, ServerInfo):
            info[ev.host] = ev
        elif isinstance(ev, ProfileSwitch):
            switch[ev.host] = ev
            if ev.outcome != "ok":
                info.pop(ev.host, None)  # what runs now is not what the last server_info said
        elif isinstance(ev, SweepStarted):
            run = SweepRun(sweep_id=ev.sweep_id, spec=ev.spec, profile=ev.profile, host=ev.host, started=ev.t,
                           switch=knob_switch(switch.get(ev.host)), source=source)
            si = info.get(ev.host)
            if si is not None and si.args:
                run.knobs, run.knobs_source = launch_knobs(si.args), "server_info"
            if run.profile is None and run.switch is not None and run.switch.outcome == "ok":
                run.profile = run.switch.to_profile
            runs[ev.sweep_id] = run
        elif isinstance(ev, LevelResult):
            run = runs.get(ev.sweep_id)
            if run is not None:
                run.levels.setdefault(ev.concurrency, LevelRow(ev.concurrency, spec=run.spec)).repeats.append(ev)
        elif isinstance(ev, RequestResult):
            run = runs.get(ev.sweep_id)
            if run is not None and not ev.warmup:
                run.levels.setdefault(ev.concurrency, LevelRow(ev.concurrency, spec=run.spec)).requests.append(ev)
        elif isinstance(ev, SweepResult):
            run = runs.get(ev.sweep_id)
            if run is not None:
                run.outcome, run.reason = ev.outcome, ev.reason
        elif isinstance(ev, LevelStarted):
            run = runs.get(ev.sweep_id)
            if run is not None:
                run.level_starts[(ev.concurrency, ev.repeat)] = ev.t
        elif isinstance(ev, LogLine):
            tracker.feed(ev)
    for run in runs.values():  # a level with requests but no result (the recording ended mid-level)
        run.levels = {c: row for c, row in run.levels.items() if row.repeats}
    _assign_energy(runs.values(), energy)
    ordered = sorted(runs.values(), key=lambda r: r.started)
    _assign_rebalances(ordered, tracker.records)
    _assign_causes(ordered, events)
    return list(runs.values())


def pick_sweep(summary: RecordingSummary, sweep: str | None = None) -> SweepRun:
    """The sweep named ``sweep`` (an id or a profile), else the last one with results."""
    if not summary.sweeps:
        raise ValueError(f"{summary.source}: contains no sweep")
    if sweep is not None:
        for run in reversed(summary.sweeps):
            if sweep in (run.sweep_id, run.profile):
                return run
        ids = ", ".join(f"{r.sweep_id} ({r.profile})" for r in summary.sweeps)
        raise ValueError(f"{summary.source}: no sweep {sweep!r}; it has {ids}")
    with_levels = [r for r in summary.sweeps if r.levels]
    return (with_levels or summary.sweeps)[-1]


def source_name(path: str | os.PathLike[str]) -> str:
    return Path(path).name
