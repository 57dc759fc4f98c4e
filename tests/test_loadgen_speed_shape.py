"""Issue 33: the load worker's shortcuts give exactly what the long way gives (correctness only, no timing here).

A request's inter-token latencies are no longer all turned into seconds and sorted: their gaps are sorted as
integers, and only the two each quantile reads become seconds; the largest gap reuses the same gaps.  A
level's steady-window tokens and its chunk gaps are summed and listed without a tuple per chunk.  Each figure
must equal, bit for bit, what the step-by-step way (kept here as it was) gives, on traces of every shape a
stream can leave: one token a chunk, per-chunk usage with several tokens, a final count spread over the
chunks, ties, one chunk, none, an incomplete request whose trailing silence counts, and results without
chunks or with chunk tokens that do not match their offsets.
"""

from __future__ import annotations

import operator
import random

import pytest

from kimitui.events import RequestResult
from kimitui.analysis.level_stats import _chunk_gaps, _window_tokens, chunk_times
from kimitui.loadgen.client import Clock, RequestTrace, _quantile, to_result


def _old_token_itls(trace: RequestTrace) -> list[float]:
    ns, tok = trace.chunk_ns, trace.chunk_tok
    if len(ns) < 2:
        return []
    if not trace.multi_token and trace.usage_tokens is not None and trace.usage_tokens > len(ns):
        each = (trace.usage_tokens - 1) / (len(ns) - 1)
        return [(b - a) / 1e9 / each for a, b in zip(ns, ns[1:])]
    if not trace.multi_token:
        return [(b - a) / 1e9 for a, b in zip(ns, ns[1:])]
    return [(b - a) / 1e9 / n for a, b, n in zip(ns, ns[1:], tok[1:])]


def _old_max_gap(trace: RequestTrace) -> tuple[float | None, int | None]:
    stamps = trace.chunk_ns
    if not trace.ok and stamps and trace.end_ns is not None:
        stamps = [*stamps, trace.end_ns]
    if len(stamps) < 2:
        return None, None
    gaps = list(map(operator.sub, stamps[1:], stamps))
    best = max(gaps)
    return best / 1e9, stamps[gaps.index(best)]


def _trace(rng: random.Random) -> RequestTrace:
    """A finished (or cut) stream of a random shape."""
    t = RequestTrace("r", 8, False, 1_000_000_000)
    t.sent_ns = 1_000_000_000 + rng.randint(0, 10**6)
    t.headers_ns = t.sent_ns + rng.randint(10**5, 10**8)
    n = rng.choice([0, 1, 2, 3, rng.randint(4, 300)])
    shape = rng.choice(["one", "multi", "spread", "ties"])
    ns = t.headers_ns
    for _ in range(n):
        ns += rng.choice([1, 7, 1000, 250_000]) if shape == "ties" else rng.randint(1, 5 * 10**8)
        k = rng.randint(1, 4) if shape == "multi" else 1
        t.chunk_ns.append(ns)
        t.chunk_tok.append(k)
        t.tokens += k
        t.multi_token = t.multi_token or k != 1
    if n:
        t.first_ns, t.last_ns = t.chunk_ns[0], t.chunk_ns[-1]
    if shape == "spread" and n > 1:
        t.usage_tokens = n * rng.randint(2, 5) + rng.randint(0, 3)
    elif rng.random() < 0.5:
        t.usage_tokens = t.tokens
    t.status = 200
    t.end_ns = ns + rng.randint(0, 3 * 10**9)
    if rng.random() < 0.25:
        t.fail(rng.choice(["timeout", "reset", "stall"]), "cut")
    else:
        t.saw_done = True
    return t


@pytest.mark.parametrize("seed", range(4))
def test_the_itl_quantiles_and_the_largest_gap_are_the_long_ways_bit_for_bit(seed: int) -> None:
    rng = random.Random(seed)
    clock = Clock()
    for _ in range(1500):
        trace = _trace(rng)
        result = to_result(trace, "sw", clock)
        itls = sorted(_old_token_itls(trace))
        assert result.itl_p50_s == (_quantile(itls, 0.5) if itls else None)
        assert result.itl_p99_s == (_quantile(itls, 0.99) if itls else None)
        gap, at = _old_max_gap(trace)
        assert result.max_gap_s == gap
        assert result.max_gap_at == (clock.wall(at) if at is not None else None)


def _results(rng: random.Random, n: int) -> list[RequestResult]:
    clock = Clock()
    out = []
    for _ in range(n):
        trace = _trace(rng)
        result = to_result(trace, "sw", clock, keep_chunks=rng.random() < 0.95)
        if result.chunk_offsets_ms and rng.random() < 0.1:  # a recording's chunk_tokens that do not match
            result = result.model_copy(update={"chunk_tokens": [2] * (len(result.chunk_offsets_ms) + 1)})
        out.append(result)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_the_steady_windows_tokens_and_the_chunk_gaps_are_the_long_ways_bit_for_bit(seed: int) -> None:
    rng = random.Random(seed)
    results = _results(rng, 400)
    times = sorted(t for r in results for t, _ in chunk_times(r))
    for _ in range(40):
        start, end = sorted(rng.sample(times, 2)) if len(times) > 1 else (0.0, 1.0)
        old = sum(n for r in results for t, n in chunk_times(r) if start < t <= end)
        assert sum(_window_tokens(results, start, end)) == old
    old_gaps: list[float] = []
    for r in results:
        offs = r.chunk_offsets_ms or []
        old_gaps.extend((offs[i] - offs[i - 1]) / 1000.0 for i in range(1, len(offs)))
    assert _chunk_gaps(results) == old_gaps
