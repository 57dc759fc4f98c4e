"""CPU per streamed chunk of the load client's SSE path (``SseSplitter.feed`` + ``_on_payload``).

The per-chunk work on the load process's hot path, measured in-process: 256
SGLang-shaped chunks (per-chunk usage, as kimitui asks for), one chunk per read
(what a paced server looks like) and each chunk split over two reads; process
CPU time, best of 5 x 4 rounds.  ``--vs REV`` measures ``kimitui/loadgen/client.py``
of that git revision the same way, interleaved, so a change's cost is read off
one run.

Goal: <= 5 us per chunk, one chunk per read (issue 33 measured kimitui's parsing at ~4.4 us per event,
"already at the floor": this keeps it there); PASS/FAIL on the current code, exit 1 on FAIL.

Run: ``.venv/bin/python bench/bench_sse_chunk.py [--vs HEAD~1]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import ModuleType

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import exit_on, module_at_revision, verdict  # noqa: E402  # bench/ is on sys.path (above)

GOAL_US = 5.0


def chunk(i: int) -> bytes:
    return ("data: " + json.dumps({
        "id": "0123456789abcdef", "object": "chat.completion.chunk", "created": 1733000000, "model": "m",
        "choices": [{"index": 0, "delta": {"role": None, "content": " word", "reasoning_content": None,
                                           "tool_calls": None}, "logprobs": None, "finish_reason": None,
                     "matched_stop": None}],
        "usage": {"prompt_tokens": 100, "total_tokens": 100 + i, "completion_tokens": i}},
        separators=(",", ":")) + "\n\n").encode()


CHUNKS = [chunk(i + 1) for i in range(256)]


def per_chunk_us(mod: ModuleType, split: bool) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time_ns()
        for _ in range(40):
            sse = mod.SseSplitter(mod.RequestTrace("r", 1, False, 0))
            for c in CHUNKS:
                if split:
                    h = len(c) // 2
                    sse.feed(c[:h], 1)
                    sse.feed(c[h:], 2)
                else:
                    sse.feed(c, 1)
        best = min(best, (time.process_time_ns() - t0) / (40 * len(CHUNKS)) / 1000)
    return best


def load_rev(rev: str) -> ModuleType:
    return module_at_revision(rev, "kimitui/loadgen/client.py", "client_rev")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vs", metavar="REV", help="also measure kimitui/loadgen/client.py at this git revision")
    args = ap.parse_args()
    from kimitui.loadgen import client

    mods = {"now": client}
    if args.vs:
        mods[args.vs] = load_rev(args.vs)
    best: dict[tuple[str, bool], float] = {}
    for _ in range(4):  # interleaved rounds: a busy neighbour slows every variant alike
        for name, mod in mods.items():
            for split in (False, True):
                best[name, split] = min(best.get((name, split), float("inf")), per_chunk_us(mod, split))
    for name in mods:
        print(f"{name:>10s}: one chunk per read {best[name, False]:.2f} us/chunk; "
              f"split over two reads {best[name, True]:.2f} us/chunk")
    now = best["now", False]
    exit_on([verdict("SSE path, one chunk per read", f"{now:.2f} us/chunk (best of 4 x 5)", f"<= {GOAL_US:g} us",
                     now <= GOAL_US)])


if __name__ == "__main__":
    main()
