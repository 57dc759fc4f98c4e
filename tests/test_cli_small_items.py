"""The small command-line items of issue 32, each as an operator met it.

``kimitui profiles list`` piped to a file, ``kimitui status`` at 80 columns, and the first log
line of the simulated host: each read as printed, nothing folded or split mid-word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.events import ConnectionState, Event
from kimitui.host.local import LocalHost
from kimitui.tui.model.cockpit_state import CockpitModel
from tests.support.profiles import ProfileDirs, profile_env  # noqa: F401

pytestmark = pytest.mark.timeout(180)


def test_profiles_list_to_a_pipe_is_a_line_per_profile(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns the table folded knob names letter by letter (``expert_balancedness_re`` / ``port_mode``)."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["profiles", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "name", "tp/ep", "extends", "+", "own", "settings", "description"], lines[0]
    (eplb,) = [line for line in lines if line.split()[1:2] == ["ep8-eplb"]]
    assert "ep8-tuned + enable_eplb=true, expert_balancedness_report_mode=both," in eplb, eplb
    assert eplb.rstrip().endswith("the single-knob half of ep8-v2"), eplb  # its description on the same line
    assert not any(ch in "".join(lines) for ch in "│┃━─"), "a table in a pipe"


async def test_the_simulated_hosts_first_log_line_says_where_kimitui_is_connected() -> None:
    """It read "connection connected local" for host ``sim``: which link, to what?"""
    events: list[Event] = []
    host = LocalHost("sim", events.append, simulated=True)
    await host.connect()
    await host.close()
    model = CockpitModel()
    model.apply(events[:1])
    (line,) = [e.text for e in model.log_ring.entries if e.kind == "connection"]
    assert line == "connected to this machine: the simulated host, no SSH", line  # its kind column says link
    assert isinstance(events[1], ConnectionState) and events[1].state == "closed"


def test_status_keeps_the_log_path_on_its_label_line(sim_home: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns ``log:`` stood alone and the path went to the next line."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["swap", "ep8-tuned", "--yes", "--timeout", "60"]) == 0
    try:
        capsys.readouterr()
        main(["status", "--json"])
        log = json.loads(capsys.readouterr().out)["log"]
        assert len(f"  log: {log}") > 80, log  # long enough to have been split
        assert main(["status"]) == 0
        out = capsys.readouterr().out
        (line,) = [ln for ln in out.splitlines() if ln.lstrip().startswith("log")]
        assert line == f"  log: {log}", out
    finally:
        main(["stop", "--yes"])
