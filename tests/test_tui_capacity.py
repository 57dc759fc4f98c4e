"""The cockpit's capacity answer beside the curve: the config's SLO judged on each finished level."""

from __future__ import annotations

from kimitui.capacity.slo import parse_slo
from kimitui.events import LevelResult
from kimitui.tui.cockpit_state import CockpitModel
from kimitui.tui.widgets.sweep_curve import sweep_status
from tests.support.recordings import synthetic_sweep


def _model(slo: str) -> CockpitModel:
    m = CockpitModel(host="sim")
    m.slo = parse_slo(slo)
    m.apply(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24))
    return m


def test_the_sweep_says_up_to_which_level_the_slo_holds() -> None:
    probe = _model("decode_p50>=1")
    assert probe.sweep is not None and probe.sweep.capacity is not None
    assert probe.sweep.capacity.failing is None and probe.sweep.capacity.answer == 64  # holds everywhere
    decode16 = next(p for p in probe.sweep.capacity.curve if p.x == 16).check.terms[0].value
    assert decode16 is not None
    m = _model(f"decode_p50>={decode16 * 0.95:.1f}")
    assert m.sweep is not None and m.sweep.capacity is not None
    assert m.sweep.capacity.answer == 16 and m.sweep.capacity.failing == 64
    text = sweep_status(m)
    assert "holds up to C=16 ±24 at decode p50 ≥" in text and "tok/s/user" in text
    assert "holds up to" not in sweep_status(m, width=60) or len(sweep_status(m, width=60)) <= 60


def test_a_failed_level_is_not_judged_and_an_slo_that_fails_everywhere_says_so() -> None:
    m = _model("ttft_p99<=1ms")
    assert m.sweep is not None and m.sweep.capacity is not None
    assert m.sweep.capacity.answer is None and "does not hold even at C=1" in sweep_status(m)
    assert all(isinstance(lv, LevelResult) for lv in m.sweep.levels)
