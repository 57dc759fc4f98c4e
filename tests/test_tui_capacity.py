"""The cockpit's capacity answer beside the curve: the config's SLO judged on each finished level."""

from __future__ import annotations

from kimitui.capacity.slo import parse_slo
from kimitui.events import LevelResult
from kimitui.tui.model.cockpit_state import CockpitModel
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


def test_on_a_simulator_the_slo_is_held_to_the_real_hosts_clock_and_the_answer_says_so() -> None:
    """At time scale 20 a request's TTFT is 20x shorter: the written `ttft_p99<=2s` is judged as 0.1 s (as
    `kimitui capacity` does), else a ×20 server would pass an SLO the real one fails."""
    def model(scale: float | None) -> CockpitModel:
        m = CockpitModel(host="sim")
        m.slo = parse_slo("ttft_p99<=0.25s")  # synthetic TTFTs are ~0.2 s: holds as written
        knobs = {"ep_size": 8} if scale is None else {"ep_size": 8, "sim": True, "sim_time_scale": scale}
        m.apply(synthetic_sweep(levels=[1, 16, 64], requests_per_level=24, knobs=knobs))  # its /server_info says
        return m

    real = model(None)
    assert real.sweep is not None and real.sweep.capacity is not None and real.sweep.capacity.answer == 64
    fast = model(20.0)
    assert fast.sweep is not None and fast.sweep.capacity is not None
    assert fast.sweep.capacity.answer is None  # 0.2 s at x20 is 4 s of a real host's TTFT
    assert "scaled to the simulator's time scale 20" in fast.sweep.capacity.sentence()
    assert fast.slo is not None and fast.slo.describe() == parse_slo("ttft_p99<=0.25s").describe()  # kept as written
