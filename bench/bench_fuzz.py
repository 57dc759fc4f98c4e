"""Fuzz run for issue 13's goal: 0 uncaught exceptions and no case slower than 10 ms, in 10^5 cases per target.

Run: .venv/bin/python bench/bench_fuzz.py [--cases N] [--seed S] [--targets logparse,agent,sse,profiles]

Per target it prints: cases, uncaught exceptions (by type, with the first few cases), the
slowest case and p99 in ms (CPU time of this thread, so other processes' load does not count;
a case over the budget is re-timed twice and its best kept, so a scheduler hiccup is not a
quadratic pattern), and PASS/FAIL against the goal.  The cases are
``tests/support/fuzzcases.py``'s (``ssefuzz.py``'s for ``sse``), the same generators the suite's
hypothesis tests drive.

A target is ``TARGETS[name] = (make_case, make_runner)``: ``make_case(rng) -> case`` and
``make_runner() -> run(case)``, where ``run`` must never raise.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kimitui.events import dump_event  # noqa: E402
from tests.support.fuzzcases import frame_case, log_case, logparse_runner  # noqa: E402
from tests.support.profilefuzz import profile_case, profile_runner  # noqa: E402
from tests.support.ssefuzz import sse_case, sse_runner  # noqa: E402

from benchutil import verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

BUDGET_MS = 10.0
"""The issue's goal per case (per line, per frame)."""


def agent_runner() -> Callable[[str], None]:
    """The kimitui side of the agent's stream: ``GpuStream._handle`` on one line, events recorded as JSON."""
    from kimitui.host.local import LocalHost
    from kimitui.session import Session
    from kimitui.telemetry.gpu import GpuStream

    session = Session()
    published: list[Any] = []
    session.add_sink(published.append)
    gpu = GpuStream(LocalHost("fuzz"), session)
    state = {"no_pynvml": False, "bye": False}

    def run(line: str) -> None:
        try:
            gpu._handle(line, state)
            for event in published:
                dump_event(event)
        finally:
            published.clear()

    return run


TARGETS: dict[str, tuple[Callable[[random.Random], Any], Callable[[], Callable[[Any], None]]]] = {
    "logparse": (log_case, logparse_runner),
    "agent": (frame_case, agent_runner),
    "sse": (sse_case, sse_runner),  # the load client: SSE splitter, payloads, result (tests/support/ssefuzz.py)
    # one profile file: written, then loaded as `profiles show/lint/swap` do (tests/support/profilefuzz.py)
    "profiles": (profile_case, lambda: profile_runner(check_listing=False)),
}


def _timed(run: Callable[[Any], None], case: Any) -> tuple[float, BaseException | None]:
    t0 = time.thread_time()
    try:
        run(case)
    except Exception as exc:  # noqa: BLE001 - counting them is the point
        return (time.thread_time() - t0) * 1000, exc
    return (time.thread_time() - t0) * 1000, None


def fuzz(name: str, cases: int, seed: int) -> bool:
    make_case, make_runner = TARGETS[name]
    rng = random.Random(f"{seed}:{name}")
    run = make_runner()
    times: list[float] = []
    errors: collections.Counter[str] = collections.Counter()
    examples: list[str] = []
    slowest = (0.0, "")
    wall = time.perf_counter()
    for _ in range(cases):
        case = make_case(rng)
        ms, exc = _timed(run, case)
        if ms > BUDGET_MS:  # re-time: a quadratic case stays slow, a hiccup (GC, page faults) does not
            ms = min(ms, _timed(run, case)[0], _timed(run, case)[0])
        times.append(ms)
        if ms > slowest[0]:
            slowest = (ms, repr(case)[:120])
        if exc is not None:
            errors[type(exc).__name__] += 1
            if len(examples) < 5:
                examples.append(f"{type(exc).__name__}: {str(exc)[:120]} <- {repr(case)[:120]}")
    wall = time.perf_counter() - wall
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    over = sum(1 for t in times if t > BUDGET_MS)
    ok = not errors and slowest[0] <= BUDGET_MS
    print(f"{name:9s} cases {cases:,}  uncaught exceptions {sum(errors.values())}"
          f"{' ' + dict(errors).__repr__() if errors else ''}  slowest {slowest[0]:.2f} ms  p99 {p99:.3f} ms  "
          f"over {BUDGET_MS:g} ms: {over}  ({wall:.0f} s wall)  {'PASS' if ok else 'FAIL'}")
    verdict(f"fuzz {name}", f"{sum(errors.values())} uncaught, slowest {slowest[0]:.2f} ms in {cases:,} cases",
            f"0 uncaught, none over {BUDGET_MS:g} ms", ok)
    print(f"{'':9s} slowest case: {slowest[1]}")
    for line in examples:
        print(f"{'':9s} {line}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000, help="cases per target (default 10^5)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of: {', '.join(TARGETS)}")
    args = ap.parse_args()
    print(f"goal: 0 uncaught exceptions, no case over {BUDGET_MS:g} ms (thread CPU time); seed {args.seed}")
    results = [fuzz(name.strip(), args.cases, args.seed) for name in args.targets.split(",") if name.strip()]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
