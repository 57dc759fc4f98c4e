"""The autopilot decides nothing on evidence the data cannot support.

The walk's case: at a time scale the load process cannot drive, EPLB's sweep came out +35 % "better beyond
noise" while every level was marked distorted by the client, and the autopilot kept it.  Here a candidate
that looks far better only where the client held back the throughput is *unsure*, is measured again (only
where the noise is), and is reverted as "not judged" at the repeat limit — never kept.

The loop runs the real :class:`~kimitui.tune.tuner.Tuner` (state file, variant profiles, recordings, report)
against a scripted host that publishes the sweeps it is asked for as recorded events: the real simulated host
cannot be made to starve its own load process on demand (tests/test_tune_e2e.py drives it where it can).
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from kimitui.events import ClientSummary, Event, LevelResult, ProfileSwitch, SweepSpec
from kimitui.report.sweep_summary import sweeps_of
from kimitui.session import Session
from kimitui.tune import candidates as cands
from kimitui.tune import host as tune_host
from kimitui.tune.state import TunePlan
from kimitui.tune.steps import judge_step, remeasure_spec
from kimitui.tune.tuner import Tuner, new_state
from tests.support.recordings import synthetic_sweep

SATURATED = ClientSummary(samples=3, loop_lag_max_ms=40.0, cpu_max_pct=100.0)


def starved(events: list[Event], levels: set[int] | None = None) -> list[Event]:
    """The same sweep, its levels (all, or ``levels``) marked as a saturated load process reports them."""
    out: list[Event] = []
    for e in events:
        if isinstance(e, LevelResult) and (levels is None or e.concurrency in levels):
            e = e.model_copy(update={"client": SATURATED,
                                     "client_distorted": "client saturated: load process at 100 % of a core"})
        out.append(e)
    return out


def _run(events: list[Event]):
    return sweeps_of(events)[0]


def test_a_gain_seen_only_where_the_client_could_not_keep_up_is_unsure_never_better() -> None:
    best = _run(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, seed=1))
    looks_better = _run(starved(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, seed=2,
                                                peak_scale=1.35, sweep_id="s2")))
    j = judge_step(best, looks_better, "peak")
    assert j.decision == "unsure", j.objective_change
    assert "+35 %" in j.objective_change or "+3" in j.objective_change
    assert "the client could not keep up" in j.unsure and "lower time scale" in j.unsure
    assert j.comparison.verdict == "unsure" and not j.comparison.improvements


def test_only_the_starved_levels_are_unsure_and_the_rest_still_decide() -> None:
    best = _run(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, seed=1))
    cand = _run(starved(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, seed=2, peak_scale=0.6,
                                        sweep_id="s2"), levels={64}))
    j = judge_step(best, cand, "level:16")
    assert j.decision == "worse"  # C=16 was driven: its -40 % decides
    line = j.comparison.client_line()
    assert line.startswith("⚠ client: C=64 not judged: the client could not keep up; the verdict rests on C=1, 16")
    assert j.comparison.summary_lines().count(line) == 1  # said once, not once per figure


def test_a_c1_level_with_five_requests_is_measured_again_there_with_the_count_that_settles_it() -> None:
    spec = SweepSpec(url="", model="", levels=[1, 16, 64], max_tokens=512, requests_per_level=5)
    best = _run(synthetic_sweep(spec=spec, levels=[1, 16, 64], requests_per_level=5, seed=1, noise=0.4))
    cand = _run(synthetic_sweep(spec=spec, levels=[1, 16, 64], requests_per_level=5, seed=2, noise=0.4,
                                peak_scale=0.8, sweep_id="s2"))
    j = judge_step(best, cand, "level:1")
    assert j.decision == "unsure" and "too few requests (5 per side)" in j.unsure, j.unsure
    assert j.settle_requests is not None and j.settle_requests >= 20
    again = remeasure_spec(spec, j, "level:1")
    assert again.levels == [1] and again.requests_per_level == min(j.settle_requests, 4 * 5)  # at most 4x a step
    assert again.max_tokens == spec.max_tokens and again.prompts == spec.prompts  # the same workload


class ScriptedHost:
    """A host whose swaps succeed at once and whose sweeps publish recorded events for what serves:
    ``sweeps(profile, spec, n)`` gives the n-th sweep's events of a profile."""

    def __init__(self, sweeps) -> None:  # type: ignore[no-untyped-def]
        self.session = Session(host="sim")
        self.host_name = "sim"
        self.serving = "ep8-tuned"
        self.sweeps = sweeps
        self.specs: list[tuple[str, SweepSpec]] = []
        self._ids = itertools.count(1)

    @property
    def running_profile(self) -> str | None:
        return self.serving

    @property
    def profile_dirs(self) -> list[str]:
        return []

    @property
    def busy(self) -> str | None:
        return None

    async def swap(self, profile: str) -> None:
        before, self.serving = self.serving, profile
        self.session.publish(ProfileSwitch(host="sim", from_profile=before, to_profile=profile, outcome="ok"))

    async def start_sweep(self, spec: SweepSpec) -> None:
        self.specs.append((self.serving, spec))
        n = sum(1 for p, _ in self.specs if p == self.serving)
        events = self.sweeps(self.serving, spec, n, f"sw{next(self._ids)}")

        async def publish() -> None:
            for e in events:
                self.session.publish(e.model_copy(update={"host": "sim"}))
                await asyncio.sleep(0)
        asyncio.get_running_loop().create_task(publish())

    async def stop_sweep(self) -> None:
        return None

    def sweep_target(self) -> tuple[str, str]:
        return "http://127.0.0.1:9", "kimi"


def test_the_autopilot_never_keeps_a_change_on_distorted_figures_it_reverts_it_not_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tune_host, "LATE_S", 0.0)

    def sweeps(profile: str, spec: SweepSpec, n: int, sweep_id: str) -> list[Event]:
        base = synthetic_sweep(spec=spec, levels=list(spec.levels), requests_per_level=spec.requests_per_level or 24,
                               seed=n, sweep_id=sweep_id, profile=profile,
                               knobs={"ep_size": 8, "enable_eplb": profile != "ep8-tuned"},
                               peak_scale=1.0 if profile == "ep8-tuned" else 1.35)
        return base if profile == "ep8-tuned" else starved(base)

    host = ScriptedHost(sweeps)
    spec = SweepSpec(url="", model="", levels=[1, 16, 64], max_tokens=64, requests_per_level=24)
    plan = TunePlan(start="ep8-tuned", candidates=[cands.parse_change("enable_eplb=true")], workload=spec,
                    repeat_limit=3)
    state = new_state("t1", "sim", plan)
    st = asyncio.run(asyncio.wait_for(Tuner(host, state, tmp_path / "tune").run(), 60))  # type: ignore[arg-type]
    (step,) = st.steps
    assert step.status == "reverted" and step.reason.startswith("not judged: still unsure after 3 sweeps"), step.reason
    assert "the client could not keep up" in step.reason
    assert st.best == "ep8-tuned" and host.serving == "ep8-tuned"
    cand_specs = [s for p, s in host.specs if p != "ep8-tuned"]
    assert len(cand_specs) == 3  # swept again while unsure, up to the repeat limit
    assert "not judged" in Path(st.report_path).read_text()  # type: ignore[arg-type]


def test_the_walks_tune_at_a_time_scale_the_client_cannot_drive_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`kimitui tune --time-scale 20` from ep8-tuned asks C=256 for ~30k chunks/s of one load process: refused
    with what it can drive and the time scale that would do (nothing swapped, no tune folder)."""
    from kimitui.cli import main

    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--time-scale", "20", "--change", "enable_eplb=true", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "kimitui tune: refused: this client can drive about" in err and "at time scale 20" in err
    assert "or lower drives the whole plan" in err and "--allow-client-limit" in err
    from kimitui.tune.state import tunes_dir

    assert str(tunes_dir("sim")).startswith(str(tmp_path)) and not tunes_dir("sim").exists()
    # what it can drive is not refused; and told otherwise, the plan is said and not refused
    assert main(["tune", "--time-scale", "1", "--levels", "1,16", "--change", "enable_eplb=true", "--dry-run"]) == 0
    assert "refused" not in capsys.readouterr().err
    assert main(["tune", "--time-scale", "20", "--change", "enable_eplb=true", "--dry-run",
                 "--allow-client-limit"]) == 0
    assert "this client can drive about" in capsys.readouterr().err


def test_an_unjudged_peak_over_a_judged_regression_still_says_why_it_lost() -> None:
    """The tune_e2e case on a busy machine: the peak's level (C=64) was not judged, C=1 and 16 were worse.
    The step is not judged on its objective, but a verdict of "regressed" never stands without its cause."""
    best = _run(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, seed=1))
    cand = _run(starved(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, seed=2, peak_scale=0.6,
                                        sweep_id="s2"), levels={64}))
    j = judge_step(best, cand, "peak")
    assert j.decision == "unsure" and j.comparison.verdict == "regressed", (j.decision, j.objective_change)
    assert j.cause, "a regressed step with no cause"
