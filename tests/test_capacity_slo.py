"""The SLO grammar (good terms, bad ones and what their messages say) and its check on hand-made requests."""

from __future__ import annotations

import pytest

from kimitui.capacity.slo import SloError, parse_slo
from kimitui.events import LevelResult, RequestResult


def req(i: int, *, ok: bool = True, ttft: float | None = 0.1, decode: float | None = 30.0, tpot: float | None = 0.03,
        itl: float | None = 0.03, e2e: float | None = 2.0, tokens: int = 64, warmup: bool = False) -> RequestResult:
    return RequestResult(host="t", sweep_id="s", request_id=f"r{i}", concurrency=8, ok=ok, warmup=warmup,
                         intended_send=0.0, sent=0.0, ttft_s=ttft if ok else None, decode_tok_s=decode if ok else None,
                         tpot_s=tpot if ok else None, itl_p50_s=itl if ok else None, e2e_s=e2e if ok else None,
                         completion_tokens=tokens if ok else 0)


def test_terms_parse_to_base_units_and_describe_themselves() -> None:
    slo = parse_slo("ttft_p99<=2s, decode_p50>=20")
    assert [(t.metric, t.stat, t.op, t.value) for t in slo.terms] == [("ttft", "p99", "<=", 2.0),
                                                                    ("decode", "p50", ">=", 20.0)]
    assert slo.describe() == "ttft p99 ≤ 2 s, decode p50 ≥ 20 tok/s/user"
    slo = parse_slo("itl_p90<150ms,tpot_mean<=0.05,e2e_p50>1,error_rate<=1%,decode_p90>=12tok/s")
    assert [t.value for t in slo.terms] == [0.15, 0.05, 1.0, 0.01, 12.0]
    assert [t.key for t in slo.terms] == ["itl_p90", "tpot_mean", "e2e_p50", "error_rate", "decode_p90"]
    assert slo.describe() == ("itl p90 < 150 ms, tpot mean ≤ 0.05 s, e2e p50 > 1 s, error rate ≤ 1 %, "
                              "decode p90 ≥ 12 tok/s/user")
    assert parse_slo("error_rate<=0.02").terms[0].value == 0.02
    assert parse_slo("TTFT_P99 ≤ 2 s").describe() == "ttft p99 ≤ 2 s"  # what describe() prints reads back


@pytest.mark.parametrize(("text", "message"), [
    ("ttft_p99<=2x", '--slo "ttft_p99<=2x": unit \'x\' is not a time unit; ttft takes s or ms'),
    ("ttft_p99 2s", '--slo "ttft_p99 2s": no comparison'),
    ("latency_p99<=2s", "metric 'latency' unknown; one of ttft, tpot, itl, e2e, decode, error_rate"),
    ("ttft<=2s", "'ttft' needs a statistic: ttft_p50, ttft_p90, ttft_p99, ttft_mean"),
    ("ttft_p95<=2s", "statistic 'p95' unknown; one of p50, p90, p99, mean"),
    ("error_rate_p99<=1%", "error_rate takes no statistic"),
    ("error_rate<=5", "error rate 5 is above 1"),
    ("decode_p50>=20ms", "unit 'ms': decode is in tok/s per user"),
    ("ttft_p99<=fast", "value 'fast' is not a number"),
    ("ttft_p99<=2s,,decode_p50>=20", "empty term"),
    ("", "empty term"),
])
def test_bad_terms_are_refused_naming_the_term_and_the_fault(text: str, message: str) -> None:
    with pytest.raises(SloError) as exc:
        parse_slo(text)
    assert message in str(exc.value)


def test_each_term_is_judged_on_the_measured_requests_with_a_confidence() -> None:
    slo = parse_slo("ttft_p50<=0.5s,decode_p50>=20")
    requests = [req(i, ttft=0.1 + 0.01 * i) for i in range(20)] + [req(99, ttft=9.0, warmup=True)]
    check = slo.check(requests)
    assert check.holds and check.confidence == 1.0 and check.requests == 20 and check.ok == 20
    assert check.value("ttft_p50") == pytest.approx(0.195) and check.value("decode_p50") == 30.0
    assert [tc.holds for tc in check.terms] == [True, True]

    slow = slo.check([req(i, decode=10.0 + i) for i in range(5)])  # decode p50 12
    assert not slow.holds and slow.reason == "decode p50 12 tok/s/user < 20 tok/s/user"
    assert slow.terms[0].holds and not slow.terms[1].holds and slow.confidence == 0.0


def test_error_rate_counts_failed_requests_and_ok_ones_alone_make_the_percentiles() -> None:
    slo = parse_slo("error_rate<=10%,ttft_p99<=1s")
    requests = [req(i) for i in range(18)] + [req(18, ok=False), req(19, ok=False)]
    check = slo.check(requests)
    assert check.value("error_rate") == pytest.approx(0.1) and check.value("ttft_p99") == pytest.approx(0.1)
    assert check.holds and 0.2 < check.terms[0].confidence < 1.0  # right at the line: resamples disagree
    assert not slo.check(requests + [req(20, ok=False)]).holds


def test_a_point_right_at_the_line_is_grey_and_the_bootstrap_is_deterministic() -> None:
    slo = parse_slo("ttft_p50<=1s")
    requests = [req(i, ttft=0.9 if i % 2 else 1.1) for i in range(21)]  # 10 under, 11 over: p50 1.1
    a, b = slo.check(requests), slo.check(requests)
    assert not a.holds and 0.2 <= a.confidence <= 0.8 and a == b


def test_too_few_requests_or_a_level_that_is_not_ok_never_holds() -> None:
    slo = parse_slo("ttft_p99<=2s")
    few = slo.check([req(0), req(1), req(2, ok=False)])
    assert not few.holds and few.reason == "only 2 of 3 requests completed (at least 3 needed)"
    cut = LevelResult(sweep_id="s", concurrency=8, requests=10, ok=10, status="cut", status_reason="time limit")
    check = slo.check([req(i) for i in range(10)], [cut])
    assert not check.holds and check.confidence == 0.0 and check.reason == "the level at C=8 is cut: time limit"
    assert check.terms[0].holds  # the figures themselves are still shown


def test_a_request_meets_the_slo_alone_for_goodput() -> None:
    slo = parse_slo("ttft_p99<=1s,decode_p50>=20,error_rate<=5%")
    assert slo.request_meets(req(0))
    assert not slo.request_meets(req(1, ttft=1.5)) and not slo.request_meets(req(2, decode=19.0))
    assert not slo.request_meets(req(3, ok=False))


def test_a_time_scaled_slo_divides_time_bounds_multiplies_rates_and_says_so() -> None:
    slo = parse_slo("ttft_p99<=2s,decode_p50>=20,error_rate<=1%")
    scaled = slo.scaled(20)
    assert scaled.describe() == "ttft p99 ≤ 0.1 s, decode p50 ≥ 400 tok/s/user, error rate ≤ 1 %"
    assert scaled.time_scale == 20 and scaled.text == slo.text and slo.scale_note() == ""
    assert scaled.scale_note() == ("the SLO as written (ttft p99 ≤ 2 s, decode p50 ≥ 20 tok/s/user, error rate ≤ 1 %) "
                                   "scaled to the simulator's time scale 20")
