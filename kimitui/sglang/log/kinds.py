"""The log grammar's contract: every line kind, and the fields each kind carries.

A consumer never matches a kind's name or a field's name as bare text: it asks :func:`is_kind` or
:func:`fields_if` with a :data:`LineKind`, and reads the :class:`~typing.TypedDict` it gets back, so
mypy checks both the kind (``"epbl"`` is no kind) and the field (``phse`` is no EPLB field).  Events
(:class:`kimitui.events.LogLine`) carry the kind as text, as recordings store it; these functions take
either a parsed line or an event.

Every kind may carry the :class:`LineFields` (``ts``, ``rank``, ``ranks``...).  Batch lines keep keys
they do not know (a newer SGLang's figure) as slugged extra keys beside the typed ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypedDict, cast, get_args, overload

LineKind = Literal["decode", "prefill", "startup", "access", "eplb", "error", "warning", "plain"]
LINE_KINDS: frozenset[str] = frozenset(get_args(LineKind))

StartupStep = Literal["args", "dist_init", "weights", "kv_cache", "cuda_graph", "max_tokens", "uvicorn", "ready",
                      "timings"]
EplbPhase = Literal["start", "end", "init", "skipped", "balancedness", "other"]
ProblemName = Literal["oom", "watchdog", "nccl", "kv_retract", "scheduler_exception", "sigquit", "subprocess_crash",
                      "health_check", "cuda_graph_capture", "traceback", "custom_allreduce", "memory_unbalanced",
                      "deprecated", "cache_not_flushed", "p2p", "user_warning", "python_warning", "exception",
                      "kv_transfer", "logged"]
"""What an ``error`` or ``warning`` line says went wrong (``logged``: only its level says so)."""


class LineFields(TypedDict, total=False):
    """What any line may carry: its prefix, and notes about the line itself."""

    ts: str
    """The line's own timestamp text."""
    rank: str
    """``"DP3_TP3_EP3"``: the same spelling as the scheduler's process title."""
    ranks: dict[str, int]
    """``{"dp": 3, "tp": 3, "ep": 3}``."""
    truncated: bool
    raw_chars: int
    parse_error: str
    unparsed: list[str]


class BatchFields(LineFields, total=False):
    """What Decode and Prefill lines share (``graph_backend``: ``cuda``, ``cpu``, ``npu``, ``musa``)."""

    iter: int
    running_reqs: int
    queued_reqs: int
    token_usage: float
    cuda_graph: bool
    """Whether the line's graph flag (``cuda graph``, on a CPU ``cpu graph``) is on."""
    graph_backend: str


class DecodeFields(BatchFields, total=False):
    """A ``Decode batch`` line: figures, speculative decoding's, a PD decode server's, MFU estimates."""

    num_tokens: int
    gen_throughput: float
    accept_len: float
    accept_rate: float
    cap_len: float
    block_accept_len: float
    prealloc_usage: float
    prealloc_reqs: int
    transfer_reqs: int
    host_receive_reqs: int
    retracted_reqs: int
    est_tflops: float
    est_read_gbs: float
    est_write_gbs: float
    full_tokens: int
    full_token_usage: float
    swa_tokens: int
    swa_token_usage: float
    mamba_usage: float
    gpu_tokens: int
    gpu_token_usage: float
    cpu_tokens: int
    optimistic_reqs: int
    replay_token: int


class PrefillFields(BatchFields, total=False):
    """A ``Prefill batch`` line."""

    new_seq: int
    new_token: int
    cached_token: int
    pending_token: int
    input_throughput: float
    bootstrap_reqs: int
    inflight_reqs: int


class StartupFields(LineFields, total=False):
    """A step of bringing the server up; ``ready`` is the readiness line."""

    step: StartupStep
    phase: str
    """``begin``, ``progress``, ``end`` (weights, graphs), ``plan``, ``pool``, ``listening``, ``process``, ``startup``."""
    progress: float | None
    i: int
    n: int
    """A progress bar's done and total (shards loaded; CUDA graphs captured, whose ``bs`` or ``num_tokens``
    names the graph just captured): ``progress`` is ``i / n``."""
    elapsed_s: float
    args: dict[str, Any]
    """``server_args=ServerArgs(...)``'s simple values (secrets as ``***``)."""
    max_total_num_tokens: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    available_gpu_mem: float
    available_cpu_mem: float
    """What the token budget line says is left: ``available_gpu_mem`` on a GPU, ``available_cpu_mem`` on a CPU."""
    kv_tokens: int
    dtype: str
    avail_mem_gb: float
    mem_usage_gb: float
    kv_size_gb: float
    """An MLA model's (Kimi, DeepSeek) KV cache; an MHA model's is ``k_size_gb`` + ``v_size_gb``."""
    k_size_gb: float
    v_size_gb: float
    type: str
    """The model class that loaded (``LlamaForCausalLM``)."""
    quant: str
    bs: int
    num_tokens: int
    graph: str
    graph_backend: str
    batch_sizes: list[int]
    url: str | None
    pid: int | None
    timings: dict[str, float]
    """``Engine startup timings``: phase -> seconds."""


class AccessFields(LineFields, total=False):
    """A uvicorn access line."""

    client: str
    method: str
    path: str
    status: int
    http_version: str | None


class EplbFields(LineFields, total=False):
    """An ``[EPLBManager]`` or ``[Expert Balancedness]`` line; a balancedness line also carries
    ``last_<N>_average_balancedness`` for each window SGLang averages over (10, 100, 1000)."""

    phase: EplbPhase
    duration_s: float | None
    every_iters: int
    utilization: float
    threshold: float
    forward_pass_id: int
    current_pass_balancedness: float
    gpu_physical_count_sum: int


class ProblemFields(LineFields, total=False):
    """An ``error`` or ``warning`` line: what went wrong, and the details its kind names."""

    error: ProblemName
    exception: str
    """The exception's class name (``ValueError``), from a traceback's last line or a crash line."""
    retracted_reqs: int
    new_tokens_gained: int
    new_token_ratio_from: float
    new_token_ratio_to: float
    component: str
    timeout_s: float
    process: str
    pid: int
    exit_code: int
    tried_alloc: float
    tried_alloc_unit: str
    phase: str | None
    side: str
    """A failed KV transfer's side of a PD pair: ``prefill`` or ``decode``."""
    bootstrap_room: int


class LogLineLike(Protocol):
    """A parsed line or a :class:`kimitui.events.LogLine`: its kind (as text) and its fields."""

    @property
    def line_kind(self) -> str: ...

    @property
    def fields(self) -> Mapping[str, Any]: ...


def is_kind(line: LogLineLike, *kinds: LineKind) -> bool:
    """Whether ``line`` is one of ``kinds``."""
    return line.line_kind in kinds


def kind_is(kind: str, *kinds: LineKind) -> bool:
    """Whether a kind kept as text (a shown line's, a recording's) is one of ``kinds``."""
    return kind in kinds


@overload
def fields_if(line: LogLineLike, kind: Literal["decode"]) -> DecodeFields | None: ...
@overload
def fields_if(line: LogLineLike, kind: Literal["prefill"]) -> PrefillFields | None: ...
@overload
def fields_if(line: LogLineLike, kind: Literal["startup"]) -> StartupFields | None: ...
@overload
def fields_if(line: LogLineLike, kind: Literal["access"]) -> AccessFields | None: ...
@overload
def fields_if(line: LogLineLike, kind: Literal["eplb"]) -> EplbFields | None: ...
@overload
def fields_if(line: LogLineLike, kind: Literal["error", "warning"]) -> ProblemFields | None: ...
@overload
def fields_if(line: LogLineLike, kind: Literal["plain"]) -> LineFields | None: ...
def fields_if(line: LogLineLike, kind: LineKind) -> LineFields | None:
    """``line``'s fields as ``kind``'s field set when ``line`` is that kind, else None."""
    return cast(LineFields, line.fields) if line.line_kind == kind else None


def line_fields(line: LogLineLike) -> LineFields:
    """What any line carries (its timestamp text, its ranks), whatever its kind."""
    return cast(LineFields, line.fields)


def problem_fields(line: LogLineLike) -> ProblemFields | None:
    """An ``error`` or ``warning`` line's fields, else None."""
    return cast(ProblemFields, line.fields) if line.line_kind in ("error", "warning") else None
