"""Every fact kimitui knows is one of these events.

Sources (GPU agent, log follower, metrics poller, sweep worker, launcher,
replayer) publish them into a :class:`kimitui.session.Session`; consumers
(recorder, analyzers, UI) subscribe.  Consumers cannot tell live events from
replayed ones, so a recording shows exactly what the operator saw.

Conventions:
- ``t`` is wall-clock seconds (``time.time()``), ``host`` the host's name.
- ``None`` means "not supported / not available", never zero.
- Events are immutable; build a new one instead of editing.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, TypeAdapter, field_serializer, field_validator



LogSeverity = Literal["debug", "info", "warning", "error", "critical"]
"""A log line's severity (SGLang's levels, lower-cased)."""
ErrorSeverity = Literal["error", "warning", "info"]
"""How loud an :class:`ErrorEvent` is: ``info`` notes a limitation, not a fault."""
SweepOutcome = Literal["completed", "stopped", "aborted", "failed"]
"""How a sweep ended (:class:`SweepResult`)."""


class Event(BaseModel):
    """Base of every event: a kind tag, a wall-clock time and a host."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    t: float = Field(default_factory=time.time)
    host: str = "sim"


# --------------------------------------------------------------------------- GPUs


class GpuStatic(BaseModel):
    """What does not change about a GPU; reported once in :class:`GpuCaps`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    uuid: str
    name: str
    memory_total_mib: float | None = None
    power_limit_w: float | None = None
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    supported: list[str] = Field(default_factory=list)
    """Names of the :class:`GpuReading` fields this GPU reports."""
    unsupported: dict[str, str] = Field(default_factory=dict)
    """Field -> why not (``not_supported``, ``no_permission``, ``function_not_found``), probed once."""


class GpuCaps(Event):
    """The agent's first frame: driver, NVML and the GPUs it found."""

    kind: Literal["gpu_caps"] = "gpu_caps"
    driver: str | None = None
    nvml_version: str | None = None
    backend: str = "pynvml"
    gpus: list[GpuStatic] = Field(default_factory=list)
    features: dict[str, str] = Field(default_factory=dict)
    """Which NVML API variant the agent uses per field group (``memory_api: memory_v1``...)."""
    cuda_version: str | None = None
    """The CUDA version the driver supports (``12.8``; NVML's ``nvmlSystemGetCudaDriverVersion_v2``)."""
    interval_s: float | None = None
    """Seconds between the agent's ticks: what a reading's history spans."""


class GpuReading(BaseModel):
    """One GPU at one tick.  ``None`` = not supported or not read this tick."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    uuid: str = ""
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pcie_tx_kbps: float | None = None
    pcie_rx_kbps: float | None = None
    throttle_reasons: list[str] | None = None
    """Active clock-event reasons by short name (``sw_power_cap``, ``hw_slowdown``...)."""
    pstate: int | None = None
    pcie_gen: int | None = None
    """The PCIe link's current generation (it may train down from ``GpuStatic.pcie_max_gen``)."""
    pcie_width: int | None = None
    """The PCIe link's current width in lanes."""


class GpuSample(Event):
    """All GPUs of a host at one agent tick (one event per tick, not per GPU)."""

    kind: Literal["gpu_sample"] = "gpu_sample"
    seq: int = 0
    host_t: float | None = None
    """The GPU host's own clock at sampling time."""
    gpus: list[GpuReading] = Field(default_factory=list)
    node: str | None = None
    """The node these GPUs are on, for a deployment over several hosts (``host`` stays its home)."""


class GpuProcess(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_index: int
    pid: int
    used_mib: float | None = None
    name: str = ""
    rank: str | None = None
    """SGLang rank from the process title, e.g. ``TP3_EP3``."""
    sm_util_pct: float | None = None
    """Per-process SM utilisation, where the driver reports it."""


class GpuProcs(Event):
    """The compute processes on each GPU (slower cadence than samples)."""

    kind: Literal["gpu_procs"] = "gpu_procs"
    procs: list[GpuProcess] = Field(default_factory=list)


class GpuEvent(Event):
    """Something that happened to one GPU: an XID, the GPU falling off the bus."""

    kind: Literal["gpu_event"] = "gpu_event"
    gpu_index: int | None = None
    event: str
    """``xid``, ``lost``, ``recovered``..."""
    detail: str = ""
    xid: int | None = None


# --------------------------------------------------------------------------- server logs


class LogLine(Event):
    """One server log line: the raw text and what the parser made of it.

    ``line_kind`` is one of the parser's kinds (``decode``, ``prefill``,
    ``startup``, ``access``, ``eplb``, ``error``, ``warning``, ``plain``...);
    ``fields`` holds the typed values (unknown keys kept as strings).
    """

    kind: Literal["log_line"] = "log_line"
    raw: str
    line_kind: str = "plain"
    severity: LogSeverity = "info"
    fields: dict[str, Any] = Field(default_factory=dict)
    source: str = ""
    """Where it came from: a journal unit or a file path."""
    cursor: str | None = None
    """Journal cursor or byte offset, so a follower can resume without loss."""
    node: str | None = None
    """Which process of a deployment printed it: ``decode-0``, ``node-1@gpu-b`` (None: a lone server)."""

    @classmethod
    def from_parser(
        cls, t: float, host: str, raw: str, line_kind: str, severity: LogSeverity, fields: dict[str, Any],
        source: str, cursor: str | None,
    ) -> LogLine:
        """The parser's line as an event without pydantic's validation (issue 33: it cost as much as the parse).

        The values are the parser's own, already of the field types, and ``fields`` is a dict made for this line
        (validation copied it); the event is the one ``LogLine(...)`` builds from the same arguments: the same
        ``__dict__`` (in field order), the same fields set, so it dumps and compares the same.
        """
        ev = _new_object(cls)
        _set_attr(ev, "__dict__", {
            "kind": "log_line", "t": t, "host": host, "raw": raw, "line_kind": line_kind, "severity": severity,
            "fields": fields, "source": source, "cursor": cursor, "node": None,
        })
        _set_fields_set(ev, _PARSER_FIELDS_SET)
        _set_extra(ev, None)
        _set_private(ev, None)
        return ev


# What ``BaseModel.model_construct`` does, bound once (:meth:`LogLine.from_parser` runs on every log line): the
# object, its ``__dict__``, and BaseModel's three other slots, set through their descriptors.
_new_object = object.__new__
_set_attr = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_PARSER_FIELDS_SET = {"t", "host", "raw", "line_kind", "severity", "fields", "source", "cursor"}
"""The fields :meth:`LogLine.from_parser` sets, one set shared by its events: nothing mutates an event's fields
set in place (an event is immutable; ``model_copy`` copies the set before it adds to it)."""


class ServerStats(Event):
    """Scheduler figures, from a Decode log line or from ``/metrics``."""

    kind: Literal["server_stats"] = "server_stats"
    source: Literal["log", "metrics", "loads"] = "metrics"
    running_reqs: float | None = None
    queued_reqs: float | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None
    cuda_graph: bool | None = None
    num_tokens: float | None = None
    cache_hit_rate: float | None = None
    retracted_reqs: float | None = None
    """Requests sent back to the queue (KV pool full) since the scheduler's previous stats
    (``sglang:num_retracted_reqs``; the log's ``KV cache pool is full. Retract requests`` lines): a
    retraction is a straggler's cause, the request prefills all over again."""
    queue_time_s: float | None = None
    """Mean seconds a request waited in the queue, over those that left it since the previous scrape
    (``sglang:queue_time_seconds``); None when none left it."""
    fwd_occupancy: float | None = None
    """How busy the forward passes kept the GPU, percent (``sglang:fwd_occupancy``; NaN there = None)."""
    utilization: float | None = None
    """The scheduler's own utilization, 0-1 (``sglang:utilization``, ``/v1/loads``)."""
    kv_used_tokens: float | None = None
    """KV-pool token slots actively used (``sglang:kv_used_tokens``; evictable radix-cached ones excluded)."""
    extra: dict[str, float] = Field(default_factory=dict)


class ServerInfo(Event):
    """What the running server says about itself (``/server_info``)."""

    kind: Literal["server_info"] = "server_info"
    url: str = ""
    version: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    drift: dict[str, list[Any]] = Field(default_factory=dict)
    """knob -> [meant, running] where the server differs from the intended profile."""


class ServerHealth(Event):
    kind: Literal["server_health"] = "server_health"
    url: str = ""
    ok: bool
    status: int | None = None
    detail: str = ""
    latency_s: float | None = None
    """How long ``/health`` took to answer: SGLang's waits until the scheduler answers a one-token generate
    (0.5.23 ``http_server.py`` ``health_generate``), so a slow answer is a scheduler that stood still."""


class ExpertLoad(Event):
    """How the routed experts loaded each GPU rank, per MoE layer, over one poll interval.

    From SGLang's ``sglang:eplb_gpu_physical_count`` histogram (0.5.23,
    ``observability/metrics_collector.py`` ``ExpertDispatchCollector``; filled by
    ``eplb/expert_distribution.py`` ``_handle_metric_eplb_heatmap`` only while
    ``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL`` > 0): one series per ``layer`` whose
    buckets are GPU ranks.  ``counts[i][g]`` is what layer ``layers[i]`` sent to GPU
    rank ``g`` since the previous ``ExpertLoad`` (a delta of the cumulative buckets),
    so a heatmap of the newest event is the newest window.
    """

    kind: Literal["expert_load"] = "expert_load"
    layers: list[int] = Field(default_factory=list)
    counts: list[list[float]] = Field(default_factory=list)
    balancedness: float | None = None
    """SGLang's balancedness of this window (per layer mean/max over GPUs, averaged over layers; 1.0 = even)."""


# --------------------------------------------------------------------------- sweeps


SweepMode = Literal["sustained", "burst", "rate"]
"""How a sweep loads a level (:mod:`kimitui.loadgen.modes` holds one object per mode); the default first."""
SWEEP_MODES: tuple[SweepMode, ...] = get_args(SweepMode)
"""Every mode, in the order a form or ``--mode`` offers them."""


SWEEP_LABELS: tuple[str, ...] = ("kimitui_sweep", "kimitui_level")
"""The custom metric labels a sweep tags its requests with (sweep id; concurrency level), where the
server allows them: SGLang's own per-request metrics then split by sweep and level."""


class SweepSpec(BaseModel):
    """Everything needed to repeat a sweep's workload (``sweep --like``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    model: str
    levels: list[int]
    mode: SweepMode = "sustained"
    max_tokens: int = 512
    ignore_eos: bool = True
    temperature: float = 0.0
    prompts: str = "seed"
    """``seed`` (the field notes' five prompts) or ``random:N`` (N-token synthetic)."""
    duration_s: float | None = None
    requests_per_level: int | None = None
    warmup_requests: int = 0
    rate_rps: float | None = None
    flush_cache: bool = False
    repeats: int = 1
    seed: int = 0
    stall_timeout_s: float | None = None
    """Give up on a stream silent this long; None (default): only ``request_timeout_s`` ends a silent stream.

    A healthy SGLang goes silent for over a minute (an EPLB rebalance held a
    request 66 s in the field notes): that is a straggler to measure, not a
    failure, so no stall limit shorter than the request's deadline by default.
    Recordings that say 60 still load and keep their limit.
    """
    request_timeout_s: float = 900.0
    """Per-request deadline (the field notes' scripts allowed 600-900 s for one request)."""
    connect_timeout_s: float = 30.0
    steady_ratio: float = 0.9
    """Steady state = the longest window with at least ``steady_ratio * C`` requests in flight."""
    max_error_rate: float = 0.5
    """Stop the sweep after a level whose failed fraction exceeds this."""
    level_time_limit_s: float | None = None
    """Stop dispatching (and cancel what is in flight) once a level has run this long."""
    stop_on_oversaturation: bool = True
    """Stop when TTFT p50 grows >= 1.5x (and >= 0.25 s) from the previous level while throughput grows < 5 %."""
    straggler_ratio: float = 0.5
    """A request decoding below ``straggler_ratio`` x the level's median decode tok/s is a straggler."""
    straggler_gap_s: float = 2.0
    """...as is one with an inter-chunk gap over max(this, 5x the level's median p99 chunk gap)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra JSON fields merged into every request body (server-specific knobs)."""
    spec_details: bool = False
    """Ask for each request's speculative figures (``"return_spec_tokens_details": true``): set when the
    server's ``/server_info`` names a speculative algorithm, never sent to a server that does not."""
    labels_header: str | None = None
    """The header SGLang reads custom metric labels from (``tokenizer_metrics_custom_labels_header``,
    default ``x-custom-labels``); None: requests are not tagged."""
    labels: list[str] = Field(default_factory=list)
    """Which of kimitui's labels (:data:`SWEEP_LABELS`) the server allows
    (``tokenizer_metrics_allowed_custom_labels``): each request carries those, as JSON in ``labels_header``."""
    workers: int = Field(default=1, ge=1)
    """Load processes sharing each level (``--workers``): for a target that streams more than one core of
    client can read (~40-55k events/s); their results are merged as one process's (docs/load-worker.md)."""

    def level_requests(self, concurrency: int) -> int | None:
        """Measured requests a level at this C gets; None when it runs for ``duration_s`` instead.

        ``requests_per_level`` if given, else C in a burst (one round) or max(2C, 5) otherwise (enough
        for a steady state).  The load process and the cockpit's ETA both ask here."""
        if self.requests_per_level is not None:
            return self.requests_per_level
        if self.duration_s is not None:
            return None
        return concurrency if self.mode == "burst" else max(2 * concurrency, 5)


class SweepStarted(Event):
    kind: Literal["sweep_started"] = "sweep_started"
    sweep_id: str
    spec: SweepSpec
    profile: str | None = None


class LevelStarted(Event):
    kind: Literal["level_started"] = "level_started"
    sweep_id: str
    concurrency: int
    repeat: int = 0


class RequestStarted(Event):
    kind: Literal["request_started"] = "request_started"
    sweep_id: str
    request_id: str
    concurrency: int
    warmup: bool = False


class InFlight(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    elapsed_s: float
    tokens: int
    tok_s: float | None = None


class SweepProgress(Event):
    """A periodic snapshot of the in-flight requests (a few per second), the same size at any C.

    ``in_flight`` lists at most ``IN_FLIGHT_DETAIL`` requests in full (the oldest and the
    slowest: where a straggler shows first); the rest are binned into ``cloud`` so a
    snapshot at C=2048 is no bigger than one at C=64.  Older recordings listed every
    request in ``in_flight`` and have no ``running`` or ``cloud``: they load as they were.
    """

    IN_FLIGHT_DETAIL: ClassVar[int] = 16
    """Requests a snapshot lists in full; the load process bins the others into ``cloud``
    (16, not 32: half the bytes of a recorded snapshot, and the cloud still draws every request)."""

    kind: Literal["sweep_progress"] = "sweep_progress"
    sweep_id: str
    concurrency: int
    done: int = 0
    failed: int = 0
    in_flight: list[InFlight] = Field(default_factory=list)
    level_tokens: int = 0
    level_elapsed_s: float = 0.0
    running: int | None = None
    """Requests in flight, listed or not; None (older recordings): ``len(in_flight)``."""
    cloud: list[tuple[float, float, int]] = Field(default_factory=list)
    """The in-flight requests not in ``in_flight`` that have a rate, binned on an (elapsed, tok/s)
    grid: (mean elapsed_s, mean tok/s, requests) per non-empty cell, for the spread chart."""

    @property
    def n_in_flight(self) -> int:
        """How many requests are in flight (``running``, else what ``in_flight`` lists)."""
        return self.running if self.running is not None else len(self.in_flight)


class SpecTokens(BaseModel):
    """One request's speculative-decoding figures, as SGLang reports them per request.

    From the response's ``sglext.spec_tokens_details`` (SGLang 0.5.23,
    ``entrypoints/openai/protocol.py`` ``SpecTokensDetails``; asked for with
    ``"return_spec_tokens_details": true``).  ``accept_length`` counts the bonus
    token (completion tokens / verify passes), so 1.0 means no draft was ever accepted.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    accept_length: float | None = None
    accept_rate: float | None = None
    """Accepted drafts / proposed drafts (0..1)."""
    verify_ct: int | None = None
    """Verify (target-model) forward passes this request took."""
    correct_drafts: int | None = None
    proposed_drafts: int | None = None
    cap_length: float | None = None
    """SGLang's ``spec_cap_length`` where the algorithm caps a block (0 / None elsewhere)."""


class RequestResult(Event):
    """One request, measured from the stream as the bytes arrived."""

    kind: Literal["request_result"] = "request_result"
    sweep_id: str
    request_id: str
    concurrency: int
    warmup: bool = False
    ok: bool
    error_class: str | None = None
    """``connect``, ``http_status``, ``timeout``, ``stall``, ``reset``, ``malformed``, ``stream_error``."""
    error: str = ""
    status: int | None = None
    intended_send: float
    """Wall-clock time the request was meant to go out."""
    sent: float
    """Wall-clock time it actually went out."""
    ttfb_s: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    tokens_from_usage: bool = False
    chunks: int = 0
    decode_tok_s: float | None = None
    e2e_tok_s: float | None = None
    tpot_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    max_gap_s: float | None = None
    max_gap_at: float | None = None
    """Wall-clock start of the largest inter-chunk gap."""
    chunk_offsets_ms: list[float] | None = None
    """Arrival of each content chunk, ms after ``sent`` (kept for replay and gap analysis)."""
    chunk_tokens: list[int] | None = None
    """Tokens carried by each content chunk (per-chunk usage); None when every chunk counted as one."""
    finish_reason: str | None = None
    spec: SpecTokens | None = None
    """Speculative decoding, per request, where the server reported it (None: not asked, or not speculative)."""

    OFFSET_STEPS_PER_MS: ClassVar[int] = 10
    """A recording keeps chunk offsets in 0.1 ms steps, as integer deltas (format 2)."""

    @field_validator("chunk_offsets_ms", mode="before")
    @classmethod
    def _read_offsets(cls, value: Any) -> Any:
        """Read the recording form ``{"per_ms": 10, "deltas": [...]}`` as well as a plain float list."""
        if not isinstance(value, dict):
            return value
        per_ms, deltas = value.get("per_ms"), value.get("deltas")
        if (set(value) != {"per_ms", "deltas"} or type(per_ms) is not int or per_ms <= 0
                or not isinstance(deltas, list) or not set(map(type, deltas)) <= {int}):
            raise ValueError('expected a list of floats or {"per_ms": <int > 0>, "deltas": [<int>, ...]}')
        # C-speed type check, running sum and division: a replay's seek re-reads thousands of these
        return list(map(per_ms.__rtruediv__, itertools.accumulate(deltas)))

    @field_serializer("chunk_offsets_ms", when_used="json")
    def _write_offsets(self, value: list[float] | None, info: SerializationInfo) -> Any:
        """In a recording (``context={"recording": True}``): integer deltas in 0.1 ms steps, a third of the bytes.

        Each offset is floored to its step, never rounded up (the rule of ``bench.client.to_result``:
        a chunk must not land after the request's end).  Offsets that are not finite or absurdly
        large stay a float list, so nothing is lost.
        """
        if value is None or not (info.context or {}).get("recording"):
            return value
        per_ms = self.OFFSET_STEPS_PER_MS
        deltas = []
        prev = 0
        for o in value:
            if not -1e12 < o < 1e12:
                return value
            k = math.floor(o * per_ms)
            if (k + 1) / per_ms <= o:  # o * per_ms fell just below a whole step
                k += 1
            elif k / per_ms > o:
                k -= 1
            deltas.append(k - prev)
            prev = k
        return {"per_ms": per_ms, "deltas": deltas}


class Percentiles(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None


class Straggler(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str
    concurrency: int
    decode_tok_s: float | None = None
    median_decode_tok_s: float | None = None
    max_gap_s: float | None = None
    gap_start: float | None = None
    gap_end: float | None = None
    reason: str = ""
    ttft_s: float | None = None
    """Set when its wait for the first token made it a straggler (a slow KV transfer, a queue, a surge)."""
    median_ttft_s: float | None = None


class ClientSummary(BaseModel):
    """The load process's own health over one level: was the client, not the server, the bottleneck?"""

    samples: int = 0
    """ClientHealth ticks (1 s each) that fell inside the level."""
    loop_lag_max_ms: float | None = None
    """Worst event-loop lag: how late a 50 ms timer fired.  Every chunk stamped then was stamped that late."""
    loop_lag_p50_ms: float | None = None
    cpu_max_pct: float | None = None
    """Busiest second of the load process, in % of one core."""
    dispatch_delay_max_p99_ms: float | None = None
    """Worst per-second p99 of (actual - intended send)."""


LevelStatus = Literal["ok", "failed", "aborted", "cut"]
"""``ok``: measured as asked; ``failed``: more of its requests failed than ``max_error_rate`` allows
(or none completed); ``aborted``: the operator (or a signal) stopped it; ``cut``: the level time
limit cancelled what was in flight.  Only ``ok`` levels are ever a peak or a verdict's evidence."""


class LevelResult(Event):
    kind: Literal["level_result"] = "level_result"
    sweep_id: str
    concurrency: int
    repeat: int = 0
    requests: int = 0
    ok: int = 0
    failed: int = 0
    failures: dict[str, int] = Field(default_factory=dict)
    wall_s: float = 0.0
    output_tokens: int = 0
    agg_tok_s: float | None = None
    """Seed-comparable: output tokens / level wall time."""
    steady_tok_s: float | None = None
    """Output rate while at least r*C requests were in flight."""
    steady_window_s: float | None = None
    ttft: Percentiles = Percentiles()
    tpot: Percentiles = Percentiles()
    itl: Percentiles = Percentiles()
    decode_tok_s: Percentiles = Percentiles()
    e2e_tok_s: Percentiles = Percentiles()
    stragglers: list[Straggler] = Field(default_factory=list)
    stopped: str | None = None
    """Why the sweep stopped at this level, if it did."""
    mode: str | None = None
    steady_start: float | None = None
    """Wall-clock bounds of the steady-state window."""
    steady_end: float | None = None
    dispatch_delay_p99_ms: float | None = None
    """Intended vs actual send, over the level's measured requests."""
    status: LevelStatus = "ok"
    status_reason: str = ""
    """Why the status is not ``ok``, in words (``all 64 requests aborted``)."""
    errors: dict[str, str] = Field(default_factory=dict)
    """The first message of each error class (``http_status``: ``HTTP 404: model 'x' not found``)."""
    prompt_tokens: Percentiles = Percentiles()
    """Prompt tokens as the server counted them (``usage.prompt_tokens``), over completed requests."""
    client: ClientSummary | None = None
    client_distorted: str | None = None
    """Set when the load process itself distorted this level's latency figures (loop lag, CPU), and why."""
    spec_accept_len: Percentiles = Percentiles()
    """Per-request speculative accept length over the level's completed requests (empty: no spec figures)."""
    spec_accept_rate: Percentiles = Percentiles()
    spec_accept_len_level: float | None = None
    """The level's accept length as SGLang's log computes it: all completion tokens / all verify passes."""
    spec_requests: int = 0
    """Completed requests that carried speculative figures."""

    @property
    def valid(self) -> bool:
        """Figures that may be a peak, a curve point or a verdict's evidence."""
        return self.status == "ok"


class SweepResult(Event):
    kind: Literal["sweep_result"] = "sweep_result"
    sweep_id: str
    levels: list[int] = Field(default_factory=list)
    outcome: SweepOutcome = "completed"
    reason: str = ""
    peak_tok_s: float | None = None


class ClientHealth(Event):
    """Is the load generator itself the bottleneck?"""

    kind: Literal["client_health"] = "client_health"
    sweep_id: str = ""
    dispatch_delay_p99_ms: float | None = None
    loop_lag_ms: float | None = None
    cpu_pct: float | None = None


# --------------------------------------------------------------------------- profiles and swaps


class SwapProgress(Event):
    """A step of a swap, for progress bars: stop, start, weights, kv_cache, graphs..."""

    kind: Literal["swap_progress"] = "swap_progress"
    profile: str
    phase: str
    fraction: float | None = None
    message: str = ""


class ProfileSwitch(Event):
    kind: Literal["profile_switch"] = "profile_switch"
    from_profile: str | None = None
    to_profile: str
    outcome: Literal["ok", "failed", "rolled_back", "rollback_failed"]
    reason: str = ""
    phases: dict[str, float] = Field(default_factory=dict)
    """phase -> seconds."""
    diff: dict[str, list[Any]] = Field(default_factory=dict)
    """knob -> [from, to]."""
    log_excerpt: list[str] = Field(default_factory=list)


class ProfileState(Event):
    """What runs on a host now: ``starting``, ``serving``, ``failed``, ``stopped``, ``rolled_back``."""

    kind: Literal["profile_state"] = "profile_state"
    profile: str | None = None
    state: Literal["unknown", "stopped", "starting", "serving", "failed", "rolled_back", "stopping"]
    detail: str = ""


class Baseline(Event):
    kind: Literal["baseline"] = "baseline"
    profile: str


# --------------------------------------------------------------------------- operator and plumbing


class Note(Event):
    kind: Literal["note"] = "note"
    text: str


class Marker(Event):
    kind: Literal["marker"] = "marker"
    label: str = ""


class TuneStepView(BaseModel):
    """One step of a tune as the cockpit's panel and a replay show it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    label: str
    profile: str | None = None
    status: str = "pending"
    """``pending``, ``running``, ``kept``, ``reverted``, ``failed``, ``skipped``."""
    phase: str = ""
    objective_change: str = ""
    cause: str = ""
    reason: str = ""


class TuneProgress(Event):
    """Where the autopilot (``kimitui tune``) stands: its plan, the step under way, each verdict so far."""

    kind: Literal["tune_progress"] = "tune_progress"
    tune_id: str
    status: str
    """``running``, ``paused``, ``finished``, ``stopped``, ``interrupted``, ``failed``."""
    start: str
    best: str
    objective: str = "peak"
    step: int | None = None
    """The step under way (an index into ``steps``); None between steps or at the end."""
    phase: str = ""
    steps: list[TuneStepView] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    note: str = ""
    elapsed_s: float = 0.0


LinkState = Literal["connecting", "connected", "lost", "reconnecting", "closed", "failed"]
"""Where a host's link is (:class:`ConnectionState`)."""


class ConnectionState(Event):
    kind: Literal["connection"] = "connection"
    state: LinkState
    detail: str = ""
    attempt: int = 0


class ErrorEvent(Event):
    """A failure a source survived: it is shown, recorded and not raised."""

    kind: Literal["error"] = "error"
    source: str
    message: str
    detail: str = ""
    severity: ErrorSeverity = "error"
    """``info``: something the operator should know once that is not a failure (vLLM's /metrics
    lacks SGLang's gauges); shown as information, not counted as an error."""


class Dropped(Event):
    """A subscriber's queue overflowed; ``count`` events were dropped for it."""

    kind: Literal["dropped"] = "dropped"
    subscriber: str
    count: int


class ReplayState(Event):
    """Where a replay stands (published by the replayer only, never recorded).

    ``t`` and ``position`` are the recording's time.  ``reset=True`` follows a
    seek: consumers drop what they hold (series, log, sweep rows) because the
    events that follow rebuild the state as of ``position``.
    """

    kind: Literal["replay_state"] = "replay_state"
    position: float
    start: float
    end: float
    speed: float | None = 1.0
    """Speed factor; None = as fast as possible."""
    playing: bool = True
    finished: bool = False
    reset: bool = False


AnyEvent = Annotated[
    Union[
        GpuCaps,
        GpuSample,
        GpuProcs,
        GpuEvent,
        LogLine,
        ServerStats,
        ServerInfo,
        ServerHealth,
        ExpertLoad,
        SweepStarted,
        LevelStarted,
        RequestStarted,
        SweepProgress,
        RequestResult,
        LevelResult,
        SweepResult,
        ClientHealth,
        SwapProgress,
        ProfileSwitch,
        ProfileState,
        Baseline,
        Note,
        Marker,
        TuneProgress,
        ConnectionState,
        ErrorEvent,
        Dropped,
        ReplayState,
    ],
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent)

EVENT_TYPES: dict[str, type[Event]] = {
    cls.model_fields["kind"].default: cls
    for cls in Event.__subclasses__()
}


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """Validate a dict or JSON text into the right event class.

    Raises ``pydantic.ValidationError`` naming the field that is wrong.
    """
    if isinstance(data, (str, bytes)):
        return EVENT_ADAPTER.validate_json(data)
    return EVENT_ADAPTER.validate_python(data)


def dump_event(event: Event) -> str:
    """One event as compact JSON (no trailing newline)."""
    return event.model_dump_json(exclude_defaults=False)
