"""``/metrics``: every family the real SGLang server exports, with its name, type, HELP and labels.

The families come from :data:`kimitui.sglang.metrics.FAMILIES` (read off the real 0.5.18 server's own
``/metrics``; tests/test_real_sglang_sim.py holds this output to the real text field by field).  Built
with prometheus_client on a private registry; the text is then trimmed as SGLang's multiprocess
collector writes it: no ``_created`` series, and no family without a sample.

Values: the scheduler's gauges are refreshed from its stats at scrape time; the tokenizer's histograms
and counters are observed by the HTTP handlers in wall time; the queue-time histogram as each request
leaves the queue.  A family the simulator has nothing to model for (hybrid SWA/Mamba pools, routing
keys, the grammar and pause queues, host/storage cache tiers) is exported at a constant 0, as a real
server without those features exports it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kimitui.sglang.metrics import EPLB_BALANCEDNESS, EPLB_HEATMAP, FAMILIES, SCHEDULER_LABELS, TOKENIZER_FAMILIES
from kimitui.sim.balance_report import BalanceReport
from kimitui.sim.pd import PdStats
from kimitui.sim.perf_model import GPU_TOTAL_GB
from kimitui.sim.scheduler import SchedStats

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
QUEUE_BUCKETS = (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90,
                 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)
STAGE_BUCKETS = tuple(0.001 * 1.62 ** i for i in range(30))
"""``per_stage_req_latency_seconds``: 1 ms growing by 1.62 each bucket, as the real server's."""
TOKEN_BUCKETS = (100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12500, 15000,
                 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000,
                 600000, 800000, 1e6, 1.1e6)
ROUTING_BUCKETS = (("0", "1"), ("1", "2"), ("2", "3"), ("3", "5"), ("5", "7"), ("7", "10"), ("10", "20"), ("20", "50"),
                   ("50", "100"), ("100", "200"), ("200", "+Inf"))
"""The (gt, le] rows of the routing-key gauges."""
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
STARTUP_PHASES = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
CONTENT_TYPE = CONTENT_TYPE_LATEST
KV_SPEED_BUCKETS = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)
KV_LATENCY_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
_BUCKETS: dict[str, Iterable[float]] = {
    "sglang:time_to_first_token_seconds": TTFT_BUCKETS, "sglang:inter_token_latency_seconds": ITL_BUCKETS,
    "sglang:e2e_request_latency_seconds": E2E_BUCKETS, "sglang:queue_time_seconds": QUEUE_BUCKETS,
    "sglang:per_stage_req_latency_seconds": STAGE_BUCKETS, "sglang:prompt_tokens_histogram": TOKEN_BUCKETS,
    "sglang:uncached_prompt_tokens_histogram": TOKEN_BUCKETS, "sglang:generation_tokens_histogram": TOKEN_BUCKETS,
}
_ZERO_GAUGES = ("num_grammar_queue_reqs", "num_paused_reqs", "swa_token_usage", "mamba_usage", "kv_evictable_tokens",
                "swa_available_tokens", "swa_evictable_tokens", "swa_used_tokens", "mamba_available_tokens",
                "mamba_evictable_tokens", "mamba_used_tokens", "pending_prealloc_token_usage",
                "num_unique_running_routing_keys", "num_prefill_bootstrap_queue_reqs", "num_prefill_inflight_queue_reqs",
                "num_decode_prealloc_queue_reqs", "num_decode_transfer_queue_reqs")
"""Scheduler gauges of features the simulator does not have (no radix cache, no hybrid pools, no routing
keys, no grammar or pause queues): 0, as a real server without them says.  A PD server's queues are set
from its PD state (:meth:`SimMetrics.refresh_pd`)."""
SIM_ONLY_FAMILIES = {
    "sglang:num_aborted_requests": "SGLang exports it once a request is aborted (none was in the 0.5.18 capture)",
    "sglang:spec_verify_calls": "a speculative server's verify passes: the 0.5.18 capture served without speculation",
    "sglang:kv_transfer_speed_gb_s": "a PD prefill server's KV transfers (0.5.23 disaggregation/prefill.py): the "
                                     "capture was not PD",
    "sglang:kv_transfer_latency_ms": "a PD prefill server's KV transfers (as above)",
    "sglang:num_transfer_failed_reqs": "a PD server's failed transfers (0.5.23 metrics_collector.py): not PD",
}
"""Families the simulator may export that the real capture lacks, and why (the comparison test allows them)."""


def _drop_created_and_empty(text: bytes) -> bytes:
    """As SGLang's multiprocess collector writes it: no ``_created`` series, no family without samples."""
    out: list[bytes] = []
    head: list[bytes] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(b"#"):
            if line.startswith(b"# HELP"):
                head = []
            head.append(line)
            continue
        name = line.split(b"{", 1)[0].split(b" ", 1)[0]
        if name.endswith(b"_created"):
            continue
        if head:
            out.extend(head)
            head = []
        out.append(line)
    return b"".join(out)


class SimMetrics:
    def __init__(self, model_name: str, max_total_num_tokens: int, context_len: int,
                 custom_labels: tuple[str, ...] = (), engine_type: str = "unified", *,
                 weights_gb: float = 0.0, kv_gb: float = 0.0, graph_gb: float = 0.0,
                 startup_plan: dict[str, float] | None = None, max_running_requests: int = 1) -> None:
        """The keyword arguments are what the server knows from its start (the perf model's memory and
        start-up phases, its effective max running requests: ``utilization`` = running / that)."""
        self.registry = CollectorRegistry()
        self._max_total = max_total_num_tokens
        self._max_running = max(1, max_running_requests)
        self._cpu_said = 0.0
        # 0.5.23 observability/metrics_collector.py tokenizer_metric_labels: every allowed custom label is a
        # label of every tokenizer metric, "" until a request sets it
        self.custom_labels = tuple(custom_labels)
        self._sched_labels = dict(model_name=model_name, engine_type=engine_type, tp_rank="0", pp_rank="0", moe_ep_rank="0")
        self._tok_labels = dict(model_name=model_name, engine_type=engine_type, **{k: "" for k in self.custom_labels})
        self._pid = str(os.getpid())
        self.m: dict[str, Gauge | Counter | Histogram | Summary] = {}
        for family in FAMILIES.values():
            if family.name not in (EPLB_BALANCEDNESS, EPLB_HEATMAP):
                self._register(family.name)
        r = self.registry
        self.spec_verify_calls = Counter("sglang:spec_verify_calls", "Number of speculative decoding verification calls.",
                                         [*FAMILIES["sglang:num_requests"].labels, *self.custom_labels], registry=r)
        self.num_aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.",
                                   [*FAMILIES["sglang:num_requests"].labels, *self.custom_labels], registry=r)
        self._constants(max_total_num_tokens, context_len, weights_gb, kv_gb, graph_gb, startup_plan or {})
        self._last_prompt = 0
        self._last_gen = 0
        self._last_passes = (0, 0, 0)
        self._last_busy: tuple[float, float] | None = None
        """(wall monotonic, busy seconds) at the previous scrape: fwd_occupancy is the share in between."""
        self._balancedness: Summary | None = None
        self._heatmap: Histogram | None = None
        self._heat_seen: dict[int, list[float]] = {}
        self.spec_shape: tuple[int, int] | None = None
        """(num_steps, num_draft_tokens) of a speculative server, None otherwise."""
        self._pd: _PdSeries | None = None
        self._pd_failed = 0

    # ------------------------------------------------------------------ building
    def _labelnames(self, name: str) -> list[str]:
        family = FAMILIES[name]
        labels = [lab for lab in family.labels if lab not in ("le", "pid")] if family.type == "gauge" else list(family.labels)
        if name.startswith("sglang:routing_key_"):
            labels.append("le_")  # prometheus_client reserves "le" for histograms: renamed back in render()
        if "pid" in family.labels:
            labels.append("pid")
        return labels + (list(self.custom_labels) if name in TOKENIZER_FAMILIES else [])

    def _register(self, name: str) -> None:
        family = FAMILIES[name]
        labels, r = self._labelnames(name), self.registry
        if family.type == "gauge":
            self.m[name] = Gauge(name, family.help, labels, registry=r)
        elif family.type == "counter":
            self.m[name] = Counter(name, family.help, labels, registry=r)
        elif family.type == "histogram":
            self.m[name] = Histogram(name, family.help, labels, buckets=list(_BUCKETS[name]), registry=r)
        else:
            self.m[name] = Summary(name, family.help, labels, registry=r)

    def _g(self, name: str) -> Gauge:
        metric = self.m["sglang:" + name]
        assert isinstance(metric, Gauge)
        return metric

    def _c(self, name: str) -> Counter:
        metric = self.m["sglang:" + name]
        assert isinstance(metric, Counter)
        return metric

    def _h(self, name: str) -> Histogram:
        metric = self.m["sglang:" + name]
        assert isinstance(metric, Histogram)
        return metric

    def _constants(self, max_total: int, context_len: int, weights_gb: float, kv_gb: float, graph_gb: float,
                   plan: dict[str, float]) -> None:
        """What a server knows from its start: pool sizes, memory, start-up phases; every series at 0."""
        lab = self._sched_labels
        for name, value in (("max_total_num_tokens", max_total), ("context_len", context_len), ("page_size", 1),
                            ("num_pages", max_total), ("weight_memory_usage_gb", weights_gb),
                            ("kv_cache_memory_usage_gb", kv_gb),
                            ("startup_available_gpu_memory_gb", GPU_TOTAL_GB)):  # the sim's 95.59 GB a GPU
            self._g(name).labels(**lab).set(value)
        for phase in GRAPH_PHASES:
            self._g("graph_memory_usage_gb").labels(**lab, phase=phase).set(graph_gb if phase == "decode" else 0.0)
        tok = {k: v for k, v in self._tok_labels.items()}
        graph = {"decode": plan.get("graph", 0.0), "draft_decode": plan.get("draft_graph", 0.0)}
        for phase in GRAPH_PHASES:
            self._g("startup_cuda_graph_time_seconds").labels(**tok, phase=phase).set(graph.get(phase, 0.0))
        scheduler = sum(v for k, v in plan.items() if k != "warmup")
        startup = {"load_weight": plan.get("weights", 0.0), "kv_cache_allocation": plan.get("kv", 0.0),
                   "scheduler_e2e": scheduler, "tokenizer_e2e": scheduler + plan.get("warmup", 0.0)}
        for phase in STARTUP_PHASES:
            self._g("startup_time_seconds").labels(**tok, phase=phase).set(startup[phase])
        for name in ("routing_key_running_req_count", "routing_key_all_req_count"):
            for gt, le in ROUTING_BUCKETS:
                self._g(name).labels(**lab, gt=gt, le_=le).set(0)
        self._g("routing_keys_active").set(0)
        for name in _ZERO_GAUGES:
            extra = {"pid": self._pid} if "pid" in FAMILIES["sglang:" + name].labels else {}
            self._g(name).labels(**lab, **extra).set(0)
        self._g("num_retracted_reqs").labels(**lab, pid=self._pid).set(0)
        self._g("fwd_occupancy").labels(**lab).set(math.nan)  # NaN until a window was measured, as SGLang says
        for component in ("tokenizer", "detokenizer"):
            self._c("process_cpu_seconds").labels(component=component)
        for mode in ("prefill_compute", "prefill_cache", "decode"):
            self._c("realtime_tokens").labels(**lab, mode=mode)
        for mode in ("input", "device_hit", "host_hit", "storage_hit"):
            self._c("prefill_effective_tokens").labels(**lab, mode=mode)
        for mode in ("prefill_none", "decode_none"):
            self._c("cuda_graph_passes").labels(**lab, mode=mode)
        self._c("cached_tokens").labels(**tok, cache_source="device")
        for streaming in ("false", "true"):
            for name in ("prompt_tokens", "generation_tokens", "num_requests"):
                self._c(name).labels(**tok, is_streaming=streaming)
            for name in ("time_to_first_token_seconds", "e2e_request_latency_seconds"):
                self._h(name).labels(**tok, is_streaming=streaming)
        for name in ("inter_token_latency_seconds", "prompt_tokens_histogram", "uncached_prompt_tokens_histogram",
                     "generation_tokens_histogram"):
            self._h(name).labels(**tok)
        self._h("queue_time_seconds").labels(**lab)
        for stage in ("request_process", "prefill_forward"):
            self._h("per_stage_req_latency_seconds").labels(**lab, stage=stage)

    # ------------------------------------------------------------------ PD
    def enable_pd(self) -> None:
        """0.5.23 ``observability/metrics_collector.py``'s PD transfer series (scheduler labels): the transfer
        histograms (observed on the prefill side, ``prefill.py``) and the failed transfers counter.  The PD
        queue gauges are every server's (at 0 unless PD)."""
        self._pd = _PdSeries(self.registry, list(self._sched_labels))
        self._pd.failed.labels(**self._sched_labels)  # shown at 0 from the start

    def refresh_pd(self, pd: PdStats) -> None:
        m = self._pd
        if m is None:
            return
        lab = self._sched_labels
        for name, value in (("num_prefill_bootstrap_queue_reqs", pd.bootstrap), ("num_prefill_inflight_queue_reqs", pd.inflight),
                            ("num_decode_prealloc_queue_reqs", pd.prealloc), ("num_decode_transfer_queue_reqs", pd.transfer)):
            self._g(name).labels(**lab).set(value)
        for latency_ms, speed in pd.observed:
            m.latency.labels(**lab).observe(latency_ms)
            m.speed.labels(**lab).observe(speed)
        pd.observed.clear()
        m.failed.labels(**lab).inc(pd.failed_total - self._pd_failed)
        self._pd_failed = pd.failed_total

    # ------------------------------------------------------------------ the scheduler's figures
    def refresh(self, st: SchedStats) -> None:
        lab = self._sched_labels
        g = self._g
        g("num_running_reqs").labels(**lab).set(st.running)
        g("num_queue_reqs").labels(**lab).set(st.queue)
        g("num_used_tokens").labels(**lab).set(st.kv_tokens)
        g("kv_used_tokens").labels(**lab).set(st.kv_tokens)
        g("kv_available_tokens").labels(**lab).set(max(0, self._max_total - st.kv_tokens))
        g("decode_sum_seq_lens").labels(**lab).set(st.kv_tokens)
        g("token_usage").labels(**lab).set(round(st.token_usage, 4))
        g("full_token_usage").labels(**lab).set(round(st.token_usage, 4))
        g("gen_throughput").labels(**lab).set(round(st.last_gen_throughput, 2))
        g("cache_hit_rate").labels(**lab).set(0.0)  # no radix cache in the simulator: nothing is ever a hit
        g("new_token_ratio").labels(**lab).set(round(st.new_token_ratio, 4))
        g("num_retracted_reqs").labels(**lab, pid=self._pid).set(st.retracted_reqs)
        g("utilization").labels(**lab).set(round(min(1.0, st.running / self._max_running), 4))
        g("spec_accept_length").labels(**lab).set(st.spec_accept_length)
        g("spec_accept_rate").labels(**lab).set(st.spec_accept_rate)
        if self.spec_shape is not None:
            g("spec_cap_length").labels(**lab).set(st.spec_cap_length)
            g("spec_block_accept_length").labels(**lab).set(0.0)
            g("spec_num_steps").labels(**lab).set(self.spec_shape[0])
            g("spec_num_draft_tokens").labels(**lab).set(self.spec_shape[1])
        else:
            for name in ("spec_cap_length", "spec_block_accept_length", "spec_num_steps", "spec_num_draft_tokens"):
                g(name).labels(**lab).set(0.0)
        g("is_cuda_graph").labels(**lab).set(1.0 if st.cuda_graph else 0.0)
        self._fwd_occupancy(st)
        self._c("realtime_tokens").labels(**lab, mode="prefill_compute").inc(st.prefill_tokens_total - self._last_prompt)
        self._c("prefill_effective_tokens").labels(**lab, mode="input").inc(st.prefill_tokens_total - self._last_prompt)
        self._c("realtime_tokens").labels(**lab, mode="decode").inc(st.generated_total - self._last_gen)
        self._last_prompt, self._last_gen = st.prefill_tokens_total, st.generated_total
        prefill, decode, graph = self._last_passes
        passes = self._c("cuda_graph_passes")
        passes.labels(**lab, mode="prefill_none").inc(st.prefill_passes - prefill)
        passes.labels(**lab, mode="decode_none").inc((st.decode_passes - st.decode_graph_passes) - (decode - graph))
        if st.decode_graph_passes:
            passes.labels(**lab, mode="decode_cuda_graph").inc(st.decode_graph_passes - graph)
        self._last_passes = (st.prefill_passes, st.decode_passes, st.decode_graph_passes)
        cpu = time.process_time()  # one process here plays SGLang's tokenizer (and its detokenizer, left at 0)
        self._c("process_cpu_seconds").labels(component="tokenizer").inc(max(0.0, cpu - self._cpu_said))
        self._cpu_said = max(cpu, self._cpu_said)

    def _fwd_occupancy(self, st: SchedStats) -> None:
        """The share of wall time the forward passes took since the previous scrape, in percent."""
        now = time.monotonic()
        prev, self._last_busy = self._last_busy, (now, st.busy_real_s)
        if prev is not None and now > prev[0]:
            share = (st.busy_real_s - prev[1]) / (now - prev[0])
            self._g("fwd_occupancy").labels(**self._sched_labels).set(round(min(100.0, 100.0 * share), 2))

    def queue_wait(self, seconds: float) -> None:
        """A request left the queue after ``seconds`` in it (the scheduler calls this)."""
        self._h("queue_time_seconds").labels(**self._sched_labels).observe(max(0.0, seconds))

    def labels_for(self, custom: dict[str, str] | None) -> dict[str, str]:
        """The tokenizer labels of one request: the allowed custom labels it set, "" for the others."""
        if not custom:
            return self._tok_labels
        return {**self._tok_labels, **{k: str(v) for k, v in custom.items() if k in self.custom_labels}}

    def request_done(self, prompt_tokens: int, completion_tokens: int, ttft_s: float | None, e2e_s: float,
                     chunk_gaps: list[tuple[float, int]], aborted: bool, custom: dict[str, str] | None = None,
                     verify_ct: int = 0, streaming: bool = False) -> None:
        lab = self.labels_for(custom)
        per_mode = {**lab, "is_streaming": "true" if streaming else "false"}
        if verify_ct:
            self.spec_verify_calls.labels(**per_mode).inc(verify_ct)
        self._c("prompt_tokens").labels(**per_mode).inc(prompt_tokens)
        self._c("generation_tokens").labels(**per_mode).inc(completion_tokens)
        self._c("num_requests").labels(**per_mode).inc()
        self._h("prompt_tokens_histogram").labels(**lab).observe(prompt_tokens)
        self._h("uncached_prompt_tokens_histogram").labels(**lab).observe(prompt_tokens)  # no prefix cache
        self._h("generation_tokens_histogram").labels(**lab).observe(completion_tokens)
        if aborted:
            self.num_aborted.labels(**per_mode).inc()
        if ttft_s is not None:
            self._h("time_to_first_token_seconds").labels(**per_mode).observe(ttft_s)
            self._h("per_stage_req_latency_seconds").labels(**self._sched_labels, stage="prefill_forward").observe(ttft_s)
        self._h("e2e_request_latency_seconds").labels(**per_mode).observe(e2e_s)
        itl = self._h("inter_token_latency_seconds").labels(**lab)
        for gap, n in chunk_gaps:  # each chunk's interval / its tokens, observed once per token
            for _ in range(n):
                itl.observe(gap / n)

    def http(self, endpoint: str, method: str, status: int) -> None:
        self._c("http_requests").labels(endpoint=endpoint, method=method).inc()
        self._c("http_responses").labels(endpoint=endpoint, status_code=str(status), method=method).inc()

    def http_active(self, endpoint: str, method: str, delta: int) -> None:
        """A request to ``endpoint`` began (+1) or ended (-1)."""
        self._g("http_requests_active").labels(endpoint=endpoint, method=method).inc(delta)

    def render(self, st: SchedStats, balance: BalanceReport | None = None, pd: PdStats | None = None) -> bytes:
        self.refresh(st)
        if pd is not None:
            self.refresh_pd(pd)
        if balance is not None:
            self.refresh_balance(balance)
        return _drop_created_and_empty(generate_latest(self.registry)).replace(b',le_="', b',le="')

    def refresh_balance(self, balance: BalanceReport) -> None:
        """0.5.23's expert-balance series: the Summary (``metrics_collector.py``, rank 0, when the report mode
        exports to Prometheus) and the heatmap histogram, incremented as ``eplb/expert_distribution.py``
        ``_handle_metric_eplb_heatmap`` does (a bucket per GPU rank, ``sum += count x rank``)."""
        if balance.to_prometheus:
            if self._balancedness is None:
                family = FAMILIES[EPLB_BALANCEDNESS]
                self._balancedness = Summary(family.name, family.help, [*self._sched_labels, "forward_mode"],
                                             registry=self.registry)
            summary = self._balancedness.labels(**self._sched_labels, forward_mode="decode")
            for value in balance.observed:
                summary.observe(value)
            balance.observed.clear()
        if balance.s.eplb_heatmap_interval > 0 and (balance.to_log or balance.to_prometheus):
            self._refresh_heatmap(balance)

    def _refresh_heatmap(self, balance: BalanceReport) -> None:
        if self._heatmap is None:
            family = FAMILIES[EPLB_HEATMAP]
            self._heatmap = Histogram(family.name, family.help, ["layer"], buckets=list(range(balance.routing.ep)),
                                      registry=self.registry)
        for layer, row in enumerate(balance.heatmap):
            child = self._heatmap.labels(layer=str(layer))
            seen = self._heat_seen.setdefault(layer, [0.0] * len(row))
            for rank, total in enumerate(row):
                add = total - seen[rank]
                if add > 0:
                    # SGLang writes the child's buckets directly (prometheus_client's private fields, as there)
                    child._sum.inc(add * rank)
                    child._buckets[rank].inc(add)
                    seen[rank] = total


class _PdSeries:
    """A PD server's transfer series (names, help and buckets as 0.5.23 registers them)."""

    def __init__(self, r: CollectorRegistry, sched: list[str]) -> None:
        self.speed = Histogram("sglang:kv_transfer_speed_gb_s", "Histogram of KV cache transfer speed in GB/s.", sched,
                               buckets=KV_SPEED_BUCKETS, registry=r)
        self.latency = Histogram("sglang:kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", sched,
                                 buckets=KV_LATENCY_BUCKETS, registry=r)
        self.failed = Counter("sglang:num_transfer_failed_reqs_total", "The number of transfer failed requests.", sched, registry=r)


__all__ = ["CONTENT_TYPE", "SCHEDULER_LABELS", "SIM_ONLY_FAMILIES", "SimMetrics"]
