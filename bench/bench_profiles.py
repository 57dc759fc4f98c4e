"""How fast profiles load, lint, diff and render (the cockpit lists and diffs them on every swap).

Run: .venv/bin/python bench/bench_profiles.py
Prints per-operation times over the shipped seed profiles (a 4-deep extends chain at most).
Goal: the swap form's whole work (list, load both, lint, diff, render) within a keypress's budget,
<= 100 ms, so the diff shows before a person waits; PASS/FAIL, exit 1 on FAIL.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from benchutil import exit_on, verdict  # bench/ is on sys.path (the script's own folder)

from kimitui.profiles import diff_profiles, lint_profile, list_profiles, load_profile, render_command, render_unit

GOAL_MS = 100.0


def per_call_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat * 1000


def main() -> None:
    profiles = list_profiles()
    a, b = load_profile("ep8-tuned"), load_profile("ep8-v2")
    rows = [
        (f"list_profiles ({len(profiles)} files)", per_call_ms(list_profiles, 50)),
        ("load_profile ep8-v2 (4-deep extends)", per_call_ms(lambda: load_profile("ep8-v2"), 200)),
        ("lint_profile", per_call_ms(lambda: lint_profile(b), 2000)),
        ("diff_profiles", per_call_ms(lambda: diff_profiles(a, b), 2000)),
        ("render_command", per_call_ms(lambda: render_command(b), 2000)),
        ("render_unit", per_call_ms(lambda: render_unit(b), 2000)),
    ]
    for name, ms in rows:
        print(f"{name:40s} {ms:8.3f} ms/call")
    swap = sum(ms for _, ms in rows) + rows[1][1]  # list once, load two profiles, then each of the rest once
    exit_on([verdict("a swap's profile work (list, load x2, lint, diff, render)", f"{swap:.1f} ms",
                     f"<= {GOAL_MS:g} ms", swap <= GOAL_MS)])


if __name__ == "__main__":
    main()
