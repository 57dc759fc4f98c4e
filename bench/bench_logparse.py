"""The log path on one core: a line to its ``LogLine`` event, and the slowest single line (issue 33).

Goals: ``to_event`` (parse + event) >= 200k lines/s on a realistic server-log mix, and no line over 1 ms:
neither the longest lines of the mix nor synthetic 20k-character lines (SGLang's real shapes pushed to the
length, and the patterns that once made the parser super-linear).  Exit 1 when a goal fails.

Run: .venv/bin/python bench/bench_logparse.py [--lines N] [--runs R] [--per-kind] [--worst K]
Prints lines/s for ``parse_line`` alone and for ``to_event`` (each the best of ``--runs`` passes of 10,000
lines, CPU time of this thread), each line's best-of-7 time for the worst ``--worst``, and PASS/FAIL with
the load average.
``--per-kind`` also gives each kind's ns per line, the best of 60 short runs (steadier than the totals on a
busy machine: compare two trees with it, the old and the new, one after the other).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchutil import exit_on, load_average, verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)
from kimitui.sglang.log import parse_line, to_event  # noqa: E402
from tests.support.logsamples import ALL, realistic_mix  # noqa: E402

GOAL_LINES_S = 200_000
GOAL_LINE_MS = 1.0
_LONG = 20_000


def synthetic_lines() -> dict[str, str]:
    """~20k-character lines: real shapes at that length, and the patterns that were once super-linear."""
    ts = "[2026-05-28 10:00:00 TP0 EP0] "
    args = ", ".join(f"knob_{i}='value_{i}'" for i in range(900))
    words = "the scheduler could not allocate a new batch for the request queue "
    lines = {
        "server_args": f"{ts}server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', api_key='sk-x', {args})",
        "access_path": f'{ts}INFO:     127.0.0.1:55812 - "GET /v1/{"a" * _LONG} HTTP/1.1" 200 OK',
        "error_text": f"{ts}ERROR " + words * (_LONG // len(words)),
        "plain_text": ts + words * (_LONG // len(words)),
        "decode_body": f"{ts}Decode batch, " + "#running-req: 64, " * (_LONG // 18),
        "prefill_body": f"{ts}Prefill batch, " + "#new-seq: 1, " * (_LONG // 13),
        "tqdm_redraws": "\rCapturing batches (bs=1 avail_mem=9.32 GB): 100%|##| 52/52 [00:00<00:00]" * 270,
        "watchdog": f"{ts}Watchdog timeout (self.watchdog_" + "9" * _LONG,
        "traceback": "Traceback (most recent call last): " + 'File "x.py", line 1 ' * (_LONG // 20),
        "ansi": "\x1b[31mred\x1b[0m " * (_LONG // 13),
        "digits": "9" * _LONG,
        "spaces": "a " * (_LONG // 2),
        "kv_pairs": "a=1, " * (_LONG // 5),
        "gb_figures": "avail mem=20.17 GB " * (_LONG // 19),
        "secrets_some": f"{ts}api_key=sk-1 admin_api_key=sk-2 " + "x=1 " * (_LONG // 4),
        # tests/test_logparse_bad_input.py's patterns: each was once quadratic on such a line
        "kv_eq_word": "max_total_num_tokens=1 " + "a" * 16000,
        "shards": "shards: " + "loading " * 2000,
        "capture": "Capture  end." + "Capture " * 2000,
        "batch_newline": "Decode batch. " * 1100 + "\nz",
        "watchdog_words": "watchdog timeout (" + "a watchdog timeout (" * 800,
        "journal_nested": "2026-05-28T10:00:00+0000 host a: " * 600,
        "transfer_words": "Decode transfer failed for request bootstrap_room=" * 300 + "9" * 1000,
        "timings_word": "Engine startup timings (s): " + "a" * 16000 + "=1",
        "glued_stamps": "x" + "[2026-05-28 10:00:00" * 800,
    }
    return lines


def _best_ms(line: str, tries: int) -> float:
    best = float("inf")
    for _ in range(tries):
        t0 = time.thread_time()
        to_event(line, host="h", source="s")
        best = min(best, time.thread_time() - t0)
    return best * 1000


def worst_lines(mix: list[str], show: int, tries: int = 7) -> float:
    """Each line's best-of-``tries`` time (thread CPU time: others' load does not count); the worst shown."""
    longest = sorted(set(mix) | {g[0] for g in ALL}, key=len)[-10:]
    cases = {f"mix#{i} ({len(line)} chars)": line for i, line in enumerate(longest)}
    cases.update({f"{name} ({len(line)} chars)": line for name, line in synthetic_lines().items()})
    times = sorted(((_best_ms(line, tries), name) for name, line in cases.items()), reverse=True)
    print(f"slowest of {len(cases)} lines (to_event, best of {tries} each):")
    for ms, name in times[:show]:
        print(f"  {ms:7.3f} ms  {name}")
    return times[0][0]


def throughput(lines: list[str], runs: int, fn: str) -> float:
    """Lines/s: the best of ``runs`` passes of 10,000 lines each over ``lines`` (thread CPU time; short passes,
    so a burst of other processes' load spoils a pass, not the figure)."""
    chunk = min(len(lines), 10_000)
    best = 0.0
    for i in range(runs):
        start = (i * chunk) % max(1, len(lines) - chunk + 1)
        some = lines[start : start + chunk]
        t0 = time.thread_time()
        if fn == "parse":
            for line in some:
                parse_line(line)
        else:
            for line in some:
                to_event(line, host="h", source="s")
        best = max(best, len(some) / (time.thread_time() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=300_000, help="the mix repeated to this many lines")
    ap.add_argument("--runs", type=int, default=30, help="best of this many passes of 10,000 lines")
    ap.add_argument("--worst", type=int, default=8, help="how many of the slowest lines to show")
    ap.add_argument("--per-kind", action="store_true", help="each kind's ns per line, best of 60 runs")
    args = ap.parse_args()
    mix = realistic_mix()
    lines = (mix * (args.lines // len(mix) + 1))[: args.lines]
    kinds = collections.Counter(parse_line(line).line_kind for line in mix)
    print(f"mix of {len(mix)} distinct-position lines: {dict(kinds)}; {load_average()}")

    parse = throughput(lines, args.runs, "parse")
    print(f"parse_line: {parse:,.0f} lines/s (one core, best of {args.runs} passes of 10,000 lines)")
    event = throughput(lines, args.runs, "event")
    results = [verdict("to_event (parse + LogLine)", f"{event:,.0f} lines/s (best of {args.runs})",
                       f">= {GOAL_LINES_S:,} lines/s", event >= GOAL_LINES_S)]
    worst = worst_lines(mix, args.worst)
    results.append(verdict("slowest line", f"{worst:.3f} ms", f"<= {GOAL_LINE_MS:g} ms", worst <= GOAL_LINE_MS))
    if args.per_kind:
        per_kind(mix)
    exit_on(results)


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
