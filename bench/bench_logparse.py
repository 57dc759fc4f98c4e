"""Log parser throughput on one core for a realistic server-log mix (goal: >= 100k lines/s).

Run: .venv/bin/python bench/bench_logparse.py [--lines N] [--per-kind]
Prints lines/s for parse_line alone and for to_event (parse + LogLine construction); ``--per-kind``
also each kind's ns per line, the best of 60 short runs (steadier than the totals on a busy machine:
compare two trees with it, the old and the new, one after the other).
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
    ap.add_argument("--per-kind", action="store_true", help="each kind's ns per line, best of 60 runs")
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
    if args.per_kind:
        per_kind(mix)


def per_kind(mix: list[str]) -> None:
    """Each kind's parse time per line (thread CPU time, the best of 60 runs of 3000 lines), and the mix's."""
    by_kind: dict[str, list[str]] = collections.defaultdict(list)
    for line in mix:
        by_kind[parse_line(line).line_kind].append(line)
    total = 0.0
    for kind, some in sorted(by_kind.items()):
        batch = (some * (3000 // len(some) + 1))[:3000]
        best = float("inf")
        for _ in range(60):
            t0 = time.thread_time()
            for line in batch:
                parse_line(line)
            best = min(best, (time.thread_time() - t0) / len(batch))
        total += best * len(some)
        print(f"  {kind:8} x{len(some):3}: {best * 1e9:6.0f} ns/line")
    print(f"  the mix, weighted: {total / len(mix) * 1e9:6.0f} ns/line")


if __name__ == "__main__":
    main()
