"""The rules of a verdict: which figures, which direction is better, what counts as beyond noise,
and when two sweeps cannot be compared at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kimitui.profiles.diff import OBSERVABILITY_KNOBS, knob_family
from kimitui.report.sweep_summary import VOLATILE_KNOBS, SweepRun

Verdict = Literal["improved", "regressed", "same", "unsure", "n/a"]
"""Four answers and n/a: *same* only when the whole interval lies within ±min_effect; *unsure* when the
data cannot tell (the interval reaches past ±min_effect without excluding no change, the noise is
unknown, or the client distorted the level): never read as "no change"."""
Overall = Literal["improved", "regressed", "same", "unsure", "not_comparable"]

VERDICT_WORDS: dict[str, str] = {"improved": "better", "regressed": "worse", "same": "same", "unsure": "unsure",
                                 "n/a": "n/a", "not_comparable": "not comparable"}
"""The word every view prints for a verdict (the operator reads better/worse/same/unsure everywhere)."""


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    higher_is_better: bool
    unit: str
    noise_floor: float
    """Least relative standard error per side: the run-to-run variance (server warm-up, host
    load, batching luck) that resampling one run's requests cannot see."""
    primary: bool = True
    """Primary figures decide the overall verdict; the others are shown with their own verdict only."""


FIGURES: tuple[Figure, ...] = (
    Figure("agg_tok_s", "aggregate tok/s", True, "tok/s", 0.03),
    Figure("steady_tok_s", "steady tok/s", True, "tok/s", 0.05),
    Figure("decode_tok_s_p50", "decode p50", True, "tok/s", 0.03),
    Figure("ttft_p50", "TTFT p50", False, "s", 0.20, primary=False),
)
"""Floors: same-profile runs on the simulator (burst, C=8/256, repeated on a loaded 2-core host)
spread ~±4 % in aggregate and decode rate, ~±9 % in the steady-state figure (its window
depends on the ramp) and by up to 2x in TTFT p50 at C=256 (where a request lands in the
prefill queue) — so TTFT is not primary: its verdict is shown, the overall verdict is the
throughput's.  Repeats, when recorded, measure the spread directly; the floor still applies."""
ENERGY_FIGURES: tuple[Figure, ...] = (
    Figure("j_per_token", "J/token", False, "J", 0.03, primary=False),
    Figure("cost_per_mtok", "cost/Mtok", False, "/Mtok", 0.03, primary=False),
)
"""Energy and cost per output token (issue 34), judged per level by the same rule; lower is better.  Shown with
their own verdict, not deciding the overall one (which stays the throughput's: with the power nearly flat they
mostly mirror it, and a verdict should not count one effect twice).  Judged only where a side has the figure
(GPU power samples cover the level; a ``[cost]`` is configured).  Noise: the spread between repeats where
there are some, else the bootstrap of the aggregate throughput (J/token = mean power / aggregate tok/s, and
the power's own noise over a level is far below the rate's); floor: the aggregate's 3 %."""
FIGURE_BY_NAME = {f.name: f for f in FIGURES + ENERGY_FIGURES}

CLIENT_TIMED = frozenset({"steady_tok_s", "decode_tok_s_p50", "ttft_p50"})
"""Figures built from when the client stamped each chunk: a lagging load process (its event loop
late, its CPU saturated) skews them, so at a level it distorted they carry that note."""

DEFAULT_MIN_EFFECT = 0.05
"""The smallest effect that matters: *same* means the whole 95 % interval lies within ±5 %, and a
change under 5 % is never *better* or *worse*, even beyond noise."""

WORKLOAD_FIELDS = ("prompts", "max_tokens", "ignore_eos", "mode", "temperature", "rate_rps", "extra_body")
"""SweepSpec fields that change what one level *means*; any difference refuses the comparison.

Prompts set the prefill each request costs; ``max_tokens`` and ``ignore_eos`` how long it
decodes; ``mode`` what C is (C at once, C slots, or a cap on Poisson arrivals, whose
``rate_rps`` then sets the load); ``temperature`` the sampling work and speculative
acceptance; ``extra_body`` is server-specific request knobs.  Which levels ran is *not*
here: C=64 is C=64 in both sweeps, so they are compared on the levels both have."""

NOTED_FIELDS = ("requests_per_level", "duration_s", "warmup_requests", "repeats", "flush_cache", "steady_ratio",
                "straggler_ratio", "straggler_gap_s")
"""SweepSpec fields that change how much, or how strictly, a level is measured but not what it
measures: a difference is reported next to the verdict and does not refuse it (sample size
shows in the noise).  ``steady_ratio`` defines the steady figure, so that figure alone is not
judged when it differs."""


def judge(ratio: float | None, low: float | None, high: float | None, higher_is_better: bool,
          min_effect: float = DEFAULT_MIN_EFFECT) -> Verdict:
    """better (improved) / worse (regressed) / same / unsure for one figure's B/A ratio and its 95 % interval.

    *improved*/*regressed*: the interval excludes 1 **and** the change is at least ``min_effect``.
    *same*: the whole interval lies within ``1 ± min_effect`` (equivalence, not absence of evidence).
    *unsure*: anything else — an interval that reaches past ±``min_effect`` without excluding 1, or
    unknown noise (too few requests to measure it): the data cannot tell, and nothing is decided on it.
    """
    if ratio is None:
        return "n/a"
    change = ratio - 1.0
    if low is None or high is None:
        return "unsure"
    if (low > 1.0 or high < 1.0) and abs(change) >= min_effect:
        return "improved" if (change > 0) == higher_is_better else "regressed"
    if low >= 1.0 - min_effect and high <= 1.0 + min_effect:
        return "same"
    return "unsure"


def workload_diff(a: SweepRun, b: SweepRun, fields: tuple[str, ...] = WORKLOAD_FIELDS) -> dict[str, tuple[Any, Any]]:
    """Workload fields whose values differ (``rate_rps`` only matters in rate mode)."""
    out: dict[str, tuple[Any, Any]] = {}
    for name in fields:
        va, vb = getattr(a.spec, name), getattr(b.spec, name)
        if name == "rate_rps" and a.spec.mode != "rate" and b.spec.mode != "rate":
            continue
        if va != vb:
            out[name] = (va, vb)
    return out


def noted_diff(a: SweepRun, b: SweepRun) -> dict[str, tuple[Any, Any]]:
    """Measurement settings that differ without changing what a level means (reported, not refused)."""
    return workload_diff(a, b, NOTED_FIELDS)


def levels_text(levels: list[int]) -> str:
    return ", ".join(map(str, levels)) if levels else "-"


def knob_diff(a: SweepRun, b: SweepRun) -> tuple[dict[str, tuple[Any, Any]] | None, str]:
    """(knob -> (A value, B value), how we know); None when the recordings cannot say."""
    if a.knobs is not None and b.knobs is not None:
        keys = {k for k in (set(a.knobs) | set(b.knobs)) - VOLATILE_KNOBS - OBSERVABILITY_KNOBS - {"launch_command"}
                if not _is_status(a.knobs.get(k)) and not _is_status(b.knobs.get(k))}
        diff = {k: (a.knobs.get(k), b.knobs.get(k)) for k in sorted(keys) if a.knobs.get(k) != b.knobs.get(k)}
        return diff, "from the servers' effective args (server_info)"
    for first, second, flip in ((a, b, False), (b, a, True)):
        sw = second.switch
        if (sw is not None and sw.outcome == "ok" and sw.diff and first.profile is not None
                and sw.from_profile == first.profile and sw.to_profile == second.profile):
            diff = {k: ((v[0], v[1]) if not flip else (v[1], v[0])) for k, v in sw.diff.items()
                    if k not in VOLATILE_KNOBS and k not in OBSERVABILITY_KNOBS and len(v) == 2}
            return dict(sorted(diff.items())), f"from the profile switch {sw.from_profile} -> {sw.to_profile}"
    missing = [run.source or run.label for run in (a, b) if run.knobs is None]
    if a.profile is not None and a.profile == b.profile:
        return {}, "same profile name; knob values not recorded (" + ", ".join(missing) + " lacks server_info)"
    return None, "knobs unknown: " + ", ".join(missing) + " records no server args (server_info) and no profile switch diff"


def _is_status(value: object) -> bool:
    """Objects and lists of objects in server_info are status blobs (memory usage, internal states)."""
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))


def knob_families(diff: dict[str, tuple[Any, Any]]) -> dict[str, list[str]]:
    """family -> its changed knobs: a drafter's knobs are one change (``kimitui.profiles.diff.knob_family``)."""
    out: dict[str, list[str]] = {}
    for k in diff:
        out.setdefault(knob_family(k), []).append(k)
    return out


def describe_knobs(diff: dict[str, tuple[Any, Any]] | None, note: str) -> str:
    if diff is None:
        return note
    if not diff:
        return "no knob changed (" + note + ")"
    items = ", ".join(f"{k} ({va!r} -> {vb!r})" for k, (va, vb) in diff.items())
    if len(diff) == 1:
        return f"one knob changed: {items}"
    families = knob_families(diff)
    if len(families) == 1:
        return f"one knob family changed: {next(iter(families))}: {items}"
    return f"confounded: {len(diff)} knobs changed: {items}; the difference cannot be attributed to one of them"
