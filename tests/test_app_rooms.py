"""The app's rooms (issue 32): the controller read through protocols, not probed attribute by attribute."""

from __future__ import annotations

import re
from pathlib import Path

from kimitui.control import Fleet
from kimitui.live import FleetController
from kimitui.recording import RecordingWriter
from kimitui.replay.controller import ReplayController
from tests.support.fakecontrol import FakeController
from tests.test_tui_fleet import HOSTS, fleet_events

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
