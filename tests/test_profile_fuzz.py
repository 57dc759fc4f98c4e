"""Fuzzed profile files: a clear ProfileError naming the file, or a profile; never a crash (issue 13)."""

from __future__ import annotations

import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profilefuzz import profile_case, profile_runner

RUN = profile_runner()
RUN(profile_case(random.Random(0)))  # the first load builds the models: not a case's cost


def _cpu_s(case: str) -> float:
    t0 = time.thread_time()
    RUN(case)
    return time.thread_time() - t0


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_mutated_profile_loads_or_is_a_profile_error_naming_its_file(seed: int) -> None:
    case = profile_case(random.Random(seed))
    spent = _cpu_s(case)
    if spent >= 0.25:  # re-timed, best kept: a scheduler or GC hiccup is not a slow parse
        spent = min(spent, _cpu_s(case), _cpu_s(case))
    assert spent < 0.25, "one profile file (and listing it beside the others) took over 250 ms of CPU"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_as_a_profile_never_crashes(text: str) -> None:
    RUN(text)
