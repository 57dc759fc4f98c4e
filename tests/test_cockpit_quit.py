"""Quitting the cockpit never leaves a host without a server (issue 13).

The rule, said in the quit confirmation: a real host's server is never stopped
by quitting; on the simulated host only a server this kimitui brought up from
nothing is stopped; a swap under way is finished or rolled back first.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from kimitui.live import LiveController
from kimitui.host.local import LocalHost
from kimitui.launcher.select import find_running
from kimitui.launcher.swap import SwapOptions, swap
from tests.test_cockpit import _until

pytestmark = pytest.mark.timeout(180)


async def test_quit_during_a_swap_finishes_it_and_leaves_the_found_server_running(sim_home: Path) -> None:
    async with LocalHost("sim", simulated=True) as host:  # someone else's server, running before the cockpit starts
        first = await swap(host, "ep8-tuned", SwapOptions(timeout=60))
        assert first.ok, first.reason
    c = LiveController(record=False, autostart=False)
    sub = c.session.subscribe("t", maxsize=100_000)
    seen: list = []
    await c.start()
    stopped = False
    try:
        await _until(sub, lambda e: e.kind == "profile_state" and e.detail == "found running", 60, seen)
        await c.swap("ep8-v2")
        await _until(sub, lambda e: e.kind == "swap_progress" and e.profile == "ep8-v2" and e.phase == "weights",
                     60, seen)
        rule = c.quit_rule()
        assert "finished or rolled back first" in rule and "keeps running" in rule, rule
        await c.shutdown()
        stopped = True
    finally:
        if not stopped:
            await c.shutdown()
    seen.extend(sub.drain())
    switches = [e for e in seen if e.kind == "profile_switch" and e.to_profile == "ep8-v2"]
    assert [s.outcome for s in switches] == ["ok"], [e.kind for e in seen][-20:]
    async with LocalHost("sim", simulated=True) as host:
        found = await find_running(host)
        assert found is not None and found[1].profile == "ep8-v2"
        async with httpx.AsyncClient(trust_env=False) as http:
            assert (await http.get(f"http://127.0.0.1:{found[1].port}/health")).status_code == 200
        await found[0].stop(found[1], grace_s=5)


async def test_quit_stops_only_the_simulated_server_this_kimitui_brought_up(sim_home: Path) -> None:
    c = LiveController(record=False)
    sub = c.session.subscribe("t", maxsize=100_000)
    seen: list = []
    await c.start()
    try:
        await _until(sub, lambda e: e.kind == "profile_switch", 60, seen)
        assert "simulated server this kimitui started is stopped" in c.quit_rule(), c.quit_rule()
    finally:
        await c.shutdown()
    async with LocalHost("sim", simulated=True) as host:
        assert await find_running(host) is None


async def test_quit_during_the_first_start_calls_it_off_and_leaves_no_server(sim_home: Path) -> None:
    """Issue 32: kimitui stops this server anyway, so quitting does not wait out its ~46 s start."""
    # the shipped ep8-tuned at the simulator's real clock: a start long enough to quit in the middle of
    refined = sim_home / "cwd" / "profiles" / "ep8-tuned.toml"
    refined.write_text(refined.read_text().replace("time_scale = 40.0", "time_scale = 1.0"))
    c = LiveController(record=False)
    sub = c.session.subscribe("t", maxsize=100_000)
    seen: list = []
    await c.start()
    stopped = False
    try:
        await _until(sub, lambda e: e.kind == "profile_state" and e.profile == "ep8-tuned" and e.state == "starting",
                     60, seen)
        assert c.busy == "swap"
        rule = c.quit_rule()
        assert "still starting is stopped at once" in rule and "finished or rolled back" not in rule, rule
        began = time.monotonic()
        await c.shutdown()
        stopped = True
        took = time.monotonic() - began
    finally:
        if not stopped:
            await c.shutdown()
    seen.extend(sub.drain())
    switches = [e for e in seen if e.kind == "profile_switch" and e.to_profile == "ep8-tuned"]
    assert [s.outcome for s in switches] == ["failed"], [(s.outcome, s.reason) for s in switches]
    assert "called off" in switches[0].reason, switches[0].reason
    assert not [e for e in seen if e.kind == "error" and e.severity == "error"], \
        [e.message for e in seen if e.kind == "error"]
    assert took < 30, f"quitting took {took:.1f} s: it waited for the server it then stopped"
    async with LocalHost("sim", simulated=True) as host:
        assert await find_running(host) is None
