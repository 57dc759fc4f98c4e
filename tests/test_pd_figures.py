"""kimitui's side of PD: the poller's PD figures, the server panel's PD rows, the ``kv_transfer`` cause."""

from __future__ import annotations

from kimitui.analysis.causes.catalogue import STALL, label
from kimitui.analysis.causes.timeline import CauseTimeline
from kimitui.events import LogLine, ServerStats
from kimitui.sglang.log import parse_line
from kimitui.telemetry.metrics_poll import PD_EXTRA_KEYS, CounterRates, stats_from_metrics
from kimitui.tui.model.server_figures import PD_FIGURES, pd_figure_text, pd_figures

LAB = 'engine_type="prefill",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def metrics(count: float, total: float, failed: float = 0.0) -> str:
    return f"""# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{LAB}}} 3.0
# TYPE sglang:num_prefill_bootstrap_queue_reqs gauge
sglang:num_prefill_bootstrap_queue_reqs{{{LAB}}} 2.0
# TYPE sglang:num_decode_transfer_queue_reqs gauge
sglang:num_decode_transfer_queue_reqs{{{LAB}}} 0.0
# TYPE sglang:kv_transfer_latency_ms histogram
sglang:kv_transfer_latency_ms_bucket{{{LAB},le="5.0"}} {count}
sglang:kv_transfer_latency_ms_bucket{{{LAB},le="+Inf"}} {count}
sglang:kv_transfer_latency_ms_count{{{LAB}}} {count}
sglang:kv_transfer_latency_ms_sum{{{LAB}}} {total}
# TYPE sglang:num_transfer_failed_reqs counter
sglang:num_transfer_failed_reqs_total{{{LAB}}} {failed}
"""


def test_the_poller_reads_the_pd_gauges_and_the_transfer_latency_of_each_scrape() -> None:
    rates = CounterRates()
    first = stats_from_metrics(metrics(10, 50.0), host="h", rates=rates)
    assert first.extra["num_prefill_bootstrap_queue_reqs"] == 2.0
    assert "kv_transfer_latency_ms" not in first.extra  # no interval yet
    second = stats_from_metrics(metrics(12, 450.0, failed=1), host="h", rates=rates)
    assert second.extra["kv_transfer_latency_ms"] == 200.0  # (450 - 50) / (12 - 10): this scrape's transfers
    assert second.extra["num_transfer_failed_reqs_total"] == 1.0
    assert stats_from_metrics(metrics(4, 20.0), host="h").extra["kv_transfer_latency_ms"] == 5.0  # one-shot: lifetime mean
    assert {"kv_transfer_latency_ms", "num_prefill_bootstrap_queue_reqs"} <= set(PD_EXTRA_KEYS)


def test_pd_rows_show_only_for_a_pd_server() -> None:
    assert pd_figures({"num_prefill_bootstrap_queue_reqs": 0.0, "num_decode_transfer_queue_reqs": 0.0}) == []
    assert pd_figures({"running_reqs": 3.0}) == []
    rows = pd_figures({"num_decode_transfer_queue_reqs": 5.0, "num_decode_prealloc_queue_reqs": 0.0})
    assert [(f.key, v) for f, v in rows] == [("num_decode_prealloc_queue_reqs", 0.0), ("num_decode_transfer_queue_reqs", 5.0)]
    from_log = pd_figures({}, {"transfer_reqs": 0, "prealloc_reqs": 1})
    assert [f.key for f, _ in from_log] == ["num_decode_prealloc_queue_reqs", "num_decode_transfer_queue_reqs"]
    latency = next(f for f in PD_FIGURES if f.key == "kv_transfer_latency_ms")
    assert pd_figure_text(latency, 41.25) == "41.2 ms"


def test_a_latency_jump_is_a_slow_kv_transfer_episode() -> None:
    tl = CauseTimeline()
    for i, ms in enumerate([5.0, 6.0, 5.5, 5.0, 900.0, 6.0]):
        tl.add(ServerStats(host="h", t=100.0 + i, extra={"kv_transfer_latency_ms": ms}))
    eps = tl.episodes(100.0, 110.0)
    assert [(e.cause, e.start, e.end) for e in eps] == [("kv_transfer", 103.0, 104.0)]
    assert "900 ms" in eps[0].evidence and "kv_transfer" in STALL and label("kv_transfer") == "Slow KV transfer"


def test_a_transfer_queue_backing_up_in_the_decode_log_is_an_episode() -> None:
    tl = CauseTimeline()
    base = ("[2026-05-28 10:00:{s:02d} TP0] Decode batch, #running-req: 8, #token: 900, token usage: 0.01, "
            "pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: {n}, #retracted-req: 0, cuda graph: True, "
            "gen throughput (token/s): 400.00, #queue-req: 0")
    for s, n in [(0, 1), (2, 0), (4, 1), (6, 9), (8, 0)]:
        raw = base.format(s=s, n=n)
        parsed = parse_line(raw)
        assert parsed.fields["transfer_reqs"] == n
        tl.add(LogLine(host="h", t=1000.0 + s, source="file", raw=raw, line_kind="decode", fields=parsed.fields))
    eps = [e for e in tl.episodes(0.0, 2e9) if e.cause == "kv_transfer"]
    assert len(eps) == 1 and "#transfer-req up to 9" in eps[0].evidence


def test_a_first_token_held_by_a_slow_transfer_is_a_straggler_named_for_it() -> None:
    """On a PD deployment a slow transfer holds a request before its first token (its decode pace is normal):
    the straggler rule's TTFT leg finds it, its wait is the stretch, and the transfer episode names the cause."""
    from kimitui.analysis.causes.attribute import attribute
    from kimitui.analysis.level_stats import find_stragglers
    from kimitui.events import RequestResult, SweepSpec

    def result(i: int, sent: float, ttft: float) -> RequestResult:
        offsets = [ttft * 1000 + k * 12.0 for k in range(40)]  # 40 chunks at the same 12 ms pace
        return RequestResult(host="h", t=sent + ttft + 0.5, sweep_id="s", request_id=f"r{i}", concurrency=8,
                             ok=True, intended_send=sent, sent=sent, ttft_s=ttft, e2e_s=ttft + 0.47,
                             completion_tokens=40, chunks=40, decode_tok_s=83.0, chunk_offsets_ms=offsets,
                             max_gap_s=0.012, max_gap_at=sent + ttft)

    results = [result(i, 100.0 + i * 0.1, 0.12) for i in range(7)] + [result(7, 100.5, 3.4)]
    spec = SweepSpec(url="http://127.0.0.1:30000", model="m", levels=[8])
    (slow,) = find_stragglers(results, spec)
    assert slow.request_id == "r7" and slow.ttft_s == 3.4 and slow.median_ttft_s == 0.12
    assert "first token after 3.40 s" in slow.reason
    tl = CauseTimeline()
    for i, ms in enumerate([5.0, 6.0, 5.5, 5.0, 2900.0, 6.0]):  # the transfer latency jumps while r7 waits
        tl.add(ServerStats(host="h", t=99.0 + i, extra={"kv_transfer_latency_ms": ms}))
    found = attribute(slow, results[-1], tl)
    assert found.cause == "kv_transfer", found
    assert found.stretches[0].start == 100.5 and found.stretches[0].end == 100.5 + 3.4
