"""⚠ only for what needs attention (issue 32, "⚠ means everything").

"ep8-eplb: one knob changed" (the good case), "num_continuous_decode_steps has no effect" on every swap, "no knob a
sweep measures differs from the baseline" when swapping back to it and "(and only where it listens…: port)" when
``--sim-port`` is followed were all warnings; the sweep's guard notice was logged with kind ``error`` and
``kimitui replay --info`` counted it as one.  Facts and good news are said as such; a confound stays a warning.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kimitui.events import ErrorEvent
from kimitui.launcher import guard
from kimitui.launcher.plan import plan_swap
from kimitui.live import LiveController
from kimitui.live.profiles import ProfileBook
from kimitui.live.swaps import plan as live_plan
from kimitui.live.sweeps import guard_notice
from kimitui.profiles import load_profile
from kimitui.recording import write_recording
from kimitui.tui.app import KimituiApp
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.screens.swap_confirm import SwapConfirm
from tests.support.net import free_port
from tests.support.recordings import synthetic_sweep
from tests.support.tuiscreen import screen_text, settle, wait_for

SIZES = [(200, 55), (120, 40), (80, 24)]


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


# --------------------------------------------------------------------------- the swap plan


def test_one_knob_changed_is_a_fact_and_the_knob_it_does_not_change_is_not_warned_about() -> None:
    tuned = load_profile("ep8-tuned")
    plan = plan_swap(load_profile("ep8-eplb"), running=tuned, baseline=tuned)
    assert plan.warnings == [], plan.warnings  # ep8-eplb leaves num_continuous_decode_steps at 8: nothing to warn
    assert len(plan.notes) == 1 and "ep8-eplb: one knob changed from the baseline ep8-tuned" in plan.notes[0]
    assert not plan.confounded


def test_the_no_effect_warning_is_said_where_the_swap_changes_that_knob() -> None:
    tuned = load_profile("ep8-tuned")
    cont16 = plan_swap(load_profile("ep8-cont16"), running=tuned, baseline=tuned)  # 8 -> 16
    assert any("num_continuous_decode_steps has no effect" in w for w in cont16.warnings), cont16.warnings
    back = plan_swap(tuned, running=load_profile("ep8-eplb"), baseline=tuned)  # 8 -> 8
    assert back.warnings == [], back.warnings


def test_a_confounded_change_stays_a_warning() -> None:
    tuned = load_profile("ep8-tuned")
    plan = plan_swap(load_profile("ep8-v2"), running=tuned, baseline=tuned)
    assert plan.confounded and plan.warnings[0].startswith("confounded: 2 knobs changed") and plan.notes == []
    assert guard.check(tuned, load_profile("ep8-v2")).severity == "warning"


def test_back_to_the_baseline_on_the_sim_port_is_no_warning_and_names_no_port(state: Path) -> None:
    """``--sim-port`` moves every profile: the baseline is compared where the target serves."""
    guard.mark_baseline("sim", "ep8-tuned")
    plan = live_plan(ProfileBook([], sim_port=free_port()), "ep8-tuned", host_name="sim", simulated=True,
                     follower=None)
    assert plan.warnings == [], plan.warnings
    assert plan.notes == ["ep8-tuned is the baseline: back to the known-good profile"], plan.notes
    eplb = live_plan(ProfileBook([], sim_port=free_port()), "ep8-eplb", host_name="sim", simulated=True,
                     follower=None)
    assert eplb.warnings == [] and not any(re.search(r"\bport\b", n) for n in eplb.notes), eplb.notes


# --------------------------------------------------------------------------- the sweep's notice, the log, replay --info


def test_the_sweeps_guard_notice_is_information_for_one_knob_and_a_warning_when_confounded(state: Path) -> None:
    guard.mark_baseline("sim", "ep8-tuned")
    one = guard_notice("sim", load_profile("ep8-eplb"))
    assert one is not None and one.severity == "info", one
    two = guard_notice("sim", load_profile("ep8-v2"))
    assert two is not None and two.severity == "warning", two


def test_the_guard_notice_is_not_logged_as_an_error(state: Path) -> None:
    guard.mark_baseline("sim", "ep8-tuned")
    model = CockpitModel(raise_errors=True)
    for profile in ("ep8-eplb", "ep8-v2"):
        event = guard_notice("sim", load_profile(profile))
        assert event is not None
        model.apply([event])
    guard_lines = [e for e in model.logs if e.text.startswith("guard: ")]
    assert len(guard_lines) == 2
    assert [(e.severity, e.kind) for e in guard_lines] == [("info", "guard"), ("warning", "guard")]
    assert model.errors == 0


def test_replay_info_counts_no_advisory_as_an_error(tmp_path: Path, state: Path, capsys) -> None:
    from kimitui.cli import main

    guard.mark_baseline("sim", "ep8-tuned")
    events = synthetic_sweep(levels=[1])
    t = events[-1].t
    advisories = [guard_notice("sim", load_profile(p)) for p in ("ep8-eplb", "ep8-v2")]
    fault = ErrorEvent(t=t + 2, host="sim", source="metrics", message="GET /metrics failed")
    path = write_recording(tmp_path / "r.jsonl",
                           [*events, *(a.model_copy(update={"t": t + 1}) for a in advisories if a), fault])
    assert main(["replay", str(path), "--info"]) == 0
    info = capsys.readouterr().out
    assert re.search(r"^\s+error\s+1$", info, re.M), info
    assert re.search(r"^\s+warning\s+1$", info, re.M) and re.search(r"^\s+info\s+1$", info, re.M), info


# --------------------------------------------------------------------------- on screen, with --sim-port


@pytest.mark.timeout(240)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_swaps_on_the_sim_port_show_no_warning_for_one_knob_or_the_way_back(sim_home: Path,
                                                                                  size: tuple[int, int]):
    ctrl = LiveController(record=False, sim_port=free_port())  # the README's --sim-port advice
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=size) as pilot:
        await wait_for(app, lambda: app.model.profile == "ep8-tuned" and app.model.profile_state == "serving", 90,
                       "ep8-tuned to serve")
        await pilot.press("b")
        await wait_for(app, lambda: app.model.baseline == "ep8-tuned", 10, "the baseline mark")
        for key, target in (("6", "ep8-eplb"), ("7", "ep8-tuned")):
            await pilot.press(key)
            await wait_for(app, lambda: isinstance(app.screen, SwapConfirm), 10, f"the swap dialog for {target}")
            await settle(app, pilot)
            text = screen_text(app)
            assert f"→ {target}" in text
            assert "⚠" not in text and "has no effect" not in text and "where it listens" not in text, text
            if target == "ep8-eplb":
                assert "✓ ep8-eplb: one knob changed from the baseline ep8-tuned" in text
            await pilot.press("enter")
            await wait_for(app, lambda: app.model.profile == target and app.model.profile_state == "serving", 90,
                           f"{target} to serve")
