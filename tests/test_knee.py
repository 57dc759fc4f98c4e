"""The knee of the throughput-vs-concurrency curve (issue 34): hand-built curves, each knee worked out by hand.

The curve is log-linear between levels; ``g(C) = T(2C) / T(C) - 1`` is what doubling buys from C, and the knee
is the C past which it stays under 10 %.  A plateau (or a log-linear stretch) makes ``g`` solvable on paper.
"""

from __future__ import annotations

import math

import pytest

from kimitui.analysis.knee import CurvePoint, find_knee, knee_of_levels, points_from_levels
from kimitui.events import LevelResult, Percentiles


def curve(cs: list[int], toks: list[float], tpots: list[float] | None = None,
          ttfts: list[float | None] | None = None) -> list[CurvePoint]:
    tpots = tpots or [0.02 * (1 + 0.1 * i) ** 2 for i in range(len(cs))]
    ttfts = ttfts or [None] * len(cs)
    return [CurvePoint(c, t, p, f) for c, t, p, f in zip(cs, toks, tpots, ttfts)]


def test_a_plateau_puts_the_knee_where_doubling_first_buys_under_ten_percent() -> None:
    # T doubles with C up to 8, then stays 800.  For C in [4, 8]: T(C) = 100 C and T(2C) = 800, so
    # g(C) = 8 / C - 1, under 10 % from C = 8 / 1.1 = 7.27 on
    knee = find_knee(curve([1, 2, 4, 8, 16, 32], [100, 200, 400, 800, 800, 800],
                           [0.02, 0.02, 0.02, 0.02, 0.04, 0.08]))
    assert knee.status == "knee"
    assert knee.concurrency == pytest.approx(8 / 1.1, rel=1e-6)
    # beyond it, to C=32: 800 / 727.3 tok/s = +10 %; TPOT 0.02 -> 0.08 s = +300 %
    assert knee.gain == pytest.approx(0.1, rel=1e-6) and knee.tpot_rise == pytest.approx(3.0, rel=1e-6)
    assert knee.until == 32
    assert knee.line() == "knee at C≈7: beyond it +10 % tokens for +300 % TPOT (to C=32)"


def test_levels_that_do_not_double_read_on_the_same_footing() -> None:
    # 3 -> 6 -> 12 double, 12 -> 40 does not: T = 100 C up to 12, then 1200.  For C in [6, 12]: g(C) = 12 / C - 1,
    # under 10 % from C = 12 / 1.1 = 10.9; below 6 every doubling buys +100 %
    knee = find_knee(curve([1, 3, 6, 12, 40], [100, 300, 600, 1200, 1200], [0.02, 0.02, 0.02, 0.03, 0.09]))
    assert knee.status == "knee" and knee.concurrency == pytest.approx(12 / 1.1, rel=1e-6)
    assert knee.until == 40


def test_a_gentle_bend_is_found_inside_its_segment() -> None:
    # 1, 2, 4, 8 at 100, 200, 400, 410.  With u = log2 C - 1 in [0, 1]: T(C) = 200 x 2^u and
    # T(2C) = 400 x 1.025^u, so g = 2 x 0.5125^u - 1 = 0.1 at u = ln 0.55 / ln 0.5125
    knee = find_knee(curve([1, 2, 4, 8], [100, 200, 400, 410]))
    u = math.log(0.55) / math.log(0.5125)
    assert knee.concurrency == pytest.approx(2 ** (1 + u), rel=1e-6)


def test_too_few_levels_are_unsure_and_say_why() -> None:
    knee = find_knee(curve([8, 64], [100, 120]))
    assert knee.status == "unsure"
    assert knee.line() == "knee unsure: too few levels to see a bend: 2 usable, need 3"
    assert find_knee(curve([8, 10, 12], [100, 110, 120])).reason == "the levels span less than a doubling (C=8–12)"


def test_a_curve_that_never_bends_has_no_knee_within_the_levels_measured() -> None:
    knee = find_knee(curve([1, 2, 4, 8], [100, 190, 350, 600]))
    assert knee.status == "none"
    assert knee.line() == "no knee: no knee within the levels measured (C=1–8): doubling C from 4 to 8 still bought +71 %"


def test_a_flat_curve_whose_latency_does_not_rise_is_not_a_saturation_knee() -> None:
    knee = find_knee(curve([1, 2, 4, 8], [100, 200, 205, 207], tpots=[0.02, 0.02, 0.02, 0.02]))
    assert knee.status == "unsure"
    assert "latency does not rise (TPOT p50 +0 %)" in knee.reason


def test_ttft_rising_alone_is_latency_rising() -> None:
    knee = find_knee(curve([1, 2, 4, 8], [100, 200, 205, 207], tpots=[0.02] * 4, ttfts=[0.1, 0.1, 0.3, 0.9]))
    assert knee.status == "knee"
    assert "TTFT p99" in knee.line()


def test_a_dip_that_recovers_is_not_the_knee() -> None:
    # +4 % from 2 to 4, then +40 % from 4 to 8: the curve bends for good only after 8
    knee = find_knee(curve([1, 2, 4, 8, 16, 32], [100, 200, 208, 291, 300, 303]))
    assert knee.status == "knee" and knee.concurrency is not None and knee.concurrency > 4


def test_under_the_threshold_from_the_first_level_is_a_knee_at_the_lowest_level() -> None:
    knee = find_knee(curve([1, 2, 4], [100, 105, 108], tpots=[0.02, 0.04, 0.08]))
    assert knee.status == "knee" and knee.concurrency == pytest.approx(1.0)
    assert "already from the lowest level, C=1" in knee.reason


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
