"""``kimitui status`` after the cockpit quit (and stopped its simulated server) never says the last
swap's profile is serving: the swap is told as history and the server as gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kimitui.launcher.supervisor import describe
from kimitui.live import LiveController
from tests.support.waiting import event_until

pytestmark = pytest.mark.timeout(120)


async def _cockpit_serves_then_quits() -> None:
    c = LiveController(record=False)
    sub = c.session.subscribe("test", maxsize=100_000)
    await c.start()
    try:
        switch = await event_until(sub, lambda e: e.kind == "profile_switch" and e.outcome == "ok", 60, [])
        assert switch.to_profile == "ep8-tuned"
    finally:
        await c.shutdown()


def test_status_after_quitting_the_cockpit_tells_the_last_swap_as_history(sim_home: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from kimitui.cli import main

    monkeypatch.setenv("COLUMNS", "300")  # one line each, as a wide terminal shows them
    asyncio.run(_cockpit_serves_then_quits())
    capsys.readouterr()
    assert main(["status"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "nothing kimitui started is running" in lines[0], out
    (last,) = [line for line in lines if "last swap" in line]
    assert "ep8-tuned serving" not in last and "ep8-tuned was serving" in last, last
    assert last.endswith("it no longer runs"), last


def test_the_last_swap_line_while_its_server_runs_is_unchanged() -> None:
    last = {"target": "b", "previous": "a", "outcome": "ok", "ended_at": 0.0}
    assert "b serving (" in describe(last, running=True) and "no longer" not in describe(last, running=True)
    rolled = {**last, "outcome": "rolled_back", "serving": "a"}
    assert "a was serving again" in describe(rolled, running=False)
    failed = {**last, "outcome": "failed"}
    assert describe(failed, running=False) == describe(failed, running=True)  # it claimed nothing serves
