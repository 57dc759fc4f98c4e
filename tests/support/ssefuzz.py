"""Fuzz cases for the load client's SSE path, from a ``random.Random``.

Shared by the suite (hypothesis drives the ``Random`` and shrinks it) and by
``bench/bench_fuzz.py`` (target ``sse``, a seeded ``Random``, 10^5 cases), so
both attack the same way: real SGLang/vLLM chunks mutated where a parser
breaks (a field of the wrong type, huge, negative and non-finite counts,
missing and extra keys, deep nesting, cut JSON, broken UTF-8), SSE framing
(comments, ``event:`` lines, CRLF, no final newline), lines past the 1 MiB cap
(some of them in 4 KiB reads), and the whole stream cut into reads at random points.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from kimitui.loadgen.client import MAX_LINE, Clock, RequestTrace, SseSplitter, to_result
from kimitui.events import dump_event

_TEMPLATES: list[dict[str, Any]] = [
    {"id": "a1", "object": "chat.completion.chunk", "created": 1, "model": "m",
     "choices": [{"index": 0, "delta": {"role": None, "content": " tok", "reasoning_content": None},
                  "logprobs": None, "finish_reason": None, "matched_stop": None}],
     "usage": {"prompt_tokens": 10, "total_tokens": 13, "completion_tokens": 3}},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "length"}],
     "usage": {"prompt_tokens": 10, "completion_tokens": 8}},
    {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 8}},
    {"object": "error", "message": "out of memory", "code": 500},
    {"error": {"message": "bad request", "code": 400}},
]
_KEYS = ["choices", "usage", "delta", "content", "reasoning_content", "reasoning", "finish_reason",
         "completion_tokens", "prompt_tokens", "error", "object", "message", "index", "x"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, weighted towards the ones that break type assumptions."""
    k = rng.randrange(14 if depth < 3 else 9)
    if k == 0:
        return None
    if k == 1:
        return rng.choice([True, False])
    if k == 2:
        return rng.choice([0, 1, -1, -(2**40), 2**31, 2**63, 10**30, 7])
    if k == 3:
        return rng.choice([0.5, -1.5, 1e308, float("inf"), float("-inf"), float("nan")])
    if k == 4:
        return rng.choice(["", "7", "abc", "é", "\u0000", "length", "x" * rng.randrange(300)])
    if k == 5:
        return rng.randrange(100)
    if k in (6, 7, 8):
        return rng.choice(["tok", " ", "日本", "🙂"])
    if k in (9, 10):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(_KEYS): _value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for key, v in obj.items():
            out += _paths(v, (*prefix, key))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(rng: random.Random, obj: dict[str, Any]) -> Any:
    for _ in range(rng.randrange(4)):
        path = rng.choice(_paths(obj))
        if not path:
            if rng.random() < 0.2:
                return _value(rng)
            obj[rng.choice(_KEYS)] = _value(rng)
            continue
        parent: Any = obj
        for step in path[:-1]:
            parent = parent[step]
        op = rng.randrange(3)
        if op == 0:
            parent[path[-1]] = _value(rng)
        elif op == 1 and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[rng.choice(_KEYS)] = _value(rng)
    return obj


def _line(rng: random.Random) -> bytes:
    k = rng.randrange(100)
    if k < 55:
        obj = _mutate(rng, copy.deepcopy(rng.choice(_TEMPLATES))) if rng.random() < 0.8 else rng.choice(_TEMPLATES)
        text = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
        return b"data:" + rng.choice([b" ", b"", b"  "]) + text.encode()
    if k < 62:
        return b"data: [DONE]"
    if k < 68:
        return rng.choice([b"", b": keep-alive", b"event: message", b"id: 7", b"retry: 10", b" "])
    if k < 74:  # cut JSON, broken UTF-8, trailing data
        raw = json.dumps(rng.choice(_TEMPLATES)).encode()
        return b"data: " + rng.choice([raw[:rng.randrange(len(raw))], raw[:20] + b"\xff\xfe" + raw[20:],
                                       raw + b" x", raw + raw])
    if k < 78:  # deep nesting
        n = rng.choice([10, 900, 5000, 100_000])
        return b"data: " + b"[" * n + b"]" * rng.choice([0, n])
    if k < 84:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
    if k < 86:  # near and past the line cap
        return b"data: " + b"x" * (MAX_LINE + rng.choice([-100, -6, 0, 1, 5000]))
    return b"data: " + json.dumps(_value(rng)).encode()


def sse_case(rng: random.Random) -> tuple[list[bytes], bool]:
    """One stream: up to 8 lines, cut into reads at random points; whether the body then ends.

    One case in a hundred is one long line in 4 KiB reads (half the cap, or past it): where a
    splitter that re-joins its buffer on every read goes quadratic.
    """
    if rng.random() < 0.01:
        line = b"data: " + b"x" * rng.choice([MAX_LINE // 2, MAX_LINE + 4096]) + b"\n"
        return [line[i:i + 4096] for i in range(0, len(line), 4096)], True
    body = b"".join(_line(rng) + rng.choice([b"\n", b"\n\n", b"\r\n", b"\n"]) for _ in range(rng.randrange(9)))
    if rng.random() < 0.2:
        body = body.rstrip(b"\n")
    if rng.random() < 0.05 and len(body) < 2000:
        reads = [body[i:i + 1] for i in range(len(body))]
    else:
        cuts = sorted(rng.randrange(len(body) + 1) for _ in range(rng.randrange(7)))
        reads = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)]) if b > a]
    return reads, rng.random() < 0.7


def feed_reads(reads: list[bytes], close: bool, *, end_ns: int = 100_000, request_id: str = "fuzz") -> RequestTrace:
    """Reads through the SSE splitter as a stream delivers them (read i stamped 1000 + i); ``close`` ends the
    body after the last read (at ``end_ns``), and a request that never ended is ended at 2 x ``end_ns``."""
    trace = RequestTrace(request_id, 1, False, 0)
    sse = SseSplitter(trace)
    for i, data in enumerate(reads):
        if not sse.feed(data, 1000 + i):
            break
    else:
        if close:
            sse.end(end_ns)
    if trace.end_ns is None:
        trace.end_ns = 2 * end_ns
    return trace


def run_sse(case: tuple[list[bytes], bool]) -> None:
    """A stream's whole client-side path: splitter, payloads, the result and its JSON; must never raise."""
    trace = feed_reads(*case)
    if trace.error_class not in (None, "malformed", "stream_error"):
        raise AssertionError(f"error class {trace.error_class}: {trace.error}")
    if trace.error_class == "malformed" and not trace.error:
        raise AssertionError("malformed without a reason")
    dump_event(to_result(trace, "fuzz", Clock()))


def sse_runner() -> Any:
    """``bench/bench_fuzz.py``'s contract: a runner factory."""
    return run_sse
