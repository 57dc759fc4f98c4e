"""The Profile model: one SGLang server configuration, as typed, validated fields.

A profile is what an operator means by "EP8 tuned": the launch knobs of
``python -m sglang.launch_server`` plus how to launch it (systemd unit or plain
process) and, for the simulated host only, a ``[sim]`` table. Every knob that
SGLang auto-derives defaults to ``None`` (flag omitted, SGLang decides);
booleans default to ``False`` (SGLang's own default for all of them).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import get_args, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

# --------------------------------------------------------------------------- safe strings


def _reject_control(value: str) -> str:
    """No control characters (newline, tab, ESC, DEL, C1) or line/paragraph separators anywhere.

    Values end up in shell command lines, systemd units and the TUI; a newline in
    any of them could inject a directive or forge a log line.
    """
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in _BIDI_CONTROLS:
            raise ValueError(f"control character {ch!r} is not allowed")
    return value


# Bidirectional overrides/isolates/marks: invisible, and they reorder what the operator reads.
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


SafeStr = Annotated[str, AfterValidator(_reject_control)]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.\\@-]+$")
_USER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\$?$")

FaultName = Literal["crash_load", "oom_start", "hang", "http_500", "drop", "stall", "graph_off", "gpu_throttle",
                    "slow_gpu", "pcie_saturation", "prefill_surge", "server_unhealthy", "mixed",
                    "slow_transfer", "transfer_fail"]
FAULTS: tuple[str, ...] = get_args(FaultName)
"""The simulator's faults: one-shot, per request, then episodes (kimitui/sim/episodes.py), then the PD
KV-transfer faults (kimitui/sim/pd.py).  ``kimitui sim serve --fault`` accepts exactly these."""


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"invalid environment variable name {value!r} (letters, digits, '_'; not starting with a digit)")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


class _Strict(BaseModel):
    """Unknown keys are errors: a typo'd knob must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --------------------------------------------------------------------------- sub-tables


class LauncherSettings(_Strict):
    """How the server process is started on the host."""

    kind: Literal["systemd", "process"] = "systemd"
    unit: SafeStr = "sglang"
    """systemd unit name (``.service`` is implied)."""
    python: SafeStr = "python3"
    """Python executable; relative to ``venv/bin`` when ``venv`` is set and it has no '/'."""
    venv: SafeStr | None = None
    workdir: SafeStr | None = None
    """The folder the server runs in, for every launcher: ``cd DIR &&`` in the rendered command,
    ``WorkingDirectory=`` in a unit, the process launcher's start (a missing folder fails the start)."""
    user: SafeStr | None = None
    stop_timeout_s: int = Field(default=60, ge=1, le=3600)
    """TimeoutStopSec for the unit / grace period before SIGKILL for a process."""

    @field_validator("unit")
    @classmethod
    def _unit_name(cls, value: str) -> str:
        if value.endswith(".service"):
            value = value[: -len(".service")]
        if not value or not _UNIT_NAME.match(value):
            raise ValueError(f"invalid systemd unit name {value!r} (letters, digits, ':_.\\@-')")
        return value

    @field_validator("python", "venv", "workdir")
    @classmethod
    def _not_an_option(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.startswith("-")):
            raise ValueError(f"must be a path, not {value!r}")
        return value

    @field_validator("user")
    @classmethod
    def _user_name(cls, value: str | None) -> str | None:
        if value is not None and not _USER_NAME.match(value):
            raise ValueError(f"invalid user name {value!r}")
        return value

    @property
    def unit_file_name(self) -> str:
        return f"{self.unit}.service"

    def python_path(self) -> str:
        """The interpreter to run: ``<venv>/bin/<python>`` when a venv is set."""
        if self.venv and "/" not in self.python:
            return f"{self.venv.rstrip('/')}/bin/{self.python}"
        return self.python


class SimSettings(_Strict):
    """Read only by the simulated host (``kimitui sim serve``); ignored on real hosts."""

    time_scale: float = Field(default=1.0, gt=0)
    """The simulated clock runs this many times faster than wall time."""
    seed: int = 0
    fault: FaultName | None = None
    fault_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Per-request probability for ``http_500``/``drop``/``stall`` faults."""
    fault_after_s: float | None = Field(default=None, ge=0)
    """Simulated seconds after start (or ready, for ``hang``) when a one-shot fault fires."""
    gpu_count: int = Field(default=8, ge=1, le=64)
    gpu_name: SafeStr = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    gpu_memory_gb: float = Field(default=96.0, gt=0)
    startup_s: float | None = Field(default=None, ge=0)
    """Simulated start-up duration (weights + graphs); ``None`` = the model's own estimate."""
    tuning: dict[EnvName, float] = Field(default_factory=dict)
    """Free-form numeric overrides of the performance model (simulator-defined names)."""


class PdServer(_Strict):
    """One prefill or decode server of a PD deployment: the knobs it sets over the profile's own."""

    port: int = Field(ge=1, le=65535)
    """Where this server answers (the router reaches it there)."""
    base_gpu_id: int = Field(default=0, ge=0)
    """Its first GPU (``--base-gpu-id``): it uses ``base_gpu_id .. base_gpu_id + tp_size - 1``."""
    tp_size: int | None = Field(default=None, ge=1)
    ep_size: int | None = Field(default=None, ge=1)
    dp_size: int | None = Field(default=None, ge=1)
    mem_fraction_static: float | None = Field(default=None, gt=0.0, lt=1.0)
    max_running_requests: int | None = Field(default=None, ge=1)
    bootstrap_port: int | None = Field(default=None, ge=1, le=65535)
    """Prefill only: the KV bootstrap server's port (``--disaggregation-bootstrap-port``; SGLang's 8998)."""
    node: SafeStr | None = None
    """The configured host it runs on; unset: the deployment's home (the host the profile is swapped on)."""
    extra_args: list[SafeStr] = Field(default_factory=list)

    OVERRIDES: ClassVar[tuple[str, ...]] = ("port", "tp_size", "ep_size", "dp_size", "mem_fraction_static",
                                            "max_running_requests")
    """The profile knobs a server's own value replaces (when set)."""


PD_BOOTSTRAP_PORT = 8998
"""SGLang's default ``--disaggregation-bootstrap-port``."""


def _one_or_many(value: Any) -> Any:
    """``[pd.prefill]`` (one table) and ``[[pd.prefill]]`` (a list of them) both mean a list."""
    return [value] if isinstance(value, dict) else value


class PdSettings(_Strict):
    """Prefill/decode disaggregation: prefill server(s), decode server(s) and the router on the profile's port."""

    transfer_backend: SafeStr = "mooncake"
    """``--disaggregation-transfer-backend`` of every server (mooncake, nixl, ...)."""
    prefill: Annotated[list[PdServer], BeforeValidator(_one_or_many)] = Field(default_factory=list)
    decode: Annotated[list[PdServer], BeforeValidator(_one_or_many)] = Field(default_factory=list)
    router_args: list[SafeStr] = Field(default_factory=list)
    """Extra flags of the router (``sglang_router.launch_router``)."""


_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})$")


def _host_port(value: str) -> str:
    match = _HOST_PORT.match(value)
    if not match or not 1 <= int(match.group(2)) <= 65535:
        raise ValueError(f"must be HOST:PORT (e.g. \"gpu-a.example:20000\"), not {value!r}")
    return value


# --------------------------------------------------------------------------- the profile

# Fields that describe the profile rather than launch the server (excluded from knobs()).
META_FIELDS: frozenset[str] = frozenset({"name", "description", "extends", "key", "sim", "launcher", "source_path"})

PROFILE_KEYS: tuple[str, ...] = tuple("123456789")
"""The cockpit keys a profile can sit on."""


class Profile(_Strict):
    """One server configuration. Field names are SGLang's ``server_args`` names."""

    # -- identity
    name: SafeStr = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: SafeStr = ""
    extends: SafeStr | None = None
    key: str | None = None
    """The cockpit key (``"1"``–``"9"``) this profile sits on; never inherited (see docs/keys.md)."""

    # -- what and where
    model_path: SafeStr = Field(min_length=1)
    served_model_name: SafeStr | None = None
    tokenizer_path: SafeStr | None = None
    host: SafeStr = "127.0.0.1"
    """Bind address of the server (``--host``)."""
    port: int = Field(default=30001, ge=1, le=65535)

    # -- parallelism
    tp_size: int | None = Field(default=None, ge=1)
    ep_size: int | None = Field(default=None, ge=1)
    dp_size: int | None = Field(default=None, ge=1)
    pp_size: int | None = Field(default=None, ge=1)
    enable_dp_attention: bool = False
    moe_dense_tp_size: int | None = Field(default=None, ge=1)
    moe_a2a_backend: SafeStr | None = None
    moe_runner_backend: SafeStr | None = None
    deepep_mode: SafeStr | None = None

    # -- expert load balancing
    enable_eplb: bool = False
    eplb_algorithm: SafeStr | None = None
    eplb_rebalance_num_iterations: int | None = Field(default=None, ge=1)
    eplb_rebalance_layers_per_chunk: int | None = Field(default=None, ge=1)
    eplb_min_rebalancing_utilization_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    ep_num_redundant_experts: int | None = Field(default=None, ge=0)
    init_expert_location: SafeStr | None = None
    ep_dispatch_algorithm: SafeStr | None = None
    expert_distribution_recorder_mode: SafeStr | None = None
    expert_distribution_recorder_buffer_size: int | None = None
    enable_expert_distribution_metrics: bool = False
    """SGLang's old switch for the balancedness report (log and Prometheus); SGLang dropped the flag (0.5.18's
    parser refuses it, naming ``--expert-balancedness-report-mode``).  Accepted, and read as
    ``expert_balancedness_report_mode = "both"`` and ``expert_distribution_recorder_mode = "stat"`` where those
    are unset (the real MoE capture's flags; 0.5.23 resolves that recorder mode by itself,
    ``handle_expert_distribution_metrics``); always False once loaded, so never rendered."""
    expert_balancedness_report_mode: Literal["off", "server_log", "prometheus", "both"] | None = None
    """Where SGLang reports expert balancedness (0.5.23 ``arg_groups/fields/exec_.py``; default off)."""

    # -- scheduling and memory
    num_continuous_decode_steps: int | None = Field(default=None, ge=1)
    max_running_requests: int | None = Field(default=None, ge=1)
    mem_fraction_static: float | None = Field(default=None, gt=0.0, lt=1.0)
    context_length: int | None = Field(default=None, ge=1)
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = Field(default=None, ge=1)
    cuda_graph_max_bs: int | None = Field(default=None, ge=1)
    disable_cuda_graph: bool = False
    disable_custom_all_reduce: bool = False
    attention_backend: SafeStr | None = None
    kv_cache_dtype: SafeStr | None = None
    quantization: SafeStr | None = None
    dtype: SafeStr | None = None

    # -- speculative decoding
    speculative_algorithm: SafeStr | None = None
    speculative_draft_model_path: SafeStr | None = None
    speculative_num_steps: int | None = Field(default=None, ge=1)
    speculative_eagle_topk: int | None = Field(default=None, ge=1)
    speculative_num_draft_tokens: int | None = Field(default=None, ge=1)
    speculative_dflash_block_size: int | None = Field(default=None, ge=1)
    """DFLASH's verify window; an alias of ``speculative_num_draft_tokens`` there (0.5.23 ``_handle_dflash``)."""

    # -- observability and misc
    enable_metrics: bool = False
    enable_metrics_for_all_schedulers: bool = False
    enable_mfu_metrics: bool = False
    tokenizer_metrics_custom_labels_header: SafeStr | None = None
    """The request header SGLang reads custom metric labels from (its default: ``x-custom-labels``)."""
    tokenizer_metrics_allowed_custom_labels: list[SafeStr] | None = None
    """Custom labels SGLang accepts on its tokenizer metrics; kimitui tags sweeps with ``kimitui_sweep``/``kimitui_level``."""
    decode_log_interval: int | None = Field(default=None, ge=1)
    log_level: SafeStr | None = None
    watchdog_timeout: float | None = Field(default=None, gt=0)
    trust_remote_code: bool = False

    # -- removed from SGLang: accepted here only so that lint can say so
    enable_ep_moe: bool = False
    enable_deepep_moe: bool = False

    # -- a deployment of several processes (docs/deployments.md)
    nodes: list[Annotated[SafeStr, Field(min_length=1)]] = Field(default_factory=list)
    """Configured host names, one per node: rank i runs on ``nodes[i]``; node 0 is the home (the swapped host)."""
    dist_init_addr: Annotated[SafeStr, AfterValidator(_host_port)] | None = None
    """``HOST:PORT`` every node meets at (``--dist-init-addr``); required with more than one node."""
    pd: PdSettings | None = None
    """Prefill/decode disaggregation: the servers, and the router on ``port``."""

    # -- free-form
    extra_args: list[SafeStr] = Field(default_factory=list)
    env: dict[EnvName, SafeStr] = Field(default_factory=dict)

    # -- how to launch, and the simulated host
    launcher: LauncherSettings = Field(default_factory=LauncherSettings)
    sim: SimSettings = Field(default_factory=SimSettings)

    source_path: Path | None = Field(default=None, exclude=True)
    """The file this profile was loaded from (not part of dumps)."""

    @model_validator(mode="before")
    @classmethod
    def _old_expert_metrics_switch(cls, data: Any) -> Any:
        """``enable_expert_distribution_metrics = true`` means ``expert_balancedness_report_mode = "both"``."""
        if isinstance(data, dict) and data.get("enable_expert_distribution_metrics") is True:
            data = {**data, "enable_expert_distribution_metrics": False}
            if data.get("expert_balancedness_report_mode") is None:
                data["expert_balancedness_report_mode"] = "both"
            if data["expert_balancedness_report_mode"] != "off" and data.get("expert_distribution_recorder_mode") is None:
                # as the real MoE capture ran (0.5.18)
                data["expert_distribution_recorder_mode"] = "stat"
        return data

    @field_validator("key", mode="before")
    @classmethod
    def _profile_key(cls, value: Any) -> Any:
        """``key = 3`` and ``key = "3"`` both mean key 3; anything but 1-9 is an error."""
        if value is None:
            return None
        text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if text not in PROFILE_KEYS:
            raise ValueError(f"key must be one of 1-9 (the cockpit's profile keys), not {value!r}")
        return text

    def knobs(self) -> dict[str, Any]:
        """The launch-relevant values, in field order: what ``diff`` compares."""
        return {
            key: getattr(self, key) for key in type(self).model_fields if key not in META_FIELDS
        }

    def is_deployment(self) -> bool:
        """Several processes, launched and swapped as one: more than one node, or PD disaggregation."""
        return len(self.nodes) > 1 or self.pd is not None

    def effective_served_model_name(self) -> str:
        """What clients must send as ``model`` (SGLang falls back to the model path)."""
        return self.served_model_name or self.model_path


DEPLOY_FIELDS: frozenset[str] = frozenset({"nodes", "dist_init_addr", "pd"})
"""Knobs (diffed like the others) that shape the deployment rather than render as one server's flags."""

LAUNCH_KNOBS: tuple[str, ...] = tuple(k for k in Profile.model_fields if k not in META_FIELDS)
