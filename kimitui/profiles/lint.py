"""Lint a profile against what SGLang actually does with its flags.

Facts (with their sources) are in ``shared/reference/sglang.md`` §2 and §6.
Errors are configurations SGLang refuses or that crash it; warnings are
configurations it accepts but that do not do what the operator likely means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kimitui.profiles.schema import LAUNCH_KNOBS, Profile

Severity = Literal["error", "warning"]

# Flags that SGLang removed (PR #12124, 2025-10-25; from 2025-08-01 they already raised).
REMOVED_FLAGS: dict[str, str] = {
    "--enable-ep-moe": "set ep_size to the same value as tp_size instead",
    "--enable-deepep-moe": "set moe_a2a_backend = \"deepep\" instead",
}

NO_EFFECT_CONTINUOUS = (
    "has had no effect in SGLang since late 2024: parsed but never read since PR #2095 (2024-11-19) "
    "deleted the scheduler loop that used it"
)

# Flags (and argparse aliases) that a typed knob already renders.
_ALIASES: dict[str, str] = {
    "--model": "model_path",
    "--tp": "tp_size",
    "--tensor-parallel-size": "tp_size",
    "--ep": "ep_size",
    "--expert-parallel-size": "ep_size",
    "--dp": "dp_size",
    "--data-parallel-size": "dp_size",
    "--speculative-draft-model": "speculative_draft_model_path",
}

_EPLB_ONLY = (
    "eplb_algorithm",
    "eplb_rebalance_num_iterations",
    "eplb_rebalance_layers_per_chunk",
    "eplb_min_rebalancing_utilization_threshold",
)
_SPEC_ONLY = (
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)
_EPLB_DEFAULT_ITERATIONS = 1000


@dataclass(frozen=True)
class LintIssue:
    severity: Severity
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.field}: {self.message}"


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def _typed_flags() -> dict[str, str]:
    flags = {"--" + k.replace("_", "-"): k for k in LAUNCH_KNOBS if k not in ("extra_args", "env")}
    return {**flags, **_ALIASES}


def lint_profile(p: Profile) -> list[LintIssue]:
    """Every issue found, errors first."""
    issues: list[LintIssue] = []

    def error(field: str, message: str) -> None:
        issues.append(LintIssue("error", field, message))

    def warn(field: str, message: str) -> None:
        issues.append(LintIssue("warning", field, message))

    tp = p.tp_size or 1
    ep = p.ep_size or 1
    dp = p.dp_size or 1

    # -- parallelism
    if tp % ep:
        error("ep_size", f"ep_size {ep} must divide tp_size {tp} (SGLang builds MoE groups of tp_size // ep_size GPUs)")
    if p.enable_eplb and ep <= 1:
        error("enable_eplb", "enable_eplb needs ep_size > 1 (SGLang asserts it)")
    if p.moe_dense_tp_size is not None and p.moe_dense_tp_size != 1:
        error("moe_dense_tp_size", f"SGLang accepts only 1 (or unset) for moe_dense_tp_size, not {p.moe_dense_tp_size}")
    if p.enable_dp_attention:
        if tp % dp:
            error("dp_size", f"enable_dp_attention requires dp_size {dp} to divide tp_size {tp}")
        if dp == 1:
            warn("enable_dp_attention", "ignored by SGLang when dp_size is 1 (it is switched off)")
    if p.moe_a2a_backend not in (None, "none") and p.ep_size is not None and ep != tp:
        warn("ep_size", f"moe_a2a_backend {p.moe_a2a_backend!r} forces ep_size = tp_size ({tp}); ep_size {ep} is overridden")

    # -- removed flags
    for knob, flag in (("enable_ep_moe", "--enable-ep-moe"), ("enable_deepep_moe", "--enable-deepep-moe")):
        if getattr(p, knob):
            error(knob, f"{flag} was removed from SGLang (2025-10-25; it raised an error since 2025-08): {REMOVED_FLAGS[flag]}")
    typed = _typed_flags()
    for i, arg in enumerate(p.extra_args):
        flag = _flag_name(arg)
        if flag in REMOVED_FLAGS:
            error(f"extra_args[{i}]", f"{flag} was removed from SGLang (2025-10-25; it raised an error since 2025-08): {REMOVED_FLAGS[flag]}")
        elif flag in typed:
            warn(f"extra_args[{i}]", f"{flag} duplicates the knob {typed[flag]}; set the knob instead so diff and lint see it")

    # -- EPLB
    if not p.enable_eplb:
        for knob in _EPLB_ONLY:
            if getattr(p, knob) is not None:
                warn(knob, "has no effect without enable_eplb")
    else:
        iterations = p.eplb_rebalance_num_iterations or _EPLB_DEFAULT_ITERATIONS
        size = p.expert_distribution_recorder_buffer_size
        if size is not None and size > iterations:
            error(
                "expert_distribution_recorder_buffer_size",
                f"{size} exceeds eplb_rebalance_num_iterations {iterations} (EPLBManager asserts buffer <= iterations)",
            )

    # -- scheduling
    if p.num_continuous_decode_steps is not None and p.num_continuous_decode_steps != 1:
        warn("num_continuous_decode_steps", NO_EFFECT_CONTINUOUS)
    if p.cuda_graph_max_bs is not None and p.max_running_requests is not None and not p.disable_cuda_graph:
        per_worker = p.max_running_requests // dp if dp > 1 else p.max_running_requests
        if per_worker > p.cuda_graph_max_bs:
            warn(
                "cuda_graph_max_bs",
                f"decode batches above {p.cuda_graph_max_bs} (max_running_requests allows {per_worker}) run without CUDA "
                "graphs ('cuda graph: False'), several times slower per token (sglang issue #33483)",
            )

    # -- speculative decoding
    if p.speculative_algorithm is None:
        for knob in _SPEC_ONLY:
            if getattr(p, knob) is not None:
                warn(knob, "has no effect without speculative_algorithm")

    return sorted(issues, key=lambda i: i.severity != "error")


def has_errors(issues: list[LintIssue]) -> bool:
    return any(i.severity == "error" for i in issues)
