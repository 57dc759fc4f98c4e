"""Keys that cannot fire at the wrong moment (issue 13): dimmed while they cannot run, asked before they destroy.

Pilot tests of the real app over the deterministic FakeController, plus the live
controller's profile keys (the same rule as ``kimitui profiles list``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.config import parse_config
from kimitui.profiles import scan_profiles
from kimitui.tui.app import KimituiApp
from kimitui.tui.widgets.profile_bar import ProfileBar
from kimitui.tui.model.keys import blocked_reason, profile_keys
from kimitui.tui.screens.confirm import Confirm
from kimitui.tui.screens.help import HelpScreen
from kimitui.tui.screens.swap_confirm import SwapConfirm
from kimitui.tui.screens.sweep_form import SweepForm
from tests.support.fakecontrol import FakeController, spec
from tests.support.tuiscreen import screen_text, settle, start_held_swap, tick

SIZE = (120, 40)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remembered profile keys go to this test's own state directory."""
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))


def _messages(app: KimituiApp) -> list[str]:
    return [n.message for n in app._notifications]


def _enabled(app: KimituiApp, key: str) -> bool:
    return app.screen.active_bindings[key].enabled




async def test_during_a_swap_profile_sweep_and_baseline_keys_are_dimmed_and_say_why():
    ctrl = FakeController()
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert _enabled(app, "1") and _enabled(app, "s") and _enabled(app, "b")
        await start_held_swap(app, ctrl, pilot)
        assert not _enabled(app, "1") and not _enabled(app, "s") and not _enabled(app, "b")
        assert _enabled(app, "n"), "a note can be added during a swap"
        plans = ctrl.calls.count(("plan_swap",))
        await pilot.press("1")
        await tick(pilot)
        assert not isinstance(app.screen, SwapConfirm), "no swap dialog that can only end in 'already running'"
        assert ctrl.calls.count(("plan_swap",)) == plans
        await pilot.press("s")
        await tick(pilot)
        assert not isinstance(app.screen, SweepForm)
        await pilot.press("b")
        await tick(pilot)
        assert ("mark_baseline",) not in ctrl.calls
        said = _messages(app)
        assert any("a swap is running: wait for it" in m for m in said)
        assert any("a swap is running: sweep once" in m for m in said)
        assert any("a swap is running: mark the baseline" in m for m in said)
        ctrl.swap_gate.set()
        await settle(app, pilot)
        assert _enabled(app, "1") and _enabled(app, "s"), "the keys come back when the swap ends"
        await pilot.press("s")
        await tick(pilot)
        assert isinstance(app.screen, SweepForm)


async def test_a_dimmed_key_is_dimmed_in_the_footer():
    ctrl = FakeController()
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await start_held_swap(app, ctrl, pilot)
        from textual.widgets._footer import FooterKey

        keys = {k.key: k for k in app.query(FooterKey)}
        assert keys["s"].has_class("-disabled")
        assert not keys["n"].has_class("-disabled")
        bar = app.query_one(ProfileBar)
        assert bar.blocked, "the number keys, named on the profile bar, are dimmed there"
        ctrl.swap_gate.set()
        await settle(app, pilot)
        keys = {k.key: k for k in app.query(FooterKey)}
        assert not keys["s"].has_class("-disabled") and not bar.blocked


async def test_during_a_sweep_profile_keys_are_dimmed_and_the_palette_says_why():
    ctrl = FakeController()
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await ctrl.start_sweep(spec([1, 8]))
        await settle(app, pilot)
        assert ctrl.busy == "sweep" and not _enabled(app, "2") and _enabled(app, "s")
        await pilot.press("2")
        await tick(pilot)
        assert not isinstance(app.screen, SwapConfirm)
        cmd = next(c for c in app.get_system_commands(app.screen) if c.title == "Swap to profile ep8-v2")
        cmd.callback()
        await settle(app, pilot)
        assert not isinstance(app.screen, SwapConfirm)
        assert sum("a sweep is running: stop it (s)" in m for m in _messages(app)) == 2
        await pilot.press("question_mark")
        await tick(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert "swap to profile ep8-v2  (not now: a sweep is running" in screen_text(app)


async def test_s_during_a_sweep_asks_before_stopping_it():
    ctrl = FakeController()
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await ctrl.start_sweep(spec([1, 8, 32]))
        await settle(app, pilot)
        await pilot.press("s")
        await tick(pilot)
        assert isinstance(app.screen, Confirm), "a stray s must not end a 15-minute sweep"
        text = screen_text(app)
        assert "Stop the sweep on ep8-tuned (1 of 3 levels done, now C=8)?" in text
        assert "Finished levels are kept" in text
        await pilot.press("escape")
        await settle(app, pilot)
        assert ("stop_sweep",) not in ctrl.calls and ctrl.busy == "sweep"
        await pilot.press("s")
        await tick(pilot)
        await pilot.press("y")
        await settle(app, pilot)
        assert ("stop_sweep",) in ctrl.calls and ctrl.busy is None


def test_blocked_reason_follows_busy_and_the_profile_state():
    assert blocked_reason("pick_profile", None, "serving") is None
    assert blocked_reason("sweep", None, "starting")  # a swap whose controller no longer says busy
    assert blocked_reason("baseline", None, "stopping")
    assert blocked_reason("sweep", "sweep", "serving") is None  # s stops it (after asking)
    assert blocked_reason("note", "swap", "starting") is None


async def test_help_shows_keys_as_typed():
    app = KimituiApp(FakeController(), tick=None, config_keys={"sweep": "w"})
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await tick(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "slash" not in text and "question_mark" not in text
        shown = dict(app.screen.keys)
        assert shown["/"] == "search" and shown["?"] == "help" and shown["w"] == "sweep", "as typed, remaps applied"
        assert "s" not in shown


async def test_the_palette_lists_each_action_once_with_its_key_as_typed():
    app = KimituiApp(FakeController(), tick=None, config_keys={"sweep": "w"})
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.query_one("#logpanel").focus()
        await tick(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert len(titles) == len(set(titles))
        assert "Quit kimitui" in titles and "Quit" not in titles
        assert "Maximise / restore the focused panel" in titles and "Maximize" not in titles
        assert "Show the keys" in titles and "Keys" not in titles
        assert "Theme" in titles
        helps = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert helps["Start or stop a sweep"] == "key w" and helps["Log: search"] == "key /"
        assert helps["Show the keys"] == "key ?"


# --------------------------------------------------------------------------- stable profile keys


@pytest.fixture
def only_my_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A search path of one directory: no ./profiles, no user profiles, no shipped ones."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    (tmp_path / "none").mkdir()
    monkeypatch.setattr("kimitui.profiles.loader.shipped_dir", lambda: tmp_path / "none")
    d = tmp_path / "profiles"
    d.mkdir()
    return d


def _profile(d: Path, name: str, extra: str = "") -> None:
    (d / f"{name}.toml").write_text(f'name = "{name}"\nmodel_path = "/models/k2"\n{extra}')


class DirController(FakeController):
    """A live controller's profile surface: its profile directories and config, names from the files."""

    def __init__(self, dirs: list[str], config_text: str = "") -> None:
        super().__init__()
        self.profile_dirs = dirs
        self.config = parse_config(config_text)

    def profile_names(self) -> list[str]:
        return [p.name for p in scan_profiles(self.profile_dirs)[0]]


async def test_profile_keys_are_declared_ordered_or_remembered_and_adding_one_moves_none(only_my_profiles: Path):
    d = only_my_profiles
    _profile(d, "zeta", 'key = "5"\n')
    _profile(d, "mid")
    _profile(d, "tuned")
    ctrl = DirController([str(d)], '[profiles]\norder = ["tuned"]\n')
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        await tick(pilot)
        assert isinstance(app.screen, SwapConfirm) and app.screen.plan.target == "zeta"
        await pilot.press("escape")
        await pilot.press("1")
        await tick(pilot)
        assert app.screen.plan.target == "tuned"
        await pilot.press("escape")
        await pilot.press("2")
        await tick(pilot)
        assert app.screen.plan.target == "mid"
        await pilot.press("escape")
        _profile(d, "alpha")  # sorts first: it must not push mid off key 2
        await pilot.press("2")
        await tick(pilot)
        assert app.screen.plan.target == "mid"
        await pilot.press("escape")
        await pilot.press("3")
        await tick(pilot)
        assert app.screen.plan.target == "alpha"
        await pilot.press("escape", "question_mark")
        await tick(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.profiles == {"1": "tuned", "2": "mid", "3": "alpha", "5": "zeta"}
        assert "swap to profile zeta" in screen_text(app)


def test_the_live_controller_uses_the_stable_keys(only_my_profiles: Path, tmp_path: Path):
    from kimitui.live import LiveController

    d = only_my_profiles
    _profile(d, "b", 'key = "7"\n')
    _profile(d, "a")
    cfg = tmp_path / "config.toml"
    cfg.write_text('[profiles]\norder = ["a"]\n')
    by_key, notes = profile_keys(LiveController(config_path=str(cfg), profile_dirs=[str(d)]))
    assert by_key["7"] == "b" and by_key["1"] == "a" and not notes


async def test_a_key_clash_is_said_in_the_cockpit(only_my_profiles: Path):
    d = only_my_profiles
    _profile(d, "a", 'key = "2"\n')
    _profile(d, "b", 'key = "2"\n')
    app = KimituiApp(DirController([str(d)]), tick=None)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        assert any("profile keys:" in m and "key 2 is also declared by a" in m for m in _messages(app))


def test_a_watched_server_blocks_profile_keys_and_baseline_but_not_sweeps():
    url = "http://127.0.0.1:30000"
    assert "watched, not controlled" in (blocked_reason("pick_profile", None, "serving", watched=url) or "")
    assert blocked_reason("baseline", None, "serving", watched=url)
    assert blocked_reason("sweep", None, "serving", watched=url) is None


async def test_profile_keys_are_dimmed_while_watching_a_server_kimitui_did_not_start():
    ctrl = FakeController()
    ctrl.watch_url = "http://127.0.0.1:30000"  # what LiveController(watch_url=...) exposes
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert not _enabled(app, "1") and _enabled(app, "s")
        await pilot.press("1")
        await tick(pilot)
        assert not isinstance(app.screen, SwapConfirm)
        assert any("watched, not controlled" in m for m in _messages(app))


class ForeignServerFake(FakeController):
    """A live controller that found a server it did not start on the simulated host's port."""

    def __init__(self) -> None:
        super().__init__()
        self.watch_offer = "http://127.0.0.1:30001"
        self.watched: list[str | None] = []

    async def watch(self, url: str | None = None) -> None:
        self.watched.append(url or self.watch_offer)


async def test_the_palette_offers_to_watch_a_foreign_server_on_the_sim_port():
    ctrl = ForeignServerFake()
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        [cmd] = [c for c in app.get_system_commands(app.screen) if c.title.startswith("Watch ")]
        assert cmd.title == "Watch http://127.0.0.1:30001" and "never stopped or swapped" in cmd.help
        cmd.callback()
        await settle(app, pilot)
        assert ctrl.watched == ["http://127.0.0.1:30001"]
