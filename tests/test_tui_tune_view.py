"""The autopilot's line and rows as a replay (or the live cockpit) folds its ``TuneProgress`` events."""

from __future__ import annotations

from kimitui.events import TuneProgress, TuneStepView
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.tune_view import step_rows, tune_active, tune_line


def _progress(status: str = "running", step: int | None = 2, phase: str = "sweeping") -> TuneProgress:
    steps = [TuneStepView(index=1, label="enable_eplb true", profile="ep8-eplb", status="reverted",
                          objective_change="peak 1,538 -> 862 tok/s (-44 %, ±8 %)", reason="worse beyond noise",
                          cause="explained by 6 EPLB rebalances, 30 s in all"),
             TuneStepView(index=2, label="ep_size 4", profile="ep4", status="running" if step == 2 else "pending",
                          phase=phase if step == 2 else ""),
             TuneStepView(index=3, label="DFLASH drafter")]
    return TuneProgress(t=1.0, host="sim", tune_id="t1", status=status, start="ep8-tuned", best="ep8-tuned",
                        step=step, phase=phase, steps=steps)


def test_the_header_line_says_the_step_its_phase_the_best_and_the_tally() -> None:
    assert tune_line(_progress()) == ("autopilot 2/3 ep_size 4: sweeping · best ep8-tuned · reverted 1 · a: steer")
    assert tune_line(_progress("paused", None, "")).startswith("autopilot paused · best ep8-tuned")
    done = tune_line(_progress("finished", None, ""))
    assert done.startswith("autopilot finished · best ep8-tuned") and "a: steer" not in done


def test_rows_mark_the_step_under_way_and_carry_the_root_cause() -> None:
    rows = step_rows(_progress())
    assert rows[0][3] == "reverted" and "EPLB rebalances" in rows[0][5] and rows[1][3] == "▶ sweeping"


def test_a_replayed_tune_reaches_the_model_and_the_header() -> None:
    m = CockpitModel(host="sim")
    parts = m.apply([_progress()])
    assert "header" in parts and m.tune is not None and tune_active(m.tune)
    m.apply([_progress("finished", None, "")])
    assert m.tune is not None and not tune_active(m.tune)
