"""Log parser throughput on one core for a realistic server-log mix (goal: >= 100k lines/s).

Run: .venv/bin/python bench/bench_logparse.py [--lines N]
Prints lines/s for parse_line alone and for to_event (parse + LogLine construction).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kimitui.sglang.log import parse_line, to_event  # noqa: E402
from tests.support.logsamples import realistic_mix  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=300_000)
    args = ap.parse_args()
    mix = realistic_mix()
    lines = (mix * (args.lines // len(mix) + 1))[: args.lines]
    kinds = collections.Counter(parse_line(line).line_kind for line in mix)
    print(f"mix of {len(mix)} distinct-position lines: {dict(kinds)}")

    best = 0.0
    for _ in range(3):
        t0 = time.process_time()
        for line in lines:
            parse_line(line)
        best = max(best, len(lines) / (time.process_time() - t0))
    print(f"parse_line: {best:,.0f} lines/s (one core, best of 3, {len(lines):,} lines)")

    n = min(len(lines), 100_000)
    t0 = time.process_time()
    for line in lines[:n]:
        to_event(line, host="h", source="s")
    print(f"to_event (parse + LogLine): {n / (time.process_time() - t0):,.0f} lines/s")


if __name__ == "__main__":
    main()
