"""What the simulator needs from a profile, resolved to concrete values.

SGLang auto-derives many knobs (``None`` in a profile); the simulator must pick
the same concrete values SGLang would on 8x 96 GB PCIe cards, so that logs and
``/server_info`` show real numbers.  This module is the one place that does it,
so the rest of ``kimitui.sim`` never deals with ``None``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kimitui.profiles import FAULTS, Profile, ProfileError, SimSettings, load_profile
from kimitui.sglang.flag_check import DEFAULT_VERSION, known_flags, refusal
from kimitui.sglang.preflight import SIM_SGLANG_ENV

FAULT_KINDS: tuple[str, ...] = FAULTS
"""The profile schema's list, so a profile's ``[sim] fault`` and ``--fault`` accept the same names:
one-shot faults, per-request faults, then episodes (kimitui/sim/episodes.py; ``mixed``: all of them in turn),
then the PD KV-transfer faults (kimitui/sim/pd.py; per request, ``fault_rate`` or 0.25 when unset)."""

DISAGG_MODES: tuple[str, ...] = ("null", "prefill", "decode")
TRANSFER_BACKENDS: tuple[str, ...] = ("mooncake", "nixl", "fake")


class SimConfigError(Exception):
    """A profile or option the simulator cannot run; the message says which."""


@dataclass(frozen=True)
class ServerSettings:
    """Concrete launch values plus the simulator's own knobs."""

    name: str = "ep8-tuned"
    model_path: str = "/root/models/Kimi-K2.6"
    served_model_name: str = "/root/models/Kimi-K2.6"
    host: str = "127.0.0.1"
    port: int = 30001
    tp_size: int = 8
    ep_size: int = 1
    dp_size: int = 1
    enable_dp_attention: bool = False
    enable_eplb: bool = False
    eplb_rebalance_num_iterations: int = 1000
    eplb_min_rebalancing_utilization_threshold: float = 1.0
    num_continuous_decode_steps: int = 1
    max_running_requests: int = 2048
    mem_fraction_static: float = 0.88
    context_length: int = 262144
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    cuda_graph_max_bs: int = 512
    """The largest decode batch captured in a CUDA graph (the profile's knob, or SGLang's auto value)."""
    cuda_graph_max_bs_given: bool = False
    """Did the profile set it (``--cuda-graph-max-bs-decode``)?  Only then does ``/server_info``'s
    ``cuda_graph_max_bs_decode`` say it, as the real one does (else None; the resolved size is in
    ``cuda_graph_config``)."""
    disable_cuda_graph: bool = False
    speculative_algorithm: str | None = None
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    enable_metrics: bool = False
    enable_mfu_metrics: bool = False
    expert_balancedness_report_mode: str = "off"
    eplb_heatmap_interval: int = 0
    """``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL`` from the profile's env: 0 = no heatmap histogram."""
    tokenizer_metrics_custom_labels_header: str = "x-custom-labels"
    tokenizer_metrics_allowed_custom_labels: tuple[str, ...] = ()
    launch_command: str = ""
    """The command line SGLang would have been started with (``/server_info``'s ``launch_command``)."""
    decode_log_interval: int = 40
    watchdog_timeout: float = 300.0
    watchdog_timeout_given: bool = False
    trust_remote_code: bool = False
    base_gpu_id: int = 0
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str | None = None
    dist_timeout: float | None = None
    """Seconds rank 0 waits for the other nodes (and they retry connecting): SGLang's ``--dist-timeout``."""
    disaggregation_mode: str = "null"
    disaggregation_bootstrap_port: int = 8998
    disaggregation_transfer_backend: str = "mooncake"
    # -- simulator only
    time_scale: float = 1.0
    seed: int = 0
    fault: str | None = None
    fault_rate: float = 0.0
    fault_after_s: float | None = None
    startup_s: float | None = None
    gpu_count: int = 8
    tuning: dict[str, float] = field(default_factory=dict)

    @property
    def speculative(self) -> bool:
        return bool(self.speculative_algorithm)

    @property
    def reports_balance(self) -> bool:
        """Is expert balance tracked at all (EP with EPLB, a balancedness report or the heatmap)?"""
        return self.ep_size > 1 and (self.enable_eplb or self.expert_balancedness_report_mode != "off"
                                     or self.eplb_heatmap_interval > 0)

    @property
    def gpus_per_node(self) -> int:
        """GPUs this process drives: ``tp_size`` is the whole model's TP, split evenly over the nodes."""
        return max(1, self.tp_size // max(1, self.nnodes))

    @property
    def local_tp_ranks(self) -> range:
        """The TP ranks this node runs (``TP8``..``TP15`` on node 1 of a TP16 two-node deployment)."""
        n = self.gpus_per_node
        return range(self.node_rank * n, (self.node_rank + 1) * n)

    @property
    def local_gpus(self) -> range:
        """The host's GPU indices this server owns: ``base_gpu_id`` onwards."""
        return range(self.base_gpu_id, self.base_gpu_id + self.gpus_per_node)

    @property
    def owns_whole_host(self) -> bool:
        """A plain single-node server from GPU 0: it writes the host's whole GPU state, as it always did."""
        return self.base_gpu_id == 0 and self.nnodes == 1 and self.disaggregation_mode == "null"

    @property
    def is_dflash(self) -> bool:
        return (self.speculative_algorithm or "").upper() == "DFLASH"

    def server_args(self) -> dict[str, Any]:
        """The ``ServerArgs`` fields SGLang would report (``server_args=`` dump, /server_info)."""
        return {
            "model_path": self.model_path,
            "tokenizer_path": self.model_path,
            "tokenizer_mode": "auto",
            "skip_tokenizer_init": False,
            "load_format": "auto",
            "trust_remote_code": self.trust_remote_code,
            "context_length": self.context_length,
            "is_embedding": False,
            "served_model_name": self.served_model_name,
            "host": self.host,
            "port": self.port,
            "mem_fraction_static": self.mem_fraction_static,
            "max_running_requests": self.max_running_requests,
            "max_total_tokens": None,
            "chunked_prefill_size": self.chunked_prefill_size,
            "max_prefill_tokens": self.max_prefill_tokens,
            "schedule_policy": "fcfs",
            "tp_size": self.tp_size,
            "pp_size": 1,
            "dp_size": self.dp_size,
            "ep_size": self.ep_size,
            "moe_dp_size": 1,
            "enable_dp_attention": self.enable_dp_attention,
            "moe_a2a_backend": "none",
            "enable_eplb": self.enable_eplb,
            "eplb_rebalance_num_iterations": self.eplb_rebalance_num_iterations,
            "eplb_min_rebalancing_utilization_threshold": self.eplb_min_rebalancing_utilization_threshold,
            "num_continuous_decode_steps": self.num_continuous_decode_steps,
            "cuda_graph_max_bs_decode": self.cuda_graph_max_bs if self.cuda_graph_max_bs_given else None,
            "disable_cuda_graph": self.disable_cuda_graph,
            "speculative_algorithm": self.speculative_algorithm,
            "speculative_num_steps": self.speculative_num_steps if self.speculative else None,
            "speculative_eagle_topk": self.speculative_eagle_topk if self.speculative else None,
            "speculative_num_draft_tokens": self.speculative_num_draft_tokens if self.speculative else None,
            "speculative_dflash_block_size": self.speculative_num_draft_tokens if self.is_dflash else None,
            "enable_metrics": self.enable_metrics,
            "enable_mfu_metrics": self.enable_mfu_metrics,
            "expert_balancedness_report_mode": self.expert_balancedness_report_mode,
            "tokenizer_metrics_custom_labels_header": self.tokenizer_metrics_custom_labels_header,
            "tokenizer_metrics_allowed_custom_labels": list(self.tokenizer_metrics_allowed_custom_labels) or None,
            "decode_log_interval": self.decode_log_interval,
            "watchdog_timeout": self.watchdog_timeout,
            "base_gpu_id": self.base_gpu_id,
            "nnodes": self.nnodes,
            "node_rank": self.node_rank,
            "dist_init_addr": self.dist_init_addr,
            "dist_timeout": self.dist_timeout,
            "disaggregation_mode": self.disaggregation_mode,
            "disaggregation_transfer_backend": self.disaggregation_transfer_backend,
            "disaggregation_bootstrap_port": self.disaggregation_bootstrap_port,
            "log_level": "info",
            "random_seed": self.seed,
        }


ProfileLike = Profile | Mapping[str, Any]
"""A loaded profile, or the same fields as a plain mapping (the tests' shorthand)."""


def _pick(profile: ProfileLike | SimSettings, name: str, default: Any) -> Any:
    """The field ``name`` (a TOML value of any kind), ``default`` when unset."""
    value = profile.get(name) if isinstance(profile, Mapping) else getattr(profile, name, None)
    return default if value is None else value


def _spec_shape(profile: ProfileLike, algorithm: str | None) -> dict[str, int]:
    """Steps, topk and draft tokens as SGLang 0.5.23 resolves them (``arg_groups/speculative_hook.py``).

    DFLASH: one step, topk 1, and the verify window is ``speculative_dflash_block_size`` (an alias of
    ``speculative_num_draft_tokens``), 16 when neither is set (``_handle_dflash``'s fallback).
    """
    if algorithm == "DFLASH":
        block = _pick(profile, "speculative_dflash_block_size", None) or _pick(profile, "speculative_num_draft_tokens", 16)
        return {"speculative_num_steps": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": int(block)}
    return {
        "speculative_num_steps": int(_pick(profile, "speculative_num_steps", 3)),
        "speculative_eagle_topk": int(_pick(profile, "speculative_eagle_topk", 1)),
        "speculative_num_draft_tokens": int(_pick(profile, "speculative_num_draft_tokens", 4)),
    }


def _env_int(profile: ProfileLike, name: str) -> int:
    """An integer environment variable from the profile's ``env`` (0 when unset or not a number)."""
    env = _pick(profile, "env", {}) or {}
    try:
        return int(str(env.get(name, "0")).strip() or 0)
    except ValueError:
        return 0


def _launch_command(profile: ProfileLike) -> str:
    """The flags a real host runs this profile with, as 0.5.23's ``/server_info`` reports them.

    0.5.23 ``server_args.py`` ``prepare_server_args`` keeps ``" ".join(argv)`` of the server's own
    arguments (no interpreter, no module; ``--watermark-config`` redacted), so this is the
    profile's flags joined by spaces, not a shell line.
    """
    if not isinstance(profile, Profile):
        return ""
    from kimitui.profiles.render import knob_args  # the one renderer, so drift compares like with like

    return " ".join(knob_args(profile))


def settings_from_profile(profile: ProfileLike, **overrides: Any) -> ServerSettings:
    """Concrete settings from a profile object (or a plain dict), SGLang's auto values filled in.

    ``overrides`` (from the command line) win over the profile's ``[sim]`` table
    and its host/port; ``None`` overrides are ignored.
    """
    sim = _pick(profile, "sim", None)
    sim_get = (lambda k, d: _pick(sim, k, d)) if sim is not None else (lambda k, d: d)
    tp = int(_pick(profile, "tp_size", 1))
    model_path = str(_pick(profile, "model_path", "/root/models/Kimi-K2.6"))
    spec = _pick(profile, "speculative_algorithm", None)
    watchdog = _pick(profile, "watchdog_timeout", None)
    values: dict[str, Any] = dict(
        name=str(_pick(profile, "name", "profile")),
        model_path=model_path,
        served_model_name=str(_pick(profile, "served_model_name", model_path)),
        host=str(_pick(profile, "host", "127.0.0.1")),
        port=int(_pick(profile, "port", 30000)),
        tp_size=tp,
        ep_size=int(_pick(profile, "ep_size", 1)),
        dp_size=int(_pick(profile, "dp_size", 1)),
        enable_dp_attention=bool(_pick(profile, "enable_dp_attention", False)),
        enable_eplb=bool(_pick(profile, "enable_eplb", False)),
        eplb_rebalance_num_iterations=int(_pick(profile, "eplb_rebalance_num_iterations", 1000)),
        eplb_min_rebalancing_utilization_threshold=float(
            _pick(profile, "eplb_min_rebalancing_utilization_threshold", 1.0)),
        num_continuous_decode_steps=int(_pick(profile, "num_continuous_decode_steps", 1)),
        mem_fraction_static=float(_pick(profile, "mem_fraction_static", 0.88)),
        context_length=int(_pick(profile, "context_length", 262144)),
        chunked_prefill_size=int(_pick(profile, "chunked_prefill_size", 8192)),
        cuda_graph_max_bs=int(_pick(profile, "cuda_graph_max_bs", 256 if tp < 4 else 512)),  # --cuda-graph-max-bs-decode
        cuda_graph_max_bs_given=_pick(profile, "cuda_graph_max_bs", None) is not None,
        disable_cuda_graph=bool(_pick(profile, "disable_cuda_graph", False)),
        speculative_algorithm=str(spec).upper() if spec else None,
        **_spec_shape(profile, str(spec).upper() if spec else None),
        enable_metrics=bool(_pick(profile, "enable_metrics", False)),
        enable_mfu_metrics=bool(_pick(profile, "enable_mfu_metrics", False)),
        expert_balancedness_report_mode=str(_pick(profile, "expert_balancedness_report_mode", "off")),
        eplb_heatmap_interval=_env_int(profile, "SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"),
        tokenizer_metrics_custom_labels_header=str(_pick(profile, "tokenizer_metrics_custom_labels_header",
                                                         "x-custom-labels")),
        tokenizer_metrics_allowed_custom_labels=tuple(
            str(v) for v in (_pick(profile, "tokenizer_metrics_allowed_custom_labels", ()) or ())),
        launch_command=_launch_command(profile),
        decode_log_interval=int(_pick(profile, "decode_log_interval", 40)),
        watchdog_timeout=float(watchdog if watchdog is not None else 300.0),
        watchdog_timeout_given=watchdog is not None,
        trust_remote_code=bool(_pick(profile, "trust_remote_code", False)),
        time_scale=float(sim_get("time_scale", 1.0)),
        seed=int(sim_get("seed", 0)),
        fault=sim_get("fault", None),
        fault_rate=float(sim_get("fault_rate", 0.0)),
        fault_after_s=sim_get("fault_after_s", None),
        startup_s=sim_get("startup_s", None),
        gpu_count=int(sim_get("gpu_count", 8)),
        tuning=dict(sim_get("tuning", {}) or {}),
    )
    values["max_prefill_tokens"] = int(_pick(profile, "max_prefill_tokens", max(16384, values["chunked_prefill_size"])))
    # SGLang's auto value, capped by what the KV pool holds (see kvcache_tokens()).
    values["max_running_requests"] = int(_pick(profile, "max_running_requests", 2048))
    for key, value in overrides.items():
        if value is not None:
            values[key] = value
    settings = ServerSettings(**values)
    if isinstance(profile, Profile):
        check_flags(profile)
    validate(settings)
    return settings


def check_flags(profile: Profile) -> None:
    """Refuse the command line the SGLang this host plays would refuse (an unknown flag, a bad choice...).

    The simulator reads its profile, not an argument list; so it parses the flags a real host would be
    started with (the one renderer) with the parser data of that version, and exits as SGLang's parser
    would, with its message.  The version: ``$KIMITUI_SIM_SGLANG``, by default 0.5.23; one kimitui
    has no data for (or ``none``) is not checked.  Every flag is checked, kimitui's typed knobs' too,
    strictly, as the real version's parser does.
    """
    from kimitui.profiles.render import knob_args  # as _launch_command: the flags a real host gets

    version = os.environ.get(SIM_SGLANG_ENV) or DEFAULT_VERSION
    flags = known_flags(version)
    if flags is None:
        return
    message = refusal(flags, knob_args(profile))
    if message:
        raise SimConfigError(message)


def validate(s: ServerSettings) -> None:
    """Refuse what SGLang itself would refuse at start-up (so the sim fails the same way)."""
    if s.fault is not None and s.fault not in FAULT_KINDS:
        raise SimConfigError(f"unknown fault {s.fault!r}; expected one of {', '.join(FAULT_KINDS)}")
    if not 0.0 <= s.fault_rate <= 1.0:
        raise SimConfigError(f"fault rate {s.fault_rate} is outside 0..1")
    if s.time_scale <= 0:
        raise SimConfigError(f"time scale must be > 0, got {s.time_scale}")
    if s.tp_size % s.ep_size:
        raise SimConfigError(f"tp_size {s.tp_size} must be divisible by ep_size {s.ep_size}")
    if s.enable_eplb and s.ep_size <= 1:
        raise SimConfigError("--enable-eplb requires ep_size > 1")
    if s.nnodes == 1 and s.base_gpu_id == 0 and s.tp_size > s.gpu_count:
        raise SimConfigError(f"tp_size {s.tp_size} needs more GPUs than the simulated host has ({s.gpu_count})")
    _validate_deployment(s)


def _validate_deployment(s: ServerSettings) -> None:
    """Multi-node and PD options, refused where SGLang would refuse them (or the simulator cannot act them)."""
    if s.nnodes < 1 or not 0 <= s.node_rank < s.nnodes:
        raise SimConfigError(f"--node-rank {s.node_rank} must be in 0..{s.nnodes - 1} (--nnodes {s.nnodes})")
    if s.nnodes > 1 and not s.dist_init_addr:
        raise SimConfigError("--nnodes > 1 needs --dist-init-addr HOST:PORT")
    if s.dist_init_addr and not s.dist_init_addr.rpartition(":")[2].isdigit():
        raise SimConfigError(f"--dist-init-addr {s.dist_init_addr!r} is not HOST:PORT")
    if s.tp_size % s.nnodes:
        raise SimConfigError(f"tp_size {s.tp_size} must be divisible by --nnodes {s.nnodes}")
    if s.base_gpu_id < 0 or s.base_gpu_id + s.gpus_per_node > s.gpu_count:
        raise SimConfigError(f"GPUs {s.base_gpu_id}..{s.base_gpu_id + s.gpus_per_node - 1} (--base-gpu-id {s.base_gpu_id}, "
                             f"{s.gpus_per_node} per node) are not all on the simulated host ({s.gpu_count} GPUs)")
    if s.disaggregation_mode not in DISAGG_MODES:
        raise SimConfigError(f"--disaggregation-mode {s.disaggregation_mode!r}: expected one of {', '.join(DISAGG_MODES)}")
    if s.disaggregation_transfer_backend not in TRANSFER_BACKENDS:
        raise SimConfigError(f"--disaggregation-transfer-backend {s.disaggregation_transfer_backend!r}: "
                             f"expected one of {', '.join(TRANSFER_BACKENDS)}")


# --------------------------------------------------------------------------- loading


def load_settings(name_or_path: str, **overrides: Any) -> ServerSettings:
    """Load a profile by name or path (``kimitui.profiles``), then resolve it for the simulator."""
    try:
        profile = load_profile(name_or_path)
    except ProfileError as exc:  # carries file, line and field
        raise SimConfigError(str(exc)) from exc
    return settings_from_profile(profile, **overrides)
