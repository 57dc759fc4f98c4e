"""The app's rooms (issue 32): the controller read through protocols, the painter reset in one call, the actions in
rooms of their own."""

from __future__ import annotations

import re
from pathlib import Path

from textual.actions import parse as parse_action

from kimitui.control import Fleet
from kimitui.live import FleetController
from kimitui.recording import RecordingWriter
from kimitui.replay.controller import ReplayController
from kimitui.tui.app import KimituiApp
from kimitui.tui.bindings import BINDINGS
from kimitui.tui.model.fold import PANELS
from kimitui.tui.painter import Painter
from tests.support.fakecontrol import FakeController
from tests.test_tui_fleet import HOSTS, FakeFleet, fleet_events

TUI = Path(__file__).resolve().parent.parent / "kimitui" / "tui"


def test_a_session_over_several_hosts_is_a_fleet_live_or_replayed(tmp_path: Path) -> None:
    """The app asks ``isinstance(controller, Fleet)``: the live fleet and a replay both are one, a host alone is not."""
    cfg = tmp_path / "config.toml"
    cfg.write_text("[hosts.alpha]\nsim = true\nsim_port = 30991\n\n[hosts.beta]\nsim = true\nsim_port = 30992\n")
    live = FleetController(["alpha", "beta"], config_path=str(cfg), record=False)
    assert isinstance(live, Fleet) and live.hosts == ["alpha", "beta"] and live.busy_anywhere == {}

    path = tmp_path / "fleet.jsonl"
    writer = RecordingWriter(path, hosts=list(HOSTS))
    for ev in fleet_events():
        writer(ev)
    writer.close()
    replay = ReplayController(path, speed=None)
    assert isinstance(replay, Fleet) and replay.hosts == list(HOSTS)
    assert replay.busy_anywhere == {}  # a replay runs nothing: quitting it asks nothing

    assert not isinstance(FakeController(), Fleet)


def test_the_tui_reads_the_controller_through_its_protocols_not_getattr_probes() -> None:
    """A probe (``getattr(self.controller, "hosts", None)``) hides what the app needs from the controller's type."""
    probes = [f"{p.relative_to(TUI)}:{n}" for p in sorted(TUI.rglob("*.py"))
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if re.search(r"getattr\((self\.)?(app\.)?(controller|ctl)\b", line)]
    assert probes == []


def _scramble(painter: Painter) -> dict[str, object]:
    """Every field a reset must set, set to a marker no reset would write: one it misses keeps its marker."""
    markers = {name: object() for name in vars(painter) if name not in Painter.KEPT}
    for name, marker in markers.items():
        setattr(painter, name, marker)
    return markers


async def test_a_reset_leaves_the_painter_as_a_new_one_on_the_same_screen() -> None:
    app = KimituiApp(FakeFleet(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        painter = app.painter
        markers = _scramble(painter)
        assert markers  # the screen's state is there to reset
        painter.reset()
        fresh = Painter(app, app.fleet, chart_period=painter.chart_period, poll=painter.poll, toast=painter.toast,
                        paced=painter.paced)
        assert ({k: v for k, v in vars(painter).items() if k not in Painter.KEPT}
                == {k: v for k, v in vars(fresh).items() if k not in Painter.KEPT})
        assert painter.dirty == set(PANELS) and painter.views["gpus"]


async def test_a_focus_switch_leaves_no_state_of_the_previous_host() -> None:
    """Focusing another host rebuilds the screen around its model: the painter forgets all it knew of the old one."""
    app = KimituiApp(FakeFleet(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        old_views = {id(v) for views in app.painter.views.values() for v in views}
        markers = _scramble(app.painter)
        await app.focus_host("gpu-b")
        await pilot.pause()
        painter = app.painter
        left = [name for name, marker in markers.items() if getattr(painter, name) is marker]
        assert left == []
        b = app.fleet.models["gpu-b"]
        views = [v for vs in painter.views.values() for v in vs]
        assert views and all(getattr(v, "model") is b for v in views)
        assert not old_views & {id(v) for v in views}  # the old host's widgets are gone from the map
        assert painter.generation == b.generation and painter.layout_shown is not None


def test_every_key_reaches_an_action_of_the_app_and_the_app_stays_a_composition() -> None:
    """The actions live in their rooms (host, view, replay, quit) and the app finds each the bindings name; what
    stays in ``app.py`` is the composition (it held the pump, the transport and 40 actions in 880 lines)."""
    names = {parse_action(b.action)[1] for b in BINDINGS}
    missing = sorted(n for n in names if not callable(getattr(KimituiApp, f"action_{n}", None)))
    assert missing == []
    lines = len((TUI / "app.py").read_text().splitlines())
    assert lines < 400, f"kimitui/tui/app.py has {lines} lines: give what grew a room of its own"
