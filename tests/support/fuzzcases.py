"""Fuzz cases for the log parser and the GPU agent's frames, from a ``random.Random``.

Shared by the suite (hypothesis drives the ``Random`` and shrinks it) and by
``bench/bench_fuzz.py`` (a seeded ``Random``, 10^5 cases), so both attack the
same way: real lines and frames, mutated where parsers break (repeated runs
that make a pattern backtrack, huge and non-finite numbers, extra keys, missing
keys, wrong types, deep nesting, cut lines).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from kimitui.events import dump_event
from kimitui.launcher.readiness import Readiness
from kimitui.sglang.log import parse_line, split_glued, to_event, to_stats
from tests.support.logsamples import ALL

LOG_LINES = [g[0] for g in ALL]

# pieces that open a pattern (so the parser goes on to its regexes) and runs that backtrack
_NEEDLES = [
    "Watchdog timeout (self.watchdog_", "watchdog timeout (watchdog_timeout=", "Decode batch. ", "Prefill batch, ",
    "Decode batch [", ", ", ": ", "#running-req: ", "rank: 3", "cuda graph: ", "max_total_num_tokens=", "=",
    "Loading safetensors checkpoint shards: ", "loading ", "shards: ", "% Completed | ", "/", "Capture ", " end.",
    " begin.", "Capture cuda graph bs [", "Capturing batches (bs=", " avail_mem=", " GB): ", "%|", "|",
    "KV Cache is allocated. dtype: ", "#tokens: ", "elapsed=", "Time elapsed: ", "[EPLBManager] rebalance end time=",
    "server_args=ServerArgs(", "a='", 'b="', "\\", "Subprocess ", " (pid=", ") crashed with exit code ",
    "Tried to allocate ", "Timeout(ms)=", "#retracted_reqs: ", "INFO:     ", '127.0.0.1:1 - "GET / HTTP/1.1" 200',
    "ValueError: ", "a.b.", "x.py:1: FutureWarning: ", "\x1b[31m", "\x1b[", "\r", "\n", "\t", "[2026-05-28 10:00:00",
    "[2026-05-28 10:00:00 TP1 EP1] ", "2026-05-28T10:00:00+0000 host python3[12]: ",
    "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 file.py:222] ", " TP", "DP", "é", "٣", "²", "\u2028", "\x00",
]
_RUNS = ["9", "a", "_", " ", ".", "a.", "1.", "a=", ", ", ": ", "[", "]", "(", "|", "%", "\\", "'", "é", "x y"]
_NUMBERS = ["0", "-1", "1e999", "inf", "nan", "NaN", "-0.0", "1_000", "0x1f", "²", "٣", "1.2.3", ".", "1e-999",
            "9" * 400, "9" * 5000, "1." + "0" * 400, "3.14" * 100]


def _run(rng: random.Random) -> str:
    """A long run of one piece: what makes a super-linear pattern show itself."""
    piece = rng.choice(_RUNS + _NEEDLES)
    return piece * rng.choice((10, 100, 1000, 4000, 20000 // max(1, len(piece))))


def log_case(rng: random.Random) -> str:
    """One log line: a real one mutated 1-4 times, or one built from needles and runs."""
    if rng.random() < 0.3:
        line = "".join(rng.choice(_NEEDLES) if rng.random() < 0.7 else _run(rng) for _ in range(rng.randint(1, 6)))
    else:
        line = rng.choice(LOG_LINES)
    for _ in range(rng.randint(1, 4)):
        i = rng.randint(0, len(line))
        j = rng.randint(i, min(len(line), i + 40))
        op = rng.randrange(8)
        if op == 0:  # insert a needle
            line = line[:i] + rng.choice(_NEEDLES) + line[i:]
        elif op == 1:  # insert a long run
            line = line[:i] + _run(rng) + line[i:]
        elif op == 2:  # delete a slice
            line = line[:i] + line[j:]
        elif op == 3:  # repeat a slice
            line = line[:i] + line[i:j] * rng.choice((2, 50, 500)) + line[j:]
        elif op == 4:  # a number becomes a strange one
            k = next((x for x in range(i, len(line)) if line[x].isdigit()), None)
            if k is not None:
                end = k
                while end < len(line) and (line[end].isdigit() or line[end] == "."):
                    end += 1
                line = line[:k] + rng.choice(_NUMBERS) + line[end:]
        elif op == 5:  # an extra "key: value" (the Decode line with "rank: 3")
            key = rng.choice(["rank", "ranks", "ts", "iter", "truncated", "#running-req", "token usage", "x" * 300])
            line = line + f", {key}: {rng.choice(_NUMBERS + ['3', 'True', 'abc'])}"
        elif op == 6:  # cut
            line = line[:i]
        else:  # random characters
            line = line[:i] + "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randint(1, 20))) + line[i:]
    return line


# --------------------------------------------------------------------------- agent frames


def _gpu_static(i: int) -> dict[str, Any]:
    return {"index": i, "uuid": f"GPU-{i:08x}", "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "memory_total_mib": 97887.0, "power_limit_w": 600.0, "pcie_max_gen": 5, "pcie_max_width": 16,
            "supported": ["util_pct", "mem_used_mib", "power_w", "temp_c"], "unsupported": {"fan": "not_supported"}}


def _reading(i: int) -> dict[str, Any]:
    return {"index": i, "util_pct": 93.0, "mem_util_pct": 40.0, "mem_used_mib": 90000.0, "power_w": 410.5,
            "temp_c": 61.0, "sm_clock_mhz": 2400.0, "mem_clock_mhz": 14000.0, "pcie_tx_kbps": 1200.0,
            "pcie_rx_kbps": 800.0, "throttle_reasons": ["sw_power_cap"], "pstate": 0}


def good_frames(n_gpus: int = 8) -> list[dict[str, Any]]:
    """One of each frame the agent sends, shaped as it sends them."""
    return [
        {"type": "caps", "v": 1, "t": 1.0, "backend": "fake", "driver": "580.65", "nvml_version": "13.580",
         "features": {"memory_api": "memory_v2", "proc_util_api": "v2", "xid": "events"},
         "gpus": [_gpu_static(i) for i in range(n_gpus)], "interval": 0.25},
        {"type": "tick", "seq": 7, "t": 2.0, "gpus": [_reading(i) for i in range(n_gpus)]},
        {"type": "procs", "t": 3.0, "procs": [{"gpu_index": i, "pid": 1000 + i, "used_mib": 88000.0,
                                               "name": f"sglang::scheduler_TP{i}_EP{i}", "rank": f"TP{i}_EP{i}",
                                               "sm_util_pct": 90.0} for i in range(n_gpus)]},
        {"type": "event", "t": 4.0, "index": 3, "event": "xid", "xid": 79, "detail": "GPU has fallen off the bus"},
        {"type": "error", "t": 5.0, "message": "PCIe read failed", "detail": "NVMLError_Unknown", "index": 2},
        {"type": "bye", "t": 6.0, "reason": "count"},
    ]


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.5:
        return rng.choice([None, True, False, 0, -1, 3, 2**63, 10**30, 1.5, -0.0, "", "x", "0", "zero", "NaN",
                           "é" * 10, [], {}])
    if r < 0.75:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["index", "type", "gpus", "seq", "t", "util_pct", "k"]): _json_value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


_RAW_VALUES = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "9" * 5000, "1" + "0" * 400, "1e-400",
               "[" * 3000 + "]" * 3000, "[" * 100000, '{"a":' * 5000 + "1" + "}" * 5000, '"\\ud800"', "tru", "01"]
_KEYS = ["index", "type", "gpus", "seq", "t", "procs", "uuid", "util_pct", "pstate", "throttle_reasons", "xid",
         "gpu_index", "pid", "features", "unsupported", "supported", "detail", "message", "event"]


def _mutate(rng: random.Random, obj: Any) -> Any:
    """Change one thing somewhere inside a frame: drop a key, add one, or swap a value."""
    if isinstance(obj, list) and obj and rng.random() < 0.8:
        i = rng.randrange(len(obj))
        obj[i] = _mutate(rng, obj[i])
        return obj
    if isinstance(obj, dict) and obj and rng.random() < 0.8:
        key = rng.choice(list(obj))
        op = rng.randrange(4)
        if op == 0:
            del obj[key]
        elif op == 1:
            obj[rng.choice(_KEYS)] = _json_value(rng)
        else:
            obj[key] = _mutate(rng, obj[key])
        return obj
    return _json_value(rng)


def frame_case(rng: random.Random) -> str:
    """One line from the agent: a real frame mutated, a raw strange value spliced in, or junk."""
    r = rng.random()
    frame = rng.choice(good_frames(rng.choice((1, 8))))
    if r < 0.55:
        for _ in range(rng.randint(1, 3)):
            frame = _mutate(rng, frame)
        return json.dumps(frame, separators=(",", ":"))
    text = json.dumps(frame, separators=(",", ":"))
    if r < 0.85:  # splice a raw value the JSON encoder would never write (huge, non-finite, deep)
        marks = [k for k in range(len(text)) if text[k] == ":"]
        k = rng.choice(marks) + 1 if marks else 0
        end = k
        while end < len(text) and text[end] not in ",}]":
            end += 1
        return text[:k] + rng.choice(_RAW_VALUES) + text[end:]
    if r < 0.95:  # cut, or junk inserted
        i = rng.randint(0, len(text))
        return text[:i] if rng.random() < 0.5 else text[:i] + rng.choice(_RAW_VALUES + ["\x00", "}", "{"]) + text[i:]
    return rng.choice(["", " ", "null", "[]", "[1,2]", '"tick"', "{}", '{"type":null}', '{"type":"warp"}',
                       "[" * 200000, "x" * 300000])


def logparse_runner() -> Callable[[str], None]:
    """A line's whole path: split, parse, LogLine, stats, JSON (the follower), and swap readiness.

    Raises on a ``parse_error`` field: the parser caught it, but it is still a parser bug."""
    readiness = Readiness()

    def run(line: str) -> None:
        for piece in split_glued(line):
            event = to_event(piece, host="h", source="s", t=1.0)
            dump_event(event)
            stats = to_stats(parse_line(piece), host="h", t=1.0)
            if stats is not None:
                dump_event(stats)
            if "parse_error" in event.fields:
                raise AssertionError(f"parse_error: {event.fields['parse_error']}")
        readiness.feed(line)

    return run
