"""The bracketing search on synthetic measurements (monotone, a grey zone, fails at once, holds at the
top, over rates), the answer read off a sweep's levels, and goodput."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import pytest

from kimitui.capacity import SearchParams, capacity_from_levels, find_capacity, parse_slo
from kimitui.capacity.answer import Probe
from kimitui.capacity.slo import Slo
from kimitui.events import LevelResult, RequestResult

DECODE_20 = parse_slo("decode_p50>=20")


def level_of(x: float, decodes: list[float], *, tokens: int = 64, wall_s: float = 1.0) -> tuple[LevelResult, list[RequestResult]]:
    c = max(1, int(x))
    requests = [RequestResult(host="t", sweep_id=f"s{x}", request_id=f"r{i}", concurrency=c, ok=True,
                              intended_send=0.0, sent=0.0, ttft_s=0.1, decode_tok_s=d, completion_tokens=tokens)
                for i, d in enumerate(decodes)]
    level = LevelResult(sweep_id=f"s{x}", concurrency=c, requests=len(decodes), ok=len(decodes), wall_s=wall_s,
                        output_tokens=tokens * len(decodes), agg_tok_s=tokens * len(decodes) / wall_s)
    return level, requests


def probe_of(slo: Slo, x: float, decodes: list[float]) -> Probe:
    level, requests = level_of(x, decodes)
    return Probe(x, (level,), requests, slo.check(requests, [level]))


class Synthetic:
    """measure(x): 20 requests whose decode rate is ``work / x`` (±2 %), or what ``special`` says for x."""

    def __init__(self, work: float, special: Callable[[float, int], list[float] | None] | None = None) -> None:
        self.work = work
        self.special = special
        self.calls: Counter[float] = Counter()
        self.order: list[float] = []

    async def __call__(self, x: float) -> Probe:
        self.calls[x] += 1
        self.order.append(x)
        decodes = self.special(x, self.calls[x]) if self.special is not None else None
        if decodes is None:
            decodes = [self.work / x * (0.98 + 0.002 * i) for i in range(20)]
        return probe_of(DECODE_20, x, decodes)


def test_monotone_doubles_then_bisects_to_an_eighth() -> None:
    m = Synthetic(1000.0)  # holds while 1000/C >= 20: up to C=50
    answer = asyncio.run(find_capacity(DECODE_20, m))
    assert m.order == [1, 2, 4, 8, 16, 32, 64, 48, 56, 52]
    assert (answer.answer, answer.failing, answer.plus_minus, answer.measured) == (48, 52, 2, 10)
    assert answer.sentence() == "holds up to C=48 ±2 at decode p50 ≥ 20 tok/s/user (goodput 1,280 tok/s)"
    assert [p.x for p in answer.curve] == sorted(m.order)
    js = answer.to_json()
    assert js["bracket"] == [48, 52] and js["answer"] == 48 and len(js["probes"]) == 10
    assert js["probes"][0]["values"] == {"decode_p50": pytest.approx(1000 * 0.999, rel=1e-3)}


def test_a_grey_point_is_measured_again_and_judged_on_the_pooled_requests() -> None:
    def at_48(x: float, n: int) -> list[float] | None:
        if x != 48:
            return None
        return [20.5] * 10 + [19.5] * 11 if n == 1 else [20.5] * 21  # first: p50 19.5, a near miss

    m = Synthetic(1000.0, at_48)
    answer = asyncio.run(find_capacity(DECODE_20, m))
    assert m.calls[48] == 2 and answer.measured == 11
    assert (answer.answer, answer.failing) == (48, 52)
    point = next(p for p in answer.curve if p.x == 48)
    assert point.measurements == 2 and point.check.requests == 42 and point.holds

    once = Synthetic(1000.0, at_48)  # --repeats 1: the near miss decides
    answer = asyncio.run(find_capacity(DECODE_20, once, SearchParams(repeats=1)))
    assert once.calls[48] == 1 and once.order == [1, 2, 4, 8, 16, 32, 64, 48, 40, 44]
    assert (answer.answer, answer.failing, answer.measured) == (44, 48, 10)


def test_failing_at_the_start_says_why_after_one_probe() -> None:
    m = Synthetic(10.0)
    answer = asyncio.run(find_capacity(DECODE_20, m))
    assert m.order == [1] and answer.answer is None and answer.failing is None and answer.plus_minus is None
    assert answer.sentence() == "does not hold even at C=1: decode p50 9.99 tok/s/user < 20 tok/s/user"
    assert answer.to_json()["holds_at_start"] is False


def test_holding_at_the_maximum_says_so() -> None:
    m = Synthetic(1e6)
    answer = asyncio.run(find_capacity(DECODE_20, m, SearchParams(maximum=100)))
    assert m.order == [1, 2, 4, 8, 16, 32, 64, 100]
    assert answer.answer == 100 and answer.failing is None and answer.measured == 8
    assert answer.sentence().startswith("holds at every C tried, up to C=100, at decode p50 ≥ 20 tok/s/user")
    assert answer.to_json()["holds_at_max"] is True


def test_rates_bisect_to_a_tenth() -> None:
    m = Synthetic(146.0)  # holds up to 7.3 req/s
    answer = asyncio.run(find_capacity(DECODE_20, m, SearchParams(start=0.5, maximum=100, rate=True)))
    assert m.order == [0.5, 1, 2, 4, 8, 6, 7, 7.5]
    assert (answer.answer, answer.failing, answer.plus_minus) == (7, 7.5, 0.25)
    assert answer.sentence().startswith("holds up to 7 req/s ±0.25 at decode p50")


def test_an_explicit_resolution_and_bad_parameters() -> None:
    m = Synthetic(1000.0)
    answer = asyncio.run(find_capacity(DECODE_20, m, SearchParams(resolution=16)))
    assert m.order == [1, 2, 4, 8, 16, 32, 64, 48] and (answer.answer, answer.failing) == (48, 64)
    with pytest.raises(ValueError, match="need 0 < start <= max"):
        SearchParams(start=8, maximum=4)
    with pytest.raises(ValueError, match="repeats 0 must be >= 1"):
        SearchParams(repeats=0)


def test_capacity_from_levels_agrees_with_the_search_on_its_own_probes() -> None:
    m = Synthetic(1000.0)
    probes: list[tuple[LevelResult, list[RequestResult]]] = []

    async def keep(x: float) -> Probe:
        p = await m(x)
        probes.append((p.level, p.requests))
        return p

    searched = asyncio.run(find_capacity(DECODE_20, keep))
    read = capacity_from_levels(probes, DECODE_20)
    assert (read.answer, read.failing, read.goodput) == (searched.answer, searched.failing, searched.goodput)
    assert [p.x for p in read.curve] == [p.x for p in searched.curve] and read.measured == 0


def test_capacity_from_an_ordinary_sweep_pools_repeats_and_brackets_to_the_next_level() -> None:
    levels = [level_of(1, [100.0] * 8), level_of(8, [40.0] * 8), level_of(32, [21.0] * 8),
              level_of(32, [19.0] * 9), level_of(64, [10.0] * 8)]  # C=32 twice: pooled p50 19 -> fails
    answer = capacity_from_levels(levels, DECODE_20)
    assert (answer.answer, answer.failing, answer.plus_minus) == (8, 32, 12)
    assert next(p for p in answer.curve if p.x == 32).measurements == 2
    assert capacity_from_levels(levels[:1], DECODE_20).sentence().startswith("holds at every C tried, up to C=1")


def test_goodput_counts_only_the_requests_that_met_every_bound() -> None:
    level, requests = level_of(8, [25.0] * 6 + [15.0] * 4, tokens=100, wall_s=2.0)  # p50 25: holds
    answer = capacity_from_levels([(level, requests)], DECODE_20)
    point = answer.curve[0]
    assert point.holds and point.agg_tok_s == 500.0 and point.goodput == 300.0 and answer.goodput == 300.0


def test_a_curve_that_stays_non_monotonic_is_said_with_its_bracket_widened() -> None:
    """The issue's case: C=288 a near-zero figure, C=320 a healthy one; measured again, still so."""
    glitch = [1.0] * 20  # at C=288 every user crawls, whatever the load above it does

    m = Synthetic(6400.0, lambda x, n: glitch if x == 288 else None)  # truly holds while 6400/C >= 20: C=320
    answer = asyncio.run(find_capacity(DECODE_20, m, SearchParams(maximum=512)))
    assert answer.non_monotonic and 288 in answer.non_monotonic
    assert m.calls[288] == 2  # the failing point of the inversion measured once more, and it stayed
    assert answer.answer == 256 and answer.failing is not None and 288 < answer.failing  # widened past 288
    assert answer.failing == min(p.x for p in answer.curve if not p.holds and p.x > 288)
    text = answer.sentence()
    assert "not monotonic" in text and "C=288" in text and "no closer" in text and "±" not in text
    assert answer.to_json()["non_monotonic"] == [int(x) for x in answer.non_monotonic]


def test_a_failure_below_a_better_measured_load_is_measured_again_and_said() -> None:
    levels = [level_of(16, [1.0] * 20), level_of(32, [31.0] * 20)]  # a sweep's levels: fails at 16, holds at 32
    read = capacity_from_levels(levels, DECODE_20)
    assert read.non_monotonic == (16.0, 32.0) and read.answer is None and "not monotonic" in read.sentence()
    assert "fails at C=16 but holds at C=32" in read.sentence()

    m = Synthetic(1000.0, lambda x, n: [1.0] * 20 if (x, n) == (48, 1) else None)  # C=48 crawls once
    answer = asyncio.run(find_capacity(DECODE_20, m))  # ... below C=64, which measured clearly better
    assert m.calls[48] == 2 and answer.non_monotonic == (48.0, 64.0)  # measured again, pooled: still inverted
    assert (answer.answer, answer.failing) == (44, 64) and "between C=44 and below C=64, no closer" in answer.sentence()
    monotone = asyncio.run(find_capacity(DECODE_20, Synthetic(1000.0)))
    assert not monotone.non_monotonic and "±" in monotone.sentence()  # a clean curve: nothing said, nothing re-measured
