"""What SGLang 0.5.23 prints and serves about itself, read into events (fixtures from its own format strings)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, Summary, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kimitui.session import Session
from kimitui.telemetry.expert_load import ExpertWindows, balancedness
from kimitui.sglang.launch_command import parse_launch_command
from kimitui.sglang.log import parse_line, to_stats
from kimitui.telemetry.metrics_poll import MetricsPoller, server_drift, stats_from_metrics
from tests.support.simserver import start_sim

PREFIX = "[2026-12-05 10:00:00 TP0 EP0] "


def test_decode_line_with_speculation_pd_and_mfu_parts() -> None:
    """0.5.23 managers/scheduler_components/metrics_reporter.py, the Decode line: spec part (accept len, accept
    rate, cap len, block accept len), PD decode part (pre-allocated usage, #prealloc-req, #transfer-req,
    #host-receive-req, #retracted-req), then the graph flag, throughput, queue and the MFU suffix."""
    line = (PREFIX + "Decode batch, #running-req: 64, #token: 90000, token usage: 0.40, accept len: 3.24, "
            "accept rate: 0.15, cap len: 4.00, block accept len: 5.10, pre-allocated usage: 0.05, #prealloc-req: 3, "
            "#transfer-req: 2, #host-receive-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): "
            "1620.33, #queue-req: 5, est. decode TFLOPS/s (per GPU): 41.20, est. read BW (GB/s per GPU): 1210.55, "
            "est. write BW (GB/s per GPU): 12.01")
    f = parse_line(line).fields
    assert (f["accept_len"], f["accept_rate"], f["cap_len"], f["block_accept_len"]) == (3.24, 0.15, 4.0, 5.1)
    assert (f["prealloc_reqs"], f["transfer_reqs"], f["host_receive_reqs"], f["retracted_reqs"]) == (3, 2, 1, 0)
    assert (f["est_tflops"], f["est_read_gbs"], f["est_write_gbs"]) == (41.2, 1210.55, 12.01)
    stats = to_stats(parse_line(line), host="h", t=1.0)
    assert stats is not None and stats.extra["cap_len"] == 4.0 and stats.extra["est_read_gbs"] == 1210.55
    assert stats.gen_throughput == 1620.33 and stats.queued_reqs == 5


def test_prefill_line_pd_and_mfu_parts() -> None:
    """0.5.23 metrics_reporter.py, the Prefill line on a PD prefill server with MFU metrics."""
    line = (PREFIX + "Prefill batch, #new-seq: 4, #new-token: 8192, #cached-token: 0, token usage: 0.10, "
            "#running-req: 0, #queue-req: 2, #pending-token: 4000, #replay-token: 12, #bootstrap-req: 1, "
            "#inflight-req: 3, #optimistic-req: 0, cuda graph: False, input throughput (token/s): 9000.00, "
            "est. prefill TFLOPS/s (per GPU): 120.50")
    f = parse_line(line).fields
    assert (f["bootstrap_reqs"], f["inflight_reqs"], f["optimistic_reqs"], f["replay_token"]) == (1, 3, 0, 12)
    assert f["est_tflops"] == 120.5 and f["input_throughput"] == 9000.0


def test_balancedness_line_becomes_a_figure() -> None:
    """0.5.23 metrics_reporter.py: '[Expert Balancedness] forward_pass_id=... current_pass_balancedness=...
    last_{10,100,1000}_average_balancedness=... gpu_physical_count_sum=...' (note the double space)."""
    line = ("[2026-12-05 10:00:00] [Expert Balancedness] forward_pass_id=1200 current_pass_balancedness=0.812 "
            "last_10_average_balancedness=0.790 last_100_average_balancedness=0.800  gpu_physical_count_sum=98304")
    parsed = parse_line(line)
    assert parsed.line_kind == "eplb" and parsed.fields["forward_pass_id"] == 1200
    stats = to_stats(parsed, host="h", t=2.0)
    assert stats is not None and stats.extra == {"eplb_balancedness": 0.812, "eplb_balancedness_last_10": 0.79,
                                                 "eplb_balancedness_last_100": 0.8}
    assert to_stats(parse_line("[2026-12-05 10:00:00] [EPLBManager] rebalance start"), host="h") is None


def test_skipped_rebalance_line() -> None:
    """0.5.23 eplb/eplb_manager.py _check_rebalance_needed."""
    f = parse_line("[2026-12-05 10:00:00 TP3] [EPLBManager] Skipped ep rebalancing: current GPU utilization 0.95 > "
                   "minimum rebalance threshold 0.90").fields
    assert (f["phase"], f["utilization"], f["threshold"]) == ("skipped", 0.95, 0.9)


def _exposition(ep: int, per_layer: dict[int, list[int]], bal: list[float]) -> str:
    """/metrics as 0.5.23 builds it: observability/metrics_collector.py (spec gauges, the Summary) and
    eplb/expert_distribution.py _handle_metric_eplb_heatmap (buckets[rank].inc(count), sum.inc(count*rank))."""
    r = CollectorRegistry()
    Gauge("sglang:spec_accept_length", "d", ["tp_rank"], registry=r).labels(tp_rank="0").set(5.5)
    Gauge("sglang:spec_cap_length", "d", ["tp_rank"], registry=r).labels(tp_rank="0").set(0.0)
    s = Summary("sglang:eplb_balancedness", "d", ["forward_mode"], registry=r).labels(forward_mode="decode")
    for v in bal:
        s.observe(v)
    h = Histogram("sglang:eplb_gpu_physical_count", "d", ["layer"], buckets=list(range(ep)), registry=r)
    for layer, row in per_layer.items():
        child = h.labels(layer=str(layer))
        for rank, count in enumerate(row):
            if count > 0:
                child._sum.inc(count * rank)
                child._buckets[rank].inc(count)
    return generate_latest(r).decode()


def test_heatmap_windows_are_decumulated_and_differenced() -> None:
    w = ExpertWindows()
    first = _exposition(4, {1: [10, 10, 10, 10], 2: [40, 0, 0, 0]}, [0.5])
    load, extra = w.feed(list(text_string_to_metric_families(first)), host="h", t=1.0)
    assert load is None and extra["eplb_balancedness"] == 0.5  # a first scrape is no window
    second = _exposition(4, {1: [20, 30, 10, 20], 2: [40, 10, 10, 10]}, [0.5, 0.7, 0.9])
    load, extra = w.feed(list(text_string_to_metric_families(second)), host="h", t=2.0)
    assert load is not None and load.layers == [1, 2]
    assert load.counts == [[10.0, 20.0, 0.0, 10.0], [0.0, 10.0, 10.0, 10.0]]
    assert load.balancedness == pytest.approx(((40 / 4) / 20 + (30 / 4) / 10) / 2)
    assert extra["eplb_balancedness"] == pytest.approx(0.8)  # the window's mean: (0.7 + 0.9) / 2
    restarted = _exposition(4, {1: [1, 1, 1, 1]}, [0.6])
    assert w.feed(list(text_string_to_metric_families(restarted)), host="h", t=3.0)[0] is None  # a reset: no negative load
    assert balancedness([[0, 0], [5, 5]]) == 1.0


def test_spec_gauges_read_under_the_log_lines_names() -> None:
    stats = stats_from_metrics(_exposition(2, {}, []), host="h")
    assert stats.extra["accept_len"] == 5.5 and "cap_len" not in stats.extra  # 0 = no cap scheduled


def test_drift_reads_the_launch_command_first() -> None:
    """0.5.23 utils/common.py build_server_info carries launch_command (server_args.py prepare_server_args:
    the server's argv joined by spaces)."""
    cmd = ("--model-path /m --tp-size 8 --enable-eplb --tokenizer-metrics-allowed-custom-labels a b "
           "--chunked-prefill-size=-1")
    assert parse_launch_command(cmd) == {"model_path": "/m", "tp_size": "8", "enable_eplb": True,
                                         "tokenizer_metrics_allowed_custom_labels": ["a", "b"],
                                         "chunked_prefill_size": "-1"}
    expected = {"tp_size": 8, "enable_eplb": True, "enable_metrics": True,
                "tokenizer_metrics_allowed_custom_labels": ["a", "b"]}
    info = {"tp_size": 8, "enable_eplb": True, "enable_metrics": True, "launch_command": cmd}
    assert server_drift(info, expected) == {"enable_metrics": [True, False]}  # asked for without the flag
    assert server_drift({"tp_size": 4}, {"tp_size": 8}) == {"tp_size": [8, 4]}  # no launch_command: the args


async def test_the_deprecated_endpoint_is_only_asked_when_server_info_is_missing() -> None:
    """0.5.23 entrypoints/http_server.py: /get_server_info logs a deprecation warning on every call."""
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path == "/server_info" and "old" in str(request.url.host):
            return httpx.Response(404)
        return httpx.Response(200, json={"tp_size": 8, "version": "0.5.23"})

    async with start_sim("ep8-dflash", time_scale=50) as sim:  # a real 0.5.23-shaped server: never the old path
        poller = MetricsPoller(Session(host="h"), sim.url)
        await poller.start()
        try:
            for _ in range(3):
                info = await poller.poll_server_info()
        finally:
            await poller.stop()
        assert info.args["launch_command"].startswith("--model-path") and info.drift == {}
        assert not any("/get_server_info' is deprecated" in line for line in sim.lines())
    # an older SGLang without /server_info (none runs here: a stand-in answering 404 there)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://old") as client:
        poller = MetricsPoller(Session(host="h"), "http://old", client=client)
        for _ in range(3):
            await poller.poll_server_info()
    assert calls == ["/server_info", "/get_server_info"] * 3


async def test_v1_loads_asks_for_every_section_and_reads_speculation_per_dp_rank() -> None:
    """0.5.23 entrypoints/v1_loads.py (include=core,memory,spec,...,all; an unknown section is a 400) and
    managers/load_snapshot.py LoadSnapshot.to_dict / SpeculativeMetrics (accept_length, accept_rate)."""
    async with start_sim("ep8-dflash", time_scale=50) as sim:
        async with httpx.AsyncClient(timeout=30) as http:
            body = {"model": "/root/models/Kimi-K2.6", "messages": [{"role": "user", "content": "code"}],
                    "max_tokens": 800, "ignore_eos": True}  # past a Decode line: the scheduler's figures exist
            await http.post(sim.url + "/v1/chat/completions", json=body)
            assert (await http.get(sim.url + "/v1/loads?include=nope")).status_code == 400
            core = (await http.get(sim.url + "/v1/loads?include=core")).json()
            assert "speculative" not in core["loads"][0]
        poller = MetricsPoller(Session(host="h"), sim.url)
        await poller.start()
        try:
            stats = await poller.poll_loads()
        finally:
            await poller.stop()
    assert stats.extra["dp0_accept_len"] > 1.5 and stats.extra["accept_len"] == stats.extra["dp0_accept_len"]
