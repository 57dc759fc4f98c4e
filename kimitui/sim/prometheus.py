"""``/metrics``: SGLang's Prometheus names, labels and buckets (reference/sglang.md section 4).

Built with prometheus_client on a private registry.  Scheduler gauges carry
``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank`` and are refreshed
from the scheduler's stats at scrape time; request-level histograms carry
``model_name, engine_type`` and are observed by the HTTP handlers in wall time.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kimitui.sim.balance_report import BalanceReport
from kimitui.sim.pd import PdStats
from kimitui.sim.scheduler import SchedStats

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
CONTENT_TYPE = CONTENT_TYPE_LATEST
KV_SPEED_BUCKETS = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)
KV_LATENCY_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


class SimMetrics:
    def __init__(self, model_name: str, max_total_num_tokens: int, context_len: int,
                 custom_labels: tuple[str, ...] = (), engine_type: str = "unified") -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        sched = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
        # 0.5.23 observability/metrics_collector.py tokenizer_metric_labels: every allowed custom label is a
        # label of every tokenizer metric, "" until a request sets it
        self.custom_labels = tuple(custom_labels)
        tok = ["model_name", "engine_type", *self.custom_labels]
        self._sched_labels = dict(model_name=model_name, engine_type=engine_type, tp_rank="0", pp_rank="0", moe_ep_rank="0")
        self._tok_labels = dict(model_name=model_name, engine_type=engine_type, **{k: "" for k in self.custom_labels})
        g = lambda name, doc: Gauge(name, doc, sched, registry=r, multiprocess_mode="mostrecent")  # noqa: E731
        self.num_running_reqs = g("sglang:num_running_reqs", "The number of running requests.")
        self.num_queue_reqs = g("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.num_used_tokens = g("sglang:num_used_tokens", "The number of used tokens.")
        self.token_usage = g("sglang:token_usage", "The token usage.")
        self.gen_throughput = g("sglang:gen_throughput", "The generation throughput (token/s).")
        self.cache_hit_rate = g("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.spec_accept_length = g("sglang:spec_accept_length", "The average acceptance length of speculative decoding.")
        self.spec_accept_rate = g("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.")
        self.spec_cap_length = g("sglang:spec_cap_length", "Mean verify window per verify step, incl the bonus slot (0 when no cap is scheduled).")
        self.spec_block_accept_length = g("sglang:spec_block_accept_length", "Mean uncapped full-block accept length per verify step.")
        self.spec_num_steps = g("sglang:spec_num_steps", "Currently active speculative_num_steps.")
        self.spec_num_draft_tokens = g("sglang:spec_num_draft_tokens", "Currently active speculative_num_draft_tokens.")
        self.spec_verify_calls = Counter("sglang:spec_verify_calls", "Number of speculative decoding verification calls.", tok, registry=r)
        self.is_cuda_graph = g("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.")
        self.max_total_num_tokens = g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV pool.")
        self.context_len = g("sglang:context_len", "The context length.")
        self.realtime_tokens = Counter("sglang:realtime_tokens", "Tokens processed, updated every iteration.", [*sched, "mode"], registry=r)
        self.prompt_tokens = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.", tok, registry=r)
        self.generation_tokens = Counter("sglang:generation_tokens", "Number of generation tokens processed.", tok, registry=r)
        self.num_requests = Counter("sglang:num_requests", "Number of requests processed.", tok, registry=r)
        self.num_aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.", tok, registry=r)
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", tok, buckets=TTFT_BUCKETS, registry=r)
        self.itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok, buckets=ITL_BUCKETS, registry=r)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", tok, buckets=E2E_BUCKETS, registry=r)
        self.http_requests = Counter("sglang:http_requests", "Total number of HTTP requests by endpoint and method", ["endpoint", "method"], registry=r)
        self.http_responses = Counter("sglang:http_responses", "Total number of HTTP responses by endpoint and status code", ["endpoint", "status_code", "method"], registry=r)
        self.max_total_num_tokens.labels(**self._sched_labels).set(max_total_num_tokens)
        self.context_len.labels(**self._sched_labels).set(context_len)
        self._last_prompt = 0
        self._last_gen = 0
        self._balancedness: Summary | None = None
        self._heatmap: Histogram | None = None
        self._heat_seen: dict[int, list[float]] = {}
        self.spec_shape: tuple[int, int] | None = None
        """(num_steps, num_draft_tokens) of a speculative server, None otherwise."""
        self._pd: _PdSeries | None = None
        self._pd_failed = 0

    def enable_pd(self) -> None:
        """0.5.23 ``observability/metrics_collector.py``'s PD disaggregation series (scheduler labels): the
        queue gauges, the transfer histograms (observed on the prefill side, ``prefill.py``) and the failed
        transfers counter.  Only a PD server gets them here (SGLang registers them on every server, at 0)."""
        self._pd = _PdSeries(self.registry, list(self._sched_labels))
        self._pd.failed.labels(**self._sched_labels)  # shown at 0 from the start

    def refresh_pd(self, pd: PdStats) -> None:
        m = self._pd
        if m is None:
            return
        lab = self._sched_labels
        for gauge, value in ((m.bootstrap, pd.bootstrap), (m.inflight, pd.inflight), (m.prealloc, pd.prealloc),
                             (m.transfer, pd.transfer)):
            gauge.labels(**lab).set(value)
        for latency_ms, speed in pd.observed:
            m.latency.labels(**lab).observe(latency_ms)
            m.speed.labels(**lab).observe(speed)
        pd.observed.clear()
        m.failed.labels(**lab).inc(pd.failed_total - self._pd_failed)
        self._pd_failed = pd.failed_total

    def refresh(self, st: SchedStats) -> None:
        lab = self._sched_labels
        self.num_running_reqs.labels(**lab).set(st.running)
        self.num_queue_reqs.labels(**lab).set(st.queue)
        self.num_used_tokens.labels(**lab).set(st.kv_tokens)
        self.token_usage.labels(**lab).set(round(st.token_usage, 4))
        self.gen_throughput.labels(**lab).set(round(st.last_gen_throughput, 2))
        self.cache_hit_rate.labels(**lab).set(0.0)
        self.spec_accept_length.labels(**lab).set(st.spec_accept_length)
        self.spec_accept_rate.labels(**lab).set(st.spec_accept_rate)
        if self.spec_shape is not None:
            self.spec_cap_length.labels(**lab).set(st.spec_cap_length)
            self.spec_block_accept_length.labels(**lab).set(0.0)
            self.spec_num_steps.labels(**lab).set(self.spec_shape[0])
            self.spec_num_draft_tokens.labels(**lab).set(self.spec_shape[1])
        self.is_cuda_graph.labels(**lab).set(1.0 if st.cuda_graph else 0.0)
        self.realtime_tokens.labels(**lab, mode="prefill_compute").inc(st.prefill_tokens_total - self._last_prompt)
        self.realtime_tokens.labels(**lab, mode="decode").inc(st.generated_total - self._last_gen)
        self._last_prompt, self._last_gen = st.prefill_tokens_total, st.generated_total

    def labels_for(self, custom: dict[str, str] | None) -> dict[str, str]:
        """The tokenizer labels of one request: the allowed custom labels it set, "" for the others."""
        if not custom:
            return self._tok_labels
        return {**self._tok_labels, **{k: str(v) for k, v in custom.items() if k in self.custom_labels}}

    def request_done(self, prompt_tokens: int, completion_tokens: int, ttft_s: float | None, e2e_s: float,
                     chunk_gaps: list[tuple[float, int]], aborted: bool, custom: dict[str, str] | None = None,
                     verify_ct: int = 0) -> None:
        lab = self.labels_for(custom)
        if verify_ct:
            self.spec_verify_calls.labels(**lab).inc(verify_ct)
        self.prompt_tokens.labels(**lab).inc(prompt_tokens)
        self.generation_tokens.labels(**lab).inc(completion_tokens)
        self.num_requests.labels(**lab).inc()
        if aborted:
            self.num_aborted.labels(**lab).inc()
        if ttft_s is not None:
            self.ttft.labels(**lab).observe(ttft_s)
        self.e2e.labels(**lab).observe(e2e_s)
        itl = self.itl.labels(**lab)
        for gap, n in chunk_gaps:  # each chunk's interval / its tokens, observed once per token
            for _ in range(n):
                itl.observe(gap / n)

    def http(self, endpoint: str, method: str, status: int) -> None:
        self.http_requests.labels(endpoint=endpoint, method=method).inc()
        self.http_responses.labels(endpoint=endpoint, status_code=str(status), method=method).inc()

    def render(self, st: SchedStats, balance: BalanceReport | None = None, pd: PdStats | None = None) -> bytes:
        self.refresh(st)
        if pd is not None:
            self.refresh_pd(pd)
        if balance is not None:
            self.refresh_balance(balance)
        return generate_latest(self.registry)

    def refresh_balance(self, balance: BalanceReport) -> None:
        """0.5.23's expert-balance series: the Summary (``metrics_collector.py``, rank 0, when the report mode
        exports to Prometheus) and the heatmap histogram, incremented as ``eplb/expert_distribution.py``
        ``_handle_metric_eplb_heatmap`` does (a bucket per GPU rank, ``sum += count x rank``)."""
        if balance.to_prometheus:
            if self._balancedness is None:
                self._balancedness = Summary("sglang:eplb_balancedness", "Balancedness of MoE in expert parallelism.",
                                             [*self._sched_labels, "forward_mode"], registry=self.registry)
            summary = self._balancedness.labels(**self._sched_labels, forward_mode="decode")
            for value in balance.observed:
                summary.observe(value)
            balance.observed.clear()
        if balance.s.eplb_heatmap_interval > 0 and (balance.to_log or balance.to_prometheus):
            self._refresh_heatmap(balance)

    def _refresh_heatmap(self, balance: BalanceReport) -> None:
        if self._heatmap is None:
            self._heatmap = Histogram("sglang:eplb_gpu_physical_count",
                                      "The selected count of physical experts on each layer and GPU rank.",
                                      ["layer"], buckets=list(range(balance.routing.ep)), registry=self.registry)
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
    """The PD series of one server (names, help and buckets as 0.5.23 registers them)."""

    def __init__(self, r: CollectorRegistry, sched: list[str]) -> None:
        def g(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, sched, registry=r, multiprocess_mode="mostrecent")

        self.bootstrap = g("sglang:num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue.")
        self.inflight = g("sglang:num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue.")
        self.prealloc = g("sglang:num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue.")
        self.transfer = g("sglang:num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue.")
        self.speed = Histogram("sglang:kv_transfer_speed_gb_s", "Histogram of KV cache transfer speed in GB/s.", sched,
                               buckets=KV_SPEED_BUCKETS, registry=r)
        self.latency = Histogram("sglang:kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", sched,
                                 buckets=KV_LATENCY_BUCKETS, registry=r)
        self.failed = Counter("sglang:num_transfer_failed_reqs_total", "The number of transfer failed requests.", sched, registry=r)
