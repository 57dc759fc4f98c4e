"""The knee of the throughput-vs-concurrency curve (issue 34): hand-built curves, the rule worked by hand."""

from __future__ import annotations

import math

import pytest

from kimitui.analysis.knee import CurvePoint, find_knee, knee_of_levels, points_from_levels
from kimitui.events import LevelResult, Percentiles


def curve(cs: list[int], toks: list[float], tpots: list[float] | None = None,
          ttfts: list[float] | None = None) -> list[CurvePoint]:
    tpots = tpots or [0.02 * (1 + 0.1 * i) ** 2 for i in range(len(cs))]
    ttfts = ttfts or [None] * len(cs)  # type: ignore[list-item]
    return [CurvePoint(c, t, p, f) for c, t, p, f in zip(cs, toks, tpots, ttfts)]


def test_the_knee_is_where_the_gain_per_doubling_falls_under_ten_percent_for_good() -> None:
    cs = [16, 32, 64, 128, 256]
    knee = find_knee(curve(cs, [400, 800, 1000, 1050, 1060], [0.02, 0.022, 0.025, 0.035, 0.05]))
    # gains per doubling: +100 % (mid log2 4.5), +25 % (5.5), +5 % (6.5), +1 % (7.5); 25 % -> 5 % crosses 10 %
    # three quarters of the way: log2 C = 5.5 + 0.15 / 0.20 = 6.25, C = 76.1
    assert knee.status == "knee"
    assert knee.concurrency == pytest.approx(2 ** 6.25)
    # beyond it: log2 C 6.25 -> 7.25, each end a quarter into its segment (geometric)
    t0, t1 = 1000 * 1.05 ** 0.25, 1050 * (1060 / 1050) ** 0.25
    p0, p1 = 0.025 * (0.035 / 0.025) ** 0.25, 0.035 * (0.05 / 0.035) ** 0.25
    assert knee.gain == pytest.approx(t1 / t0 - 1)
    assert knee.tpot_rise == pytest.approx(p1 / p0 - 1)
    assert knee.line() == "knee at C≈76: beyond it +4 % tokens for +41 % TPOT"


def test_levels_that_do_not_double_are_judged_per_doubling() -> None:
    # 1 -> 8 is three doublings: x8 throughput is +100 % per doubling; 8 -> 32 x1.3225 = +15 % per doubling;
    # 32 -> 48 (0.585 doublings) +2 %: per doubling 1.02 ** (1 / 0.585) - 1 = +3.4 %
    cs = [1, 8, 32, 48]
    knee = find_knee(curve(cs, [100, 800, 1058, 1079.16]))
    g2 = 1.02 ** (1 / math.log2(48 / 32)) - 1
    mid1, mid2 = (3 + 5) / 2, (5 + math.log2(48)) / 2
    assert knee.status == "knee"
    assert knee.concurrency == pytest.approx(2 ** (mid1 + (0.15 - 0.10) / (0.15 - g2) * (mid2 - mid1)))
    assert knee.until == pytest.approx(2 * knee.concurrency)


def test_beyond_the_knee_stops_at_the_highest_level() -> None:
    # gains +100 %, +100 %, +2.5 %: log2 C = 1.5 + 0.9 / 0.975 = 2.42 (C≈5.4); twice that is past C=8
    knee = find_knee(curve([1, 2, 4, 8], [100, 200, 400, 410]))
    assert knee.concurrency == pytest.approx(2 ** (1.5 + 0.9 / 0.975))
    assert knee.until == pytest.approx(8)
    assert knee.line().endswith("(to C=8)")


def test_too_few_levels_are_unsure_and_say_why() -> None:
    knee = find_knee(curve([8, 64], [100, 120]))
    assert knee.status == "unsure"
    assert knee.line() == "knee unsure: too few levels to see a bend: 2 usable, need 3"


def test_a_curve_that_never_bends_has_no_knee_within_the_levels_measured() -> None:
    knee = find_knee(curve([1, 2, 4, 8], [100, 190, 350, 600]))
    assert knee.status == "none"
    assert knee.line() == ("no knee: no knee within the levels measured (C=1–8): doubling C from 4 to 8 still "
                           "bought +71 % per doubling")


def test_a_flat_curve_whose_latency_does_not_rise_is_not_a_saturation_knee() -> None:
    knee = find_knee(curve([1, 2, 4, 8], [100, 200, 205, 207], tpots=[0.02, 0.02, 0.02, 0.02]))
    assert knee.status == "unsure"
    assert "latency does not rise (TPOT p50 +0 %)" in knee.reason


def test_ttft_rising_alone_is_latency_rising() -> None:
    knee = find_knee(curve([1, 2, 4, 8], [100, 200, 205, 207], tpots=[0.02] * 4, ttfts=[0.1, 0.1, 0.3, 0.9]))
    assert knee.status == "knee"
    assert "TTFT p99" in knee.line()


def test_a_dip_that_recovers_is_not_the_knee() -> None:
    # +4 % at 2->4 then +40 % at 4->8: the curve bent for good only after 8
    knee = find_knee(curve([1, 2, 4, 8, 16, 32], [100, 200, 208, 291, 300, 303]))
    assert knee.status == "knee" and knee.concurrency is not None and knee.concurrency > 8


def level(c: int, tok_s: float, tpot: float, *, status: str = "ok", repeat: int = 0) -> LevelResult:
    return LevelResult(sweep_id="s", concurrency=c, repeat=repeat, requests=10, ok=10, wall_s=10.0,
                       output_tokens=int(tok_s * 10), agg_tok_s=tok_s, tpot=Percentiles(p50=tpot),
                       status=status, status_reason="" if status == "ok" else "all failed")  # type: ignore[arg-type]


def test_failed_levels_are_left_out_of_the_curve_and_named() -> None:
    levels = [level(1, 100, 0.02), level(2, 190, 0.021), level(4, 200, 0.03), level(8, 50, 0.2, status="failed")]
    points = points_from_levels(levels)
    assert [p.usable for p in points] == [True, True, True, False]
    knee = knee_of_levels(levels)
    assert knee.left_out == ("C=8 failed",)
    assert knee.status == "knee"


def test_repeats_pool_by_their_mean() -> None:
    points = points_from_levels([level(4, 100, 0.02), level(4, 120, 0.04, repeat=1)])
    assert points[0].tok_s == pytest.approx(110) and points[0].tpot_p50_s == pytest.approx(0.03)
