"""Issue 13: a bad log line is bounded work and a clear result, never a crash, a stall or a lost line.

The parser runs in the follower, in swap readiness and in ``kimitui logs parse``: one slow line
stalls the event loop, one exception restarted the follower's stream.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimitui.events import LogLine, ServerStats, dump_event
from kimitui.launcher.readiness import Readiness
from kimitui.sglang.log import MAX_LINE_CHARS, parse_line, to_event, to_stats
from tests.support.fuzzcases import log_case, logparse_runner

WATCHDOG_20K = "[2025-12-09 11:20:00 TP5] Watchdog timeout (self.watchdog_" + "9" * 20000
LINE_BUDGET_S = 0.010
"""The issue's goal: no line slower than 10 ms."""
BUSY_BOX_SLACK = 2.0
"""What the assertions allow over the goal: they are here for bounded work (a quadratic pattern costs seconds: the
20 KB watchdog line took 15 s), and on this 2-core box a line's CPU time reads up to 1.5x when the other xdist
worker runs beside it (one CI rehearsal: 10.0 and 10.7 ms for lines of 6.4-7.6 ms on a quiet box).  The goal
itself is a benchmark's to meet: bench/bench_logparse.py, slowest line <= 1 ms."""


def _cpu_s(fn: Callable[[], object]) -> float:
    """CPU seconds of ``fn()`` (this thread: other engineers' load does not count), best of 3 when slow."""
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
        if best < LINE_BUDGET_S:  # a quadratic pattern stays slow on every try; a hiccup does not
            break
    return best


def _whole_path(line: str) -> None:
    """What the follower and readiness do with one line (a fresh readiness each time)."""
    logparse_runner()(line)


def test_the_20kb_watchdog_line_takes_under_10ms_and_is_flagged_truncated() -> None:
    assert _cpu_s(lambda: parse_line(WATCHDOG_20K)) < LINE_BUDGET_S * BUSY_BOX_SLACK  # was 15 s
    assert _cpu_s(lambda: Readiness().feed(WATCHDOG_20K)) < LINE_BUDGET_S * BUSY_BOX_SLACK
    parsed = parse_line(WATCHDOG_20K)
    assert parsed.line_kind == "error" and parsed.fields["error"] == "watchdog"
    assert parsed.fields["truncated"] is True and parsed.fields["raw_chars"] == len(WATCHDOG_20K)
    ev = to_event(WATCHDOG_20K + "\n", host="h", source="s")
    assert len(ev.raw) == MAX_LINE_CHARS and WATCHDOG_20K.startswith(ev.raw)
    assert ev.fields["truncated"] is True


def test_a_real_watchdog_line_still_names_component_and_timeout() -> None:
    f = parse_line("[2025-12-09 11:20:00 TP5] Scheduler watchdog timeout (self.watchdog_timeout=300, "
                   "self.soft=False)").fields
    assert (f["error"], f["component"], f["timeout_s"]) == ("watchdog", "Scheduler", 300.0)
    f = parse_line("[2025-12-09 11:20:00] Detokenizer_Watchdog timeout (watchdog_timeout=30.5)").fields
    assert (f["component"], f["timeout_s"]) == ("Detokenizer_", 30.5)


@pytest.mark.parametrize("line", [
    "max_total_num_tokens=1 " + "a" * 16000,             # key=value restarted inside every word
    "shards: " + "loading " * 2000,                      # "[Ll]oading [^:]*shards:" rescanned per "loading "
    "Capture  end." + "Capture " * 2000,                 # "Capture (.+?) end" searched from every "Capture "
    "Decode batch. " * 1100 + "\nz",                     # "(.*)$" rescanned after an inner newline
    "watchdog timeout (" + "a watchdog timeout (" * 800,
    "2026-05-28T10:00:00+0000 host a: " * 600,           # nested journal prefixes recursed per prefix
    "x" * 10_000_000,                                    # a 10 MB line: cut first, then parsed
    "\rCapturing batches (bs=1 avail_mem=9.32 GB): 100%|##| 52/52 [00:00<00:00]" * 20000,
    "Decode transfer failed for request bootstrap_room=" * 300 + "9" * 1000,  # a search from every phrase
    "Engine startup timings (s): " + "a" * 16000 + "=1",  # a timing's name restarted inside a long word
    "x" + "[2026-05-28 10:00:00" * 800,                  # a glued record looked for at every "[20"
], ids=["kv_eq", "shards", "capture", "batch_newline", "watchdog_words", "journal_nested", "10MB", "tqdm_1.5MB",
        "transfer_words", "timings_word", "glued_stamps"])
def test_every_pattern_is_linear_on_its_worst_line(line: str) -> None:
    assert _cpu_s(lambda: _whole_path(line)) < LINE_BUDGET_S * BUSY_BOX_SLACK
    assert "parse_error" not in parse_line(line).fields


def test_a_huge_tqdm_line_keeps_its_last_redraw() -> None:
    bar = "\rCapturing batches (bs=1 avail_mem=9.32 GB): 100%|##| 52/52 [00:00<00:00]"
    parsed = parse_line(bar * 20000)
    assert parsed.line_kind == "startup" and parsed.fields["i"] == 52 and parsed.fields["truncated"] is True


def test_a_decode_line_with_an_extra_rank_field_gives_stats_and_keeps_the_prefix_rank() -> None:
    body = ("Decode batch, #running-req: 8, #token: 37217, token usage: 0.13, cuda graph: True, "
            "gen throughput (token/s): 171.01, #queue-req: 0, rank: 3")
    bare = parse_line("[2026-05-28 10:00:00] " + body)  # no rank tags: to_stats raised KeyError('ranks')
    stats = to_stats(bare, host="h", t=1.0)
    assert isinstance(stats, ServerStats) and stats.running_reqs == 8 and stats.gen_throughput == 171.01
    assert bare.fields["field_rank"] == 3 and "rank" not in bare.fields
    tagged = parse_line("[2026-05-28 10:00:00 TP5] " + body)
    assert tagged.fields["rank"] == "TP5" and tagged.fields["field_rank"] == 3  # the body no longer overwrites it
    assert to_stats(tagged, host="h", t=1.0).extra["rank_tp"] == 5.0  # type: ignore[union-attr]


@pytest.mark.parametrize("value", ["1e999", "nan", "9" * 400, "9" * 5000, "²", "inf"],
                         ids=["1e999", "nan", "400_digits", "5000_digits", "superscript", "inf"])
def test_numbers_that_are_not_figures_stay_text_and_never_reach_stats(value: str) -> None:
    line = (f"[2026-05-28 10:00:00] Decode batch, #running-req: {value}, #token: 1, token usage: 0.10, "
            f"gen throughput (token/s): 1.00, #queue-req: 0")
    parsed = parse_line(line)
    assert "parse_error" not in parsed.fields and parsed.fields["running_reqs"] == value
    stats = to_stats(parsed, host="h", t=1.0)
    assert stats is not None and stats.running_reqs is None and stats.queued_reqs == 0.0
    ev = to_event(line, host="h", source="s", t=1.0)
    assert LogLine.model_validate_json(dump_event(ev)) == ev  # round-trips: no inf/nan turned into null


def test_huge_counts_in_startup_lines_do_not_overflow_progress() -> None:
    for line in ["Loading safetensors checkpoint shards: 100% Completed | 1" + "0" * 400 + "/1",
                 "Capturing batches (bs=1 avail_mem=9.32 GB): 100%|##| " + "9" * 300 + "/52",
                 "[2026-05-28 10:00:00 TP" + "1" * 5000 + "] hello",
                 "Watchdog caught collective operation timeout: Timeout(ms)=" + "9" * 5000]:
        parsed = parse_line(line)
        assert "parse_error" not in parsed.fields, (line[:60], parsed.fields)
        to_event(line, host="h", source="s")


def _assert_total(line: str) -> None:
    """No exception anywhere on the line's path, a known kind, no parser bug, under the line budget."""
    assert _cpu_s(lambda: _whole_path(line)) < LINE_BUDGET_S * BUSY_BOX_SLACK, line[:200]
    parsed = parse_line(line)
    assert parsed.line_kind in {"decode", "prefill", "startup", "access", "eplb", "error", "warning", "plain"}
    assert "parse_error" not in parsed.fields, (line[:200], parsed.fields)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_fuzz_mutated_real_lines(rng: random.Random) -> None:
    _assert_total(log_case(rng))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_fuzz_arbitrary_text(text: str) -> None:
    _assert_total(text)
