"""Level statistics: steady-state window, stragglers, stop rules (pure functions)."""

from __future__ import annotations

import pytest

from kimitui.analysis.level_stats import (
    client_distortion,
    effective_status,
    error_rate_exceeded,
    find_stragglers,
    is_valid,
    level_rate,
    level_result,
    oversaturation,
    peak_level,
    percentiles,
    server_message,
    steady_rate,
    steady_window,
    with_status,
)
from kimitui.events import ClientSummary, LevelResult, Percentiles, RequestResult, SweepSpec

SPEC = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[4])


def req(i: int, sent: float, gaps: list[float], *, c: int = 4, ttft: float = 0.1, ok: bool = True,
        warmup: bool = False) -> RequestResult:
    """A request whose chunks arrive ttft after ``sent`` and then after each gap (one token each)."""
    offs = [ttft * 1000]
    for g in gaps:
        offs.append(offs[-1] + g * 1000)
    e2e = offs[-1] / 1000
    n = len(offs)
    big = max(gaps) if gaps else None
    at = None
    if gaps:
        k = gaps.index(big)
        at = sent + offs[k] / 1000
    decode = (n - 1) / (e2e - ttft) if n > 1 else None
    return RequestResult(sweep_id="s", request_id=f"r{i}", concurrency=c, ok=ok, warmup=warmup,
                         error_class=None if ok else "stall", intended_send=sent, sent=sent, ttft_s=ttft,
                         e2e_s=e2e, completion_tokens=n, chunks=n, decode_tok_s=decode, e2e_tok_s=n / e2e,
                         tpot_s=(e2e - ttft) / (n - 1), itl_p50_s=sorted(gaps)[len(gaps) // 2],
                         max_gap_s=big, max_gap_at=at, chunk_offsets_ms=offs)


def test_percentiles_interpolate_and_skip_missing() -> None:
    p = percentiles([1.0, None, 2.0, 3.0, 4.0, 5.0])
    assert p.p50 == 3.0 and p.mean == 3.0 and p.p90 == pytest.approx(4.6) and p.p99 == pytest.approx(4.96)
    assert percentiles([None]) == Percentiles()


def test_steady_window_is_the_longest_stretch_at_or_above_threshold() -> None:
    # in flight: [0,1) 1, [1,2) 2, [2,5) 3, [5,6) 2, [6,7) 3, [7,8) 1
    intervals = [(0, 8), (1, 6), (2, 5), (6, 7.0)]
    assert steady_window(intervals, 3) == (2, 5)
    assert steady_window(intervals, 2) == (1, 7.0)
    assert steady_window(intervals, 5) is None


def test_a_slot_handing_over_does_not_end_steady_state() -> None:
    # C=1 sustained: back-to-back requests with 0.3 ms between them form one window...
    back_to_back = [(0.0, 1.0), (1.0003, 2.0), (2.0004, 3.5)]
    assert steady_window(back_to_back, 1) == (0.0, 3.5)
    # ...but a real pause (0.5 s with nothing in flight) does.
    assert steady_window([(0.0, 1.0), (1.5, 3.0)], 1) == (1.5, 3.0)


def test_burst_drain_tail_collapses_agg_but_not_steady() -> None:
    # C=4 burst: three requests decode 100 tokens at 10 ms; one stalls 20 s in the middle.
    fast = [req(i, 0.0, [0.01] * 99) for i in range(3)]
    slow = req(3, 0.0, [0.01] * 50 + [20.0] + [0.01] * 48)
    lv = level_result("s", 4, 0, SPEC, fast + [slow])
    assert lv.output_tokens == 400
    assert lv.agg_tok_s == pytest.approx(400 / lv.wall_s) and lv.agg_tok_s < 25
    # steady window: while all four were in flight (0 .. 1.09 s): 3 x 100 + 51 tokens
    assert lv.steady_window_s == pytest.approx(1.09, abs=0.001)
    assert lv.steady_tok_s == pytest.approx(351 / 1.09, rel=0.01)
    assert lv.steady_tok_s > 10 * lv.agg_tok_s
    [s] = lv.stragglers
    assert s.request_id == "r3" and "gap 20.00 s" in s.reason
    assert s.gap_start == pytest.approx(0.1 + 0.5) and s.gap_end == pytest.approx(20.6)


def test_slow_decode_is_a_straggler_against_the_level_median() -> None:
    results = [req(i, i * 2.0, [0.016] * 60, c=1) for i in range(4)]
    results.append(req(9, 10.0, [0.13] * 60, c=1))  # 7.7 tok/s vs ~63 for the others
    [s] = find_stragglers(results, SPEC)
    assert s.request_id == "r9" and s.decode_tok_s == pytest.approx(7.7, abs=0.1)
    assert s.median_decode_tok_s == pytest.approx(62.5, abs=0.5)
    assert s.reason.startswith("decode 7.7 tok/s (median 62.5)")


def test_one_request_is_never_a_straggler_by_rate_alone() -> None:
    assert find_stragglers([req(0, 0.0, [0.13] * 20, c=1)], SPEC) == []


def test_warmup_requests_are_not_measured() -> None:
    lv = level_result("s", 2, 0, SPEC, [req(0, 0.0, [0.01] * 9, warmup=True), req(1, 1.0, [0.01] * 9)])
    assert lv.requests == 1 and lv.output_tokens == 10


def test_failures_are_counted_by_class() -> None:
    lv = level_result("s", 2, 0, SPEC, [req(0, 0.0, [0.01] * 9), req(1, 0.0, [0.01] * 3, ok=False)])
    assert lv.ok == 1 and lv.failed == 1 and lv.failures == {"stall": 1}
    assert error_rate_exceeded(lv, 0.4) == "error rate 1/2 above 40%"
    assert error_rate_exceeded(lv, 0.5) is None


def _lv(c: int, ttft: float, rate: float) -> LevelResult:
    return LevelResult(sweep_id="s", concurrency=c, ttft=Percentiles(p50=ttft), steady_tok_s=rate)


def test_oversaturation_needs_ttft_growth_with_flat_throughput() -> None:
    assert oversaturation(_lv(64, 0.2, 1000), _lv(128, 0.5, 1020)).startswith("over-saturated: TTFT p50 0.20->0.50 s")
    assert oversaturation(_lv(64, 0.2, 1000), _lv(128, 0.5, 1500)) is None  # throughput still grows
    assert oversaturation(_lv(64, 0.2, 1000), _lv(128, 0.25, 1000)) is None  # TTFT barely moved
    assert oversaturation(_lv(1, 0.002, 60), _lv(2, 0.005, 60)) is None  # 2.5x of milliseconds is jitter
    assert oversaturation(None, _lv(128, 0.5, 1000)) is None


def test_steady_rate_counts_only_tokens_inside_the_window() -> None:
    a = req(0, 0.0, [0.1] * 9, c=2)  # chunks at 0.1 .. 1.0
    b = req(1, 0.45, [0.1] * 9, c=2)  # chunks at 0.55 .. 1.45
    rate, window, start, end = steady_rate([a, b], 2, 1.0)
    assert (start, end) == (0.45, 1.0) and window == pytest.approx(0.55)
    # a: 0.5 .. 1.0 (6 chunks); b: 0.55 .. 0.95 (5 chunks)
    assert rate == pytest.approx(11 / 0.55)


# --------------------------------------------------------------------------- status, completed-only figures, peak


def failed(i: int, sent: float, gaps: list[float], cls: str, error: str = "", c: int = 4) -> RequestResult:
    """A request that got some chunks, then ended as ``cls`` (its partial tokens are not output)."""
    return req(i, sent, gaps, c=c, ok=False).model_copy(update={"error_class": cls, "error": error})


def test_an_all_aborted_level_is_aborted_has_no_figures_and_is_never_the_peak() -> None:
    # 64 requests each streamed 20 tokens before the operator aborted: they used to read as 624 tok/s
    cut = [failed(i, 0.0, [0.01] * 19, "aborted", c=64) for i in range(64)]
    lv = level_result("s", 64, 0, SPEC, cut, aborted="aborted by operator")
    assert (lv.status, lv.status_reason) == ("aborted", "all 64 requests aborted (aborted by operator)")
    assert not lv.valid and lv.output_tokens == 0 and lv.agg_tok_s is None and lv.steady_tok_s is None
    assert lv.ttft == Percentiles() and lv.failures == {"aborted": 64}
    good = level_result("s", 4, 0, SPEC, [req(i, 0.0, [0.01] * 99) for i in range(4)])
    assert good.status == "ok" and good.status_reason == ""
    assert peak_level([good, lv]) is good and level_rate(good) == good.steady_tok_s


def test_a_level_with_no_success_is_failed_and_first_messages_are_kept_per_class() -> None:
    body = '{"object":"error","message":"The model `kimi` does not exist.","type":"NotFoundError","code":404}'
    bad = [failed(i, 0.0, [0.01], "http_status", f"HTTP 404: {body}") for i in range(3)]
    bad.append(failed(3, 0.0, [0.01] * 5, "stall", "no data for 60 s"))
    lv = level_result("s", 4, 0, SPEC.model_copy(update={"max_error_rate": 1.0}), bad)
    assert lv.status == "failed" and lv.status_reason == "all 4 requests failed (http_status 3, stall 1)"
    assert lv.errors == {"http_status": "HTTP 404: The model `kimi` does not exist.", "stall": "no data for 60 s"}
    assert peak_level([lv]) is None
    # above max_error_rate with some successes: failed too, and the successes alone make the figures
    mixed = [req(0, 0.0, [0.01] * 9), failed(1, 0.0, [0.01] * 50, "reset"), failed(2, 0.0, [0.01] * 50, "reset")]
    lv = level_result("s", 3, 0, SPEC, mixed)
    assert lv.status == "failed" and "2 of 3 requests failed" in lv.status_reason
    assert lv.output_tokens == 10 and lv.wall_s == pytest.approx(0.1 + 9 * 0.01)
    assert lv.agg_tok_s == pytest.approx(10 / lv.wall_s)


def test_a_cut_level_is_marked_and_a_few_failures_leave_a_level_ok() -> None:
    rs = [req(0, 0.0, [0.01] * 9), failed(1, 0.0, [0.01] * 30, "cancelled")]
    lv = level_result("s", 2, 0, SPEC, rs, cut="level time limit 1 s reached at C=2")
    assert lv.status == "cut" and lv.status_reason.startswith("1 of 2 requests cancelled, 1 completed")
    few = [req(i, 0.0, [0.01] * 9) for i in range(9)] + [failed(9, 0.0, [0.01] * 3, "reset")]
    lv = level_result("s", 10, 0, SPEC, few)
    assert lv.status == "ok" and lv.output_tokens == 90 and list(lv.errors) == ["reset"]


def test_old_recordings_get_a_derived_status() -> None:
    """Levels recorded before LevelResult had a status: derived from their counts, so reports are right too."""
    def old(**kw: object) -> LevelResult:
        return LevelResult.model_validate({"sweep_id": "s", "concurrency": kw.pop("concurrency", 1), **kw})

    aborted = old(concurrency=64, requests=64, ok=0, failed=64, failures={"aborted": 64}, agg_tok_s=624.0,
                  stopped="aborted by operator")
    dead = old(concurrency=256, requests=512, ok=0, failed=512, failures={"http_status": 512}, agg_tok_s=586.0)
    cut = old(concurrency=8, requests=10, ok=8, failed=2, failures={"cancelled": 2}, agg_tok_s=900.0,
              stopped="level time limit 5 s reached at C=8")
    fine = old(concurrency=32, requests=32, ok=31, failed=1, failures={"reset": 1}, agg_tok_s=500.0)
    assert effective_status(aborted) == ("aborted", "all 64 requests aborted (aborted by operator)")
    assert effective_status(dead) == ("failed", "all 512 requests failed (http_status 512)")
    assert effective_status(cut)[0] == "cut" and effective_status(fine) == ("ok", "")
    assert [is_valid(x) for x in (aborted, dead, cut, fine)] == [False, False, False, True]
    assert peak_level([aborted, dead, cut, fine]) is fine
    assert with_status(dead).status == "failed" and not with_status(dead).valid
    # a level that carries its status is taken at its word
    assert effective_status(old(requests=1, ok=0, failed=1, status="ok")) == ("ok", "")


def test_server_message_unwraps_the_json_error() -> None:
    wrapped = 'HTTP 400: {"error": {"message": "bad  max_tokens", "code": 400}}'
    assert server_message(wrapped) == "HTTP 400: bad max_tokens"
    assert server_message('HTTP 404: {"detail":"Not Found"}') == "HTTP 404: Not Found"
    assert server_message("HTTP 502: <html>bad gateway</html>") == "HTTP 502: <html>bad gateway</html>"
    assert len(server_message("x" * 1000)) == 300


def test_client_distortion_thresholds() -> None:
    assert client_distortion(None, 0.1) is None
    assert client_distortion(ClientSummary(loop_lag_max_ms=2.0, cpu_max_pct=40.0), 0.1) is None
    why = client_distortion(ClientSummary(loop_lag_max_ms=547.0), 0.0745)
    assert why is not None and "event-loop lag up to 547 ms" in why
    # 20 ms of lag is not 50 ms, but it is a third of a 60 ms TTFT
    assert "over 10 % of TTFT p50 60 ms" in (client_distortion(ClientSummary(loop_lag_max_ms=20.0), 0.06) or "")
    assert client_distortion(ClientSummary(loop_lag_max_ms=20.0), 1.0) is None
    assert "95 % of a core" in (client_distortion(ClientSummary(loop_lag_max_ms=1.0, cpu_max_pct=95.0), 1.0) or "")


def test_peak_level_by_another_figure() -> None:
    a = LevelResult(sweep_id="s", concurrency=1, agg_tok_s=100.0, steady_tok_s=300.0, status="ok")
    b = LevelResult(sweep_id="s", concurrency=2, agg_tok_s=200.0, steady_tok_s=250.0, status="ok")
    assert peak_level([a, b]) is a and peak_level([a, b], figure=lambda lv: lv.agg_tok_s) is b
    assert peak_level([]) is None
