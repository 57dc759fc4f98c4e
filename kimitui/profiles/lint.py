"""Lint a profile against what SGLang actually does with its flags.

Facts (with their sources) are in ``shared/reference/sglang.md`` §2 and §6.
Errors are configurations SGLang refuses or that crash it; warnings are
configurations it accepts but that do not do what the operator likely means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kimitui.profiles.deploy import ProcessSpec, deployment, pd_server_profile
from kimitui.profiles.render import knob_args
from kimitui.profiles.schema import DEPLOY_FIELDS, LAUNCH_KNOBS, PD_BOOTSTRAP_PORT, Profile
from kimitui.sglang.flag_check import DEFAULT_VERSION, deprecated_flags, known_flags, unknown_flags
from kimitui.sglang.knob_names import knob_flag

Severity = Literal["error", "warning"]
Report = Callable[[str, str], None]

# Flags that SGLang removed (PR #12124, 2025-10-25; from 2025-08-01 they already raised).
REMOVED_FLAGS: dict[str, str] = {
    "--enable-ep-moe": "set ep_size to the same value as tp_size instead",
    "--enable-deepep-moe": "set moe_a2a_backend = \"deepep\" instead",
}

NO_EFFECT_CONTINUOUS = (
    "has had no effect in SGLang since late 2024: parsed but never read since PR #2095 (2024-11-19) "
    "deleted the scheduler loop that used it; deprecated: upstream has an open change deleting the flag, "
    "after which SGLang's parser refuses it (a swap's preflight then refuses this profile before anything stops)"
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
    "speculative_dflash_block_size",
)
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
"""0.5.23's built-in algorithms (``arg_groups/fields/spec.py``); others must be registered by a plugin."""
_NEEDS_DRAFT_MODEL = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DFLASH")
_EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
"""Handled by 0.5.23's ``_handle_eagle_family`` (NEXTN resolves to EAGLE first)."""
_RESETS_MAX_RUNNING = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DFLASH")
"""``_handle_eagle_family`` and ``_handle_dflash`` set max_running_requests to 48 when it is unset."""
_HEATMAP_ENV = "SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"
_EPLB_DEFAULT_ITERATIONS = 1000


@dataclass(frozen=True)
class LintIssue:
    severity: Severity
    field: str
    message: str
    no_effect: bool = False
    """The knob is set but SGLang ignores it: worth saying where a change sets it, noise on every other swap."""

    def __str__(self) -> str:
        return f"{self.severity}: {self.field}: {self.message}"


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def _typed_flags() -> dict[str, str]:
    flags = {knob_flag(k): k for k in LAUNCH_KNOBS if k not in ("extra_args", "env") and k not in DEPLOY_FIELDS}
    return {**flags, **_ALIASES}


def lint_profile(p: Profile) -> list[LintIssue]:
    """Every issue found, errors first."""
    issues: list[LintIssue] = []

    def error(field: str, message: str) -> None:
        issues.append(LintIssue("error", field, message))

    def warn(field: str, message: str) -> None:
        issues.append(LintIssue("warning", field, message))

    def no_effect(field: str, message: str) -> None:
        issues.append(LintIssue("warning", field, message, no_effect=True))

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
                no_effect(knob, "has no effect without enable_eplb")
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
        no_effect("num_continuous_decode_steps", NO_EFFECT_CONTINUOUS)
    if p.cuda_graph_max_bs is not None and p.max_running_requests is not None and not p.disable_cuda_graph:
        per_worker = p.max_running_requests // dp if dp > 1 else p.max_running_requests
        if per_worker > p.cuda_graph_max_bs:
            warn(
                "cuda_graph_max_bs",
                f"decode batches above {p.cuda_graph_max_bs} (max_running_requests allows {per_worker}) run without CUDA "
                "graphs ('cuda graph: False'), several times slower per token (sglang issue #33483)",
            )

    _lint_known_flags(p, warn)
    _lint_speculative(p, error, warn)
    _lint_observability(p, error, warn)
    _lint_deployment(p, error, warn, issues)
    return sorted(issues, key=lambda i: i.severity != "error")


def _lint_known_flags(p: Profile, warn: Report) -> None:
    """Flags of the command that SGLang 0.5.23's own parser does not know (its dumped options).

    A warning, not an error: the host may run another version; before a swap its own parser is
    asked (``kimitui/launcher/preflight_host.py``) and that answer refuses.
    """
    flags = known_flags(DEFAULT_VERSION)
    if flags is None:
        return
    typed = _typed_flags()
    for flag in unknown_flags(flags, knob_args(p)):
        index = next((i for i, a in enumerate(p.extra_args) if _flag_name(a) == flag), None)
        field = f"extra_args[{index}]" if index is not None else typed.get(flag, flag[2:].replace("-", "_"))
        said = flags.resolve(flag) or "unrecognized arguments"  # an abbreviation of several options is refused too
        warn(field, f"{flag} is not a flag of SGLang {DEFAULT_VERSION}: its parser refuses the command ({said!s}); "
             "a host running another version is asked before a swap")
    for flag, why in deprecated_flags(flags, p.extra_args):  # a typed knob's deprecation has its own rule
        index = next(i for i, a in enumerate(p.extra_args) if _flag_name(a) == flag)
        warn(f"extra_args[{index}]", f"{flag} is deprecated in SGLang {DEFAULT_VERSION}: {why}")


def _lint_speculative(p: Profile, error: Report, warn: Report) -> None:
    """The rules 0.5.23 enforces (``arg_groups/speculative_hook.py``) or documents for drafters."""
    algo = p.speculative_algorithm
    if algo is None:
        for knob in _SPEC_ONLY:
            if getattr(p, knob) is not None:
                warn(knob, "has no effect without speculative_algorithm")
        return
    if algo.upper() not in SPEC_ALGORITHMS:
        warn("speculative_algorithm", f"{algo!r} is not one of SGLang 0.5.23's built-in algorithms "
             f"({', '.join(SPEC_ALGORITHMS)}): SGLang refuses it ('Unknown speculative algorithm name') "
             "unless a plugin registers it")
    algo = algo.upper()
    if algo in _NEEDS_DRAFT_MODEL and p.speculative_draft_model_path is None and algo != "NEXTN":
        severity = error if algo == "DFLASH" else warn
        severity("speculative_draft_model_path", f"{algo} needs a draft model (SGLang: "
                 "'requires setting --speculative-draft-model-path')")
    if p.speculative_dflash_block_size is not None and algo != "DFLASH":
        warn("speculative_dflash_block_size", f"is DFLASH only; {algo} ignores it (use speculative_num_draft_tokens)")
    if algo in _RESETS_MAX_RUNNING and p.max_running_requests is None:
        warn("max_running_requests", f"unset: with {algo} SGLang resets it to 48 ('Max running requests is reset "
             "to 48 for speculative decoding'), so levels above C=48 queue")
    if algo == "DFLASH":
        _lint_dflash(p, error, warn)
    elif algo in _EAGLE_FAMILY:
        _lint_eagle(p, algo, error, warn)


def _lint_dflash(p: Profile, error: Report, warn: Report) -> None:
    """DFLASH: block size vs draft tokens, one step, topk 1, pp 1, DP attention needs the DP LM head."""
    block, drafts = p.speculative_dflash_block_size, p.speculative_num_draft_tokens
    if block is not None and drafts is not None and block != drafts:
        error("speculative_dflash_block_size", f"{block} differs from speculative_num_draft_tokens {drafts}: for "
              "DFLASH they must match (SGLang refuses to start)")
    if (p.pp_size or 1) != 1:
        error("pp_size", "DFLASH speculative decoding only supports pp_size == 1 (SGLang refuses to start)")
    if p.enable_dp_attention and (p.dp_size or 1) > 1 and "--enable-dp-lm-head" not in p.extra_args:
        error("enable_dp_attention", "DFLASH with DP attention requires --enable-dp-lm-head (SGLang refuses to "
              "start; its docs at DFLASH's landing said no DP attention at all)")
    for knob in ("speculative_num_steps", "speculative_eagle_topk"):
        value = getattr(p, knob)
        if value is not None and value != 1:
            warn(knob, f"DFLASH only supports 1; SGLang overrides {value} to 1")


def _lint_eagle(p: Profile, algo: str, error: Report, warn: Report) -> None:
    """EAGLE, EAGLE3, NEXTN (an alias of EAGLE) and STANDALONE: 0.5.23 ``_handle_eagle_family``."""
    steps, topk, drafts = p.speculative_num_steps, p.speculative_eagle_topk, p.speculative_num_draft_tokens
    if algo == "STANDALONE" and p.enable_dp_attention and (p.dp_size or 1) > 1:
        error("enable_dp_attention", "STANDALONE speculative decoding does not support DP attention "
              "(SGLang refuses to start)")
    if "--speculative-adaptive" in p.extra_args:
        return  # the adaptive controller chooses steps, topk and draft tokens itself
    if steps is None and (topk is not None or drafts is not None):
        knob = "speculative_eagle_topk" if topk is not None else "speculative_num_draft_tokens"
        error(knob, "set without speculative_num_steps: SGLang picks all three itself only when none is set, "
              "and asserts the others are unset (it refuses to start)")
    elif steps is not None and topk is None:
        error("speculative_eagle_topk", "unset while speculative_num_steps is set: SGLang compares the topk with 1 "
              "and fails on an unset one (set speculative_eagle_topk, 1 for a chain)")
    if steps is not None and topk == 1 and drafts is not None and drafts != steps + 1:
        warn("speculative_num_draft_tokens", f"{drafts} with speculative_eagle_topk 1: SGLang adjusts it to "
             f"speculative_num_steps + 1 = {steps + 1}")
    if topk is not None and topk > 1 and p.attention_backend == "trtllm_mha":
        error("speculative_eagle_topk", "trtllm_mha backend only supports topk = 1 for speculative decoding "
              "(SGLang refuses to start)")


def _heatmap_interval(p: Profile) -> tuple[int | None, bool]:
    """(``SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL`` as SGLang reads it, whether it is a plain integer).

    SGLang reads it with ``get_int_env_var``: unset or blank is None here, anything not an integer is 0 (off).
    """
    raw = p.env.get(_HEATMAP_ENV)
    if raw is None or not raw.strip():
        return None, True
    try:
        return int(raw), True
    except ValueError:
        return 0, False


def _lint_observability(p: Profile, error: Report, warn: Report) -> None:
    """Reporting knobs that would report nothing."""
    if p.tokenizer_metrics_allowed_custom_labels and p.tokenizer_metrics_custom_labels_header == "":
        error("tokenizer_metrics_custom_labels_header", "custom labels need a header (SGLang: 'Please set "
              "--tokenizer-metrics-custom-labels-header when setting --tokenizer-metrics-allowed-custom-labels')")
    if p.tokenizer_metrics_allowed_custom_labels and not p.enable_metrics:
        warn("tokenizer_metrics_allowed_custom_labels", "labels only show on /metrics: set enable_metrics")
    interval, plain = _heatmap_interval(p)
    field = f"env.{_HEATMAP_ENV}"
    if interval is not None and (not plain or interval < 0):
        warn(field, f"{p.env[_HEATMAP_ENV]!r}: SGLang reads it as {interval}, which leaves the heatmap off "
             "(an integer > 0 turns it on; 0 says off)")
    elif interval is not None and interval > 0:
        if (p.ep_size or 1) <= 1:
            warn(field, "the expert heatmap needs expert parallelism (ep_size > 1)")
        if p.expert_balancedness_report_mode in (None, "off"):
            warn(field, "SGLang fills sglang:eplb_gpu_physical_count only while expert_balancedness_report_mode "
                 "is on (the recorder that counts it is off otherwise)")
        elif not p.enable_metrics:
            warn(field, "the heatmap is a /metrics histogram (sglang:eplb_gpu_physical_count): it needs enable_metrics")
    if p.expert_balancedness_report_mode in ("prometheus", "both") and not p.enable_metrics:
        warn("expert_balancedness_report_mode", "the prometheus report needs enable_metrics")


def _lint_deployment(p: Profile, error: Report, warn: Report, issues: list[LintIssue]) -> None:
    """Several processes: each PD server's own knobs, and GPUs or ports two processes of one host would share."""
    if len(p.nodes) == 1:
        warn("nodes", "one node is a single server: nodes has no effect")
    if p.dist_init_addr is not None and len(p.nodes) < 2:
        warn("dist_init_addr", "used only with more than one node")
    if len(p.nodes) > 1 and (p.tp_size or 1) % len(p.nodes):
        error("tp_size", f"tp_size {p.tp_size or 1} must split evenly over {len(p.nodes)} nodes")
    if p.is_deployment() and p.launcher.kind == "systemd":
        warn("launcher.kind", "a deployment of several processes runs them as plain processes, not as a systemd unit")
    if p.pd is not None:
        if not p.pd.prefill or not p.pd.decode:
            missing = " and ".join(r for r in ("prefill", "decode") if not getattr(p.pd, r))
            error("pd", f"a PD deployment needs at least one prefill and one decode server: no {missing} server")
        seen = {(i.field, i.message) for i in issues}
        for role in ("prefill", "decode"):
            for n, server in enumerate(getattr(p.pd, role)):
                if role == "decode" and server.bootstrap_port is not None:
                    warn(f"pd.decode[{n}].bootstrap_port", "only a prefill server has a bootstrap port")
                for issue in lint_profile(pd_server_profile(p, server)):
                    if (issue.field, issue.message) not in seen:
                        issues.append(LintIssue(issue.severity, f"pd.{role}[{n}].{issue.field}", issue.message))
    if p.is_deployment():
        _lint_sharing(p, deployment(p), error)


def _lint_sharing(p: Profile, specs: list[ProcessSpec], error: Report) -> None:
    """Two processes on one host may share neither a GPU nor a port."""
    gpus: dict[tuple[str, int], str] = {}
    ports: dict[tuple[str, int], str] = {}
    for spec in specs:
        if spec.role.startswith("node-"):
            continue  # one node each: nothing shared on a host
        for gpu in spec.gpus:
            other = gpus.setdefault((spec.where, gpu), spec.role)
            if other != spec.role:
                error("pd", f"{spec.role} and {other} both use GPU {gpu} on {spec.where} (set base_gpu_id and tp_size "
                      "so that their GPUs do not overlap)")
        used = [spec.port] if spec.port else []
        if spec.role.startswith("prefill-") and p.pd is not None:
            server = p.pd.prefill[int(spec.role.split("-")[1])]
            used.append(server.bootstrap_port or PD_BOOTSTRAP_PORT)
        for port in used:
            other = ports.setdefault((spec.where, port), spec.role)
            if other != spec.role or used.count(port) > 1:
                error("pd", f"{spec.role} and {other} both use port {port} on {spec.where}")


def has_errors(issues: list[LintIssue]) -> bool:
    return any(i.severity == "error" for i in issues)
