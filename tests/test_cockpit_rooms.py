"""The cockpit model's rooms (issue 32): one state per panel, composed by ``CockpitModel``, which keeps
the names the widgets read as views onto them, and a reset that starts every panel over."""

from __future__ import annotations

from kimitui.tui.model import cockpit_state
from kimitui.tui.model.cockpit_state import CockpitModel, _Via
from tests.support.fakecontrol import story_events

VIEWS = {name: attr for name, attr in vars(CockpitModel).items() if isinstance(attr, _Via)}


def test_every_name_the_widgets_read_is_its_panel_state_s_own() -> None:
    m = CockpitModel(raise_errors=True)
    m.apply(story_events())
    assert len(VIEWS) >= 40
    for name, via in VIEWS.items():
        panel = getattr(m, via.panel)
        assert getattr(m, name) is getattr(panel, via.name), name


def test_a_name_written_through_the_model_lands_in_its_panel() -> None:
    m = CockpitModel()
    m.baseline = "ep8-tuned"
    m.sim_time_scale = 20.0
    assert m.header_state.baseline == "ep8-tuned" and m.server_state.sim_time_scale == 20.0
    assert m.judged_slo.time_scale == 20.0  # the sweep's SLO reads the server's clock through the composition


def test_a_reset_gives_every_panel_a_fresh_state() -> None:
    m = CockpitModel()
    m.apply(story_events())
    before = {v.panel: getattr(m, v.panel) for v in VIEWS.values()}
    assert m.sweep is not None and m.gpus and m.logs
    m.reset()
    assert all(getattr(m, panel) is not state for panel, state in before.items())
    assert m.sweep is None and not m.gpus and not m.logs and m.generation == 1


def test_the_composition_module_holds_no_fold_of_its_own() -> None:
    """Each handler lives with its panel's state: the composition only dispatches."""
    handlers = [n for n in vars(CockpitModel) if n.startswith("_on_")]
    assert handlers == [] and not hasattr(cockpit_state, "_FOLD")
