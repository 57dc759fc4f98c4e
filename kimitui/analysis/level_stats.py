"""Level statistics from request results: pure functions, no I/O.

They take :class:`~kimitui.events.RequestResult` events (not live traces), so a
report or a replay can recompute them from a recording.

Definitions (documented here because operators will trust them):

* **Seed-comparable aggregate** = output tokens of the level's measured
  requests / level wall time (first measured send to last measured end), the
  seeds' ``agg``.  One slow tail request drags it down; that is the point of
  keeping it next to the steady-state figure.
* **Steady-state aggregate** = tokens that *arrived* during the longest
  contiguous window in which at least ``ceil(r * C)`` measured requests were
  in flight (``r = spec.steady_ratio``, 0.9 by default; SGLang's steady-state
  mode uses the same idea against peak concurrency), divided by that window's
  length.  Ramp-up and the drain tail fall outside it; dips shorter than
  0.1 s (a slot handing over to its next request) do not end the window.  At C=1 every moment of
  a request is "in flight", so a stall *inside* a request stays in the window:
  there the server really produced nothing, and the per-request median decode
  rate is what shows the model itself is not slow.
* **Straggler** = a measured request (finished or not) whose decode rate is
  below ``straggler_ratio`` (0.5) x the level's median decode rate, or whose
  largest inter-chunk gap exceeds ``max(straggler_gap_s, 10 x the level's
  median inter-chunk gap)``.  Each keeps its largest gap's wall-clock window.
* **Decode tok/s** = (tokens - tokens of the first chunk) / (t_last - t_first):
  with one token per chunk this is the usual (tokens - 1)/(t_last - t_first);
  with speculative multi-token chunks it does not credit the first chunk's
  extra tokens to the decode interval.
* **Completed requests only**: output tokens, wall, both aggregates and every
  latency percentile count requests that completed (``ok``).  Tokens that a
  failed, aborted or cancelled request received before it ended are not
  output: counting them made an all-aborted level read 624 tok/s.  Wall is the
  first completed request's send to the last completed end.  Failures are
  counted by class, and the first message of each class is kept (``errors``).
* **Status** (:func:`level_status`): ``aborted`` if the sweep was aborted while
  the level ran, ``cut`` if the level time limit cancelled it, ``failed`` if no
  measured request completed or the failed fraction exceeds ``max_error_rate``,
  else ``ok``.  Only ``ok`` levels are a peak (:func:`peak_level`), a curve
  point or a verdict's evidence.  :func:`effective_status` derives it for old
  recordings whose levels carry no status.
"""

from __future__ import annotations

import json
import math
import operator
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from kimitui.events import ClientSummary, LevelResult, LevelStatus, Percentiles, RequestResult, Straggler, SweepSpec

OVERSAT_TTFT_GROWTH = 1.5
OVERSAT_TPUT_GROWTH = 1.05
OVERSAT_MIN_TTFT_RISE_S = 0.25
"""...and by at least this much: a 1 ms TTFT doubling to 2 ms is jitter, not queueing."""
GAP_MEDIAN_FACTOR = 10.0
STEADY_MERGE_GAP_S = 0.1


def quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default) of a sorted, non-empty sequence."""
    pos = (len(sorted_vals) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def percentiles(values: Sequence[float | None]) -> Percentiles:
    """p50/p90/p99/mean of the values that exist; all None when there are none."""
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return Percentiles()
    return Percentiles(p50=quantile(vals, 0.5), p90=quantile(vals, 0.9), p99=quantile(vals, 0.99),
                       mean=sum(vals) / len(vals))


def chunk_times(r: RequestResult) -> list[tuple[float, float]]:
    """(wall time, tokens) of each content chunk of a request."""
    offs = r.chunk_offsets_ms or []
    if not offs:
        return []
    return [(r.sent + o / 1000.0, float(n)) for o, n in zip(offs, _chunk_tokens(r, len(offs)))]


def _chunk_tokens(r: RequestResult, chunks: int) -> Sequence[float]:
    """Tokens per content chunk: the per-chunk counts when they match the chunks, else the total spread evenly."""
    if r.chunk_tokens and len(r.chunk_tokens) == chunks:
        return r.chunk_tokens
    each = r.completion_tokens / chunks if r.completion_tokens else 1.0
    return [each] * chunks


def steady_window(intervals: Sequence[tuple[float, float]], threshold: int,
                  merge_gap_s: float = STEADY_MERGE_GAP_S) -> tuple[float, float] | None:
    """Longest window in which at least ``threshold`` intervals overlap.

    Dips below the threshold shorter than ``merge_gap_s`` do not split a window:
    a sustained slot hands over to its next request a few hundred microseconds
    after the last one ended, and that is not the end of steady state.
    """
    if threshold < 1 or not intervals:
        return None
    edges: list[tuple[float, int]] = []
    for start, end in intervals:
        if end > start:
            edges.append((start, 1))
            edges.append((end, -1))
    edges.sort(key=lambda e: (e[0], -e[1]))  # at the same instant a start counts before an end
    windows: list[list[float]] = []
    count = 0
    opened: float | None = None
    for t, d in edges:
        before = count
        count += d
        if before < threshold <= count:
            opened = t
        elif before >= threshold > count and opened is not None:
            if windows and opened - windows[-1][1] <= merge_gap_s:
                windows[-1][1] = t
            else:
                windows.append([opened, t])
            opened = None
    if not windows:
        return None
    best = max(windows, key=lambda w: w[1] - w[0])
    return best[0], best[1]


def steady_rate(results: Sequence[RequestResult], concurrency: int, ratio: float) -> tuple[float | None, float | None, float | None, float | None]:
    """(tok/s, window seconds, window start, window end) over the steady-state window."""
    threshold = max(1, math.ceil(ratio * concurrency - 1e-9))
    intervals = [(r.sent, r.sent + (r.e2e_s or 0.0)) for r in results]
    win = steady_window(intervals, threshold)
    if win is None or win[1] <= win[0]:
        return None, None, None, None
    start, end = win
    return sum(_window_tokens(results, start, end)) / (end - start), end - start, start, end


def _window_tokens(results: Sequence[RequestResult], start: float, end: float) -> Iterator[float]:
    """The tokens of each chunk that arrived in (start, end], in order: :func:`chunk_times` without its tuples
    (a million chunks at C=2048; the same floats, summed in the same order)."""
    for r in results:
        offs = r.chunk_offsets_ms
        if not offs:
            continue
        sent = r.sent
        for o, n in zip(offs, _chunk_tokens(r, len(offs))):
            if start < sent + o / 1000.0 <= end:
                yield float(n)


def _chunk_gaps(results: Sequence[RequestResult]) -> list[float]:
    gaps: list[float] = []
    sub = operator.sub
    for r in results:
        offs = r.chunk_offsets_ms
        if offs:
            gaps.extend([d / 1000.0 for d in map(sub, offs[1:], offs)])
    return gaps


def find_stragglers(results: Sequence[RequestResult], spec: SweepSpec) -> list[Straggler]:
    """Requests far below the level's median decode rate or with a stall gap (rule in the module doc)."""
    decodes = [r.decode_tok_s for r in results if r.decode_tok_s is not None]
    median_decode = statistics.median(decodes) if decodes else None
    gaps = _chunk_gaps(results)
    gap_limit = spec.straggler_gap_s
    if gaps:
        gap_limit = max(gap_limit, GAP_MEDIAN_FACTOR * statistics.median(gaps))
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    median_ttft = statistics.median(ttfts) if len(ttfts) > 1 else None
    ttft_limit = max(spec.straggler_gap_s, GAP_MEDIAN_FACTOR * median_ttft) if median_ttft is not None else None
    out: list[Straggler] = []
    for r in results:
        reasons = []
        if (median_decode and r.decode_tok_s is not None and len(decodes) > 1
                and r.decode_tok_s < spec.straggler_ratio * median_decode):
            reasons.append(f"decode {r.decode_tok_s:.1f} tok/s (median {median_decode:.1f})")
        if r.max_gap_s is not None and r.max_gap_s > gap_limit:
            reasons.append(f"gap {r.max_gap_s:.2f} s > {gap_limit:.2f} s")
        slow_start = ttft_limit is not None and r.ttft_s is not None and r.ttft_s > ttft_limit
        if slow_start:
            reasons.append(f"first token after {r.ttft_s:.2f} s > {ttft_limit:.2f} s")
        if not reasons:
            continue
        out.append(Straggler(
            request_id=r.request_id,
            concurrency=r.concurrency,
            decode_tok_s=r.decode_tok_s,
            median_decode_tok_s=median_decode,
            max_gap_s=r.max_gap_s,
            gap_start=r.max_gap_at,
            gap_end=(r.max_gap_at + r.max_gap_s) if r.max_gap_at is not None and r.max_gap_s is not None else None,
            reason="; ".join(reasons),
            ttft_s=r.ttft_s if slow_start else None,
            median_ttft_s=median_ttft if slow_start else None,
        ))
    return out


CLIENT_LAG_MAX_MS = 50.0
"""Loop lag at or above one 50 ms timer period: every chunk stamped in that stall was stamped that late,
which lands in TTFT/ITL p99 and the largest gaps."""
CLIENT_LAG_MIN_MS = 10.0
CLIENT_LAG_TTFT_FRACTION = 0.10
"""...or at or above 10 ms and 10 % of the level's TTFT p50: big enough to move the percentiles themselves."""
CLIENT_CPU_MAX_PCT = 90.0
"""The load process is one thread: at 90 % of a core its reads queue behind each other."""
ERROR_MESSAGE_CHARS = 300


def server_message(error: str) -> str:
    """``HTTP 404: {"object":"error","message":"The model `x` does not exist."...}`` ->
    ``HTTP 404: The model `x` does not exist.``: the server's own words, without the JSON around them."""
    m = re.match(r"(HTTP \d+): (.*)", error, re.S)
    if m:
        try:
            body = json.loads(m.group(2))
        except ValueError:
            body = None
        msg = None
        if isinstance(body, dict):
            err = body.get("error")
            msg = err.get("message") if isinstance(err, dict) else body.get("message") or body.get("detail")
            if msg is None and isinstance(err, str):
                msg = err
        if isinstance(msg, str) and msg.strip():
            error = f"{m.group(1)}: {msg.strip()}"
    error = " ".join(error.split())
    return error if len(error) <= ERROR_MESSAGE_CHARS else error[:ERROR_MESSAGE_CHARS - 3] + "..."


def first_errors(results: Iterable[RequestResult]) -> dict[str, str]:
    """The first message of each error class, in the order the requests ended."""
    out: dict[str, str] = {}
    for r in results:
        if not r.ok:
            out.setdefault(r.error_class or "unknown", server_message(r.error or r.error_class or "unknown error"))
    return out


def _status_from_counts(requests: int, ok: int, failed: int, failures: dict[str, int], *,
                        aborted: str | None, cut: str | None, max_error_rate: float) -> tuple[LevelStatus, str]:
    n_aborted = failures.get("aborted", 0)
    n_cancelled = failures.get("cancelled", 0)
    if aborted:
        what = f"all {requests} requests aborted" if n_aborted and n_aborted == requests else (
            f"{n_aborted} of {requests} requests aborted, {ok} completed" if n_aborted
            else f"aborted with {ok} of {requests} requests completed")
        return "aborted", f"{what} ({aborted})"
    if cut:
        what = f"{n_cancelled} of {requests} requests cancelled, {ok} completed" if n_cancelled else (
            f"{ok} of {requests} requests completed")
        return "cut", f"{what} ({cut})"
    genuine = failed - n_aborted - n_cancelled
    classes = ", ".join(f"{k} {v}" for k, v in sorted(failures.items()))
    if requests == 0:
        return "failed", "no measured request was sent"
    if ok == 0:
        return "failed", f"all {requests} requests failed ({classes})"
    if genuine / requests > max_error_rate:
        return "failed", f"{genuine} of {requests} requests failed ({classes}), above {max_error_rate:.0%}"
    return "ok", ""


def level_status(results: Sequence[RequestResult], *, aborted: str | None = None, cut: str | None = None,
                 max_error_rate: float = 0.5) -> tuple[LevelStatus, str]:
    """(status, reason) of a level from its measured requests and whether the sweep aborted or cut it."""
    measured = [r for r in results if not r.warmup]
    failures: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            failures[r.error_class or "unknown"] = failures.get(r.error_class or "unknown", 0) + 1
    ok = sum(1 for r in measured if r.ok)
    return _status_from_counts(len(measured), ok, len(measured) - ok, failures, aborted=aborted, cut=cut,
                               max_error_rate=max_error_rate)


def effective_status(level: LevelResult, max_error_rate: float = 0.5) -> tuple[LevelStatus, str]:
    """A level's (status, reason); for a level recorded before levels had a status, derived from its counts.

    Old recordings: ``aborted`` requests mean the sweep was aborted in that level, ``cancelled`` ones
    (or a ``level time limit`` stop) that the time limit cut it; otherwise the failed/ok counts decide,
    as :func:`level_status` does.  Their figures still include failed requests' tokens, which is one
    more reason a failed level must never be their peak.
    """
    if "status" in level.model_fields_set:
        return level.status, level.status_reason
    stopped = level.stopped or ""
    aborted = (stopped or "the sweep was aborted") if level.failures.get("aborted") else None
    cut = None
    if level.failures.get("cancelled") or stopped.startswith("level time limit"):
        cut = stopped if stopped.startswith("level time limit") else "level time limit"
    return _status_from_counts(level.requests, level.ok, level.failed, level.failures, aborted=aborted, cut=cut,
                               max_error_rate=max_error_rate)


def with_status(level: LevelResult, max_error_rate: float = 0.5) -> LevelResult:
    """The level with ``status``/``status_reason`` filled in (derived for old recordings; as is otherwise)."""
    if "status" in level.model_fields_set:
        return level
    status, reason = effective_status(level, max_error_rate)
    return level.model_copy(update={"status": status, "status_reason": reason})


def is_valid(level: LevelResult) -> bool:
    """May this level be a peak, a curve point or a verdict's evidence?  (Old recordings too.)"""
    return effective_status(level)[0] == "ok"


def level_rate(level: LevelResult) -> float | None:
    """The figure a peak is judged by: the steady-state rate, or the aggregate where there is none."""
    return level.steady_tok_s or level.agg_tok_s


def seed_comparable(level: LevelResult) -> float | None:
    """The figure a peak is named by in every view: the aggregate (output tokens over the level's wall time),
    the figure the seeds' field notes quote; the steady rate is said beside it, labelled."""
    return level.agg_tok_s


def peak_level(levels: Iterable[LevelResult], figure: Callable[[LevelResult], float | None] = level_rate,
               max_error_rate: float = 0.5) -> LevelResult | None:
    """The best valid level by ``figure`` (:func:`level_rate` unless told, e.g. :func:`seed_comparable`
    for the seed-comparable peak); failed, aborted and cut levels are never the peak."""
    best: LevelResult | None = None
    best_rate = 0.0
    for lv in levels:
        rate = figure(lv)
        if rate and math.isfinite(rate) and rate > best_rate and effective_status(lv, max_error_rate)[0] == "ok":
            best, best_rate = lv, rate
    return best


def client_distortion(client: ClientSummary | None, ttft_p50_s: float | None) -> str | None:
    """Why the load process itself distorted a level's latency figures, or None (thresholds above)."""
    if client is None:
        return None
    why = []
    lag = client.loop_lag_max_ms
    if lag is not None:
        ttft_ms = ttft_p50_s * 1000.0 if ttft_p50_s else None
        if lag >= CLIENT_LAG_MAX_MS:
            why.append(f"event-loop lag up to {lag:.0f} ms (limit {CLIENT_LAG_MAX_MS:.0f} ms)")
        elif ttft_ms is not None and lag >= max(CLIENT_LAG_MIN_MS, CLIENT_LAG_TTFT_FRACTION * ttft_ms):
            why.append(f"event-loop lag up to {lag:.0f} ms, over 10 % of TTFT p50 {ttft_ms:.0f} ms")
    if client.cpu_max_pct is not None and client.cpu_max_pct >= CLIENT_CPU_MAX_PCT:
        why.append(f"load process at {client.cpu_max_pct:.0f} % of a core")
    if not why:
        return None
    return "client saturated: " + "; ".join(why) + ": latencies were stamped late"


CLIENT_THROUGHPUT_LAG_SHARE = 0.01
"""A stall of the load process holds back a level's throughput (not only its stamps) when it is at least
:data:`CLIENT_LAG_MAX_MS` and 1 % of the level's wall time: a 10 ms hiccup in a 2 s level moves TTFT p50
at C=1, not the tokens per second."""


def client_limited_throughput(level: LevelResult) -> bool:
    """Did the load process hold back the level's throughput — its CPU saturated, or stalled for a
    material share of the level — rather than only stamp its latencies late?  A recording without the
    client's figures has only the reason: then any distortion counts."""
    c = level.client
    if c is None:
        return level.client_distorted is not None
    if c.cpu_max_pct is not None and c.cpu_max_pct >= CLIENT_CPU_MAX_PCT:
        return True
    lag = c.loop_lag_max_ms
    return (lag is not None and lag >= CLIENT_LAG_MAX_MS
            and lag / 1000.0 >= CLIENT_THROUGHPUT_LAG_SHARE * max(level.wall_s, 1e-9))


def level_result(sweep_id: str, concurrency: int, repeat: int, spec: SweepSpec,
                 results: Sequence[RequestResult], *, host: str = "sim", t: float | None = None,
                 stopped: str | None = None, aborted: str | None = None, cut: str | None = None,
                 client: ClientSummary | None = None) -> LevelResult:
    """Everything a level reports, from its measured (non-warm-up) requests.

    ``aborted``/``cut``: why the sweep aborted or the time limit cut this level, if it did.
    ``client``: the load process's health over the level (:class:`~kimitui.loadgen.client_health.HealthMonitor`).
    """
    measured = [r for r in results if not r.warmup]
    failures: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            key = r.error_class or "unknown"
            failures[key] = failures.get(key, 0) + 1
    ok = [r for r in measured if r.ok]
    tokens = sum(r.completion_tokens for r in ok)
    wall = 0.0
    if ok:
        wall = max(r.sent + (r.e2e_s or 0.0) for r in ok) - min(r.sent for r in ok)
    steady, window, w_start, w_end = steady_rate(ok, concurrency, spec.steady_ratio)
    delays = [(r.sent - r.intended_send) * 1000.0 for r in measured]
    status, reason = _status_from_counts(len(measured), len(ok), len(measured) - len(ok), failures,
                                         aborted=aborted, cut=cut, max_error_rate=spec.max_error_rate)
    ttft = percentiles([r.ttft_s for r in ok])
    level = LevelResult(
        t=time.time() if t is None else t,  # as the event's own default would
        host=host,
        sweep_id=sweep_id,
        concurrency=concurrency,
        repeat=repeat,
        requests=len(measured),
        ok=len(ok),
        failed=len(measured) - len(ok),
        failures=failures,
        wall_s=wall,
        output_tokens=tokens,
        agg_tok_s=tokens / wall if wall > 0 else None,
        steady_tok_s=steady,
        steady_window_s=window,
        steady_start=w_start,
        steady_end=w_end,
        ttft=ttft,
        tpot=percentiles([r.tpot_s for r in ok]),
        itl=percentiles([r.itl_p50_s for r in ok]),
        decode_tok_s=percentiles([r.decode_tok_s for r in ok]),
        e2e_tok_s=percentiles([r.e2e_tok_s for r in ok]),
        stragglers=find_stragglers(measured, spec),
        stopped=stopped,
        mode=spec.mode,
        dispatch_delay_p99_ms=percentiles(delays).p99,
        status=status,
        status_reason=reason,
        errors=first_errors(measured),
        prompt_tokens=percentiles([float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]),
        client=client,
        client_distorted=client_distortion(client, ttft.p50),
    )
    figures = spec_figures(ok)
    return level.model_copy(update=figures) if figures else level


def spec_figures(ok: Sequence[RequestResult]) -> dict[str, object]:
    """A level's speculative figures from its completed requests that carried them.

    Per request the accept length and rate as the server reported them; for the level, SGLang's own
    definition (0.5.23 ``metrics_reporter.py``: accepted tokens / verify passes), i.e. every token of
    those requests over every verify pass: a long request weighs by its passes, as on the Decode line.
    """
    with_spec = [r for r in ok if r.spec is not None and r.spec.verify_ct]
    if not with_spec:
        return {}
    verifies = sum(r.spec.verify_ct or 0 for r in with_spec if r.spec is not None)
    tokens = sum(r.completion_tokens for r in with_spec)
    return {
        "spec_accept_len": percentiles([r.spec.accept_length for r in with_spec if r.spec is not None]),
        "spec_accept_rate": percentiles([r.spec.accept_rate for r in with_spec if r.spec is not None]),
        "spec_accept_len_level": tokens / verifies if verifies else None,
        "spec_requests": len(with_spec),
    }


def oversaturation(prev: LevelResult | None, cur: LevelResult) -> str | None:
    """Why ``cur`` shows over-saturation against ``prev``: TTFT p50 up >= 1.5x and by >= 0.25 s while
    throughput grew < 5 % (requests are queueing, not being served faster)."""
    if prev is None or cur.concurrency <= prev.concurrency:
        return None
    t0, t1 = prev.ttft.p50, cur.ttft.p50
    r0 = prev.steady_tok_s or prev.agg_tok_s
    r1 = cur.steady_tok_s or cur.agg_tok_s
    if not (t0 and t1 and r0 and r1):
        return None
    if t1 >= OVERSAT_TTFT_GROWTH * t0 and t1 - t0 >= OVERSAT_MIN_TTFT_RISE_S and r1 < OVERSAT_TPUT_GROWTH * r0:
        return (f"over-saturated: TTFT p50 {t0:.2f}->{t1:.2f} s while throughput "
                f"{r0:.0f}->{r1:.0f} tok/s (C={prev.concurrency}->{cur.concurrency})")
    return None


def error_rate_exceeded(level: LevelResult, max_rate: float) -> str | None:
    if level.requests and level.failed / level.requests > max_rate:
        return f"error rate {level.failed}/{level.requests} above {max_rate:.0%}"
    return None
