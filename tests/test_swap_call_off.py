"""A start from nothing can be called off; a swap that replaced a server cannot (issue 32).

``SwapOptions.call_off``: the cockpit sets it when it quits on the simulated host, where it
would stop the server anyway.  Real processes on 127.0.0.1: the simulator at its real clock (a
start of ~46 s, long enough to call off in the middle), a PD deployment at its real clock too.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kimitui.events import Event, ProfileState
from kimitui.host.local import LocalHost
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.swap import SwapOptions, swap
from kimitui.session import Session
from tests.support.net import free_port

pytestmark = pytest.mark.timeout(240)


def _profile(profiles: Path, name: str, port: int, time_scale: float) -> Path:
    path = profiles / f"{name}.toml"
    path.write_text(f'name = "{name}"\nextends = "ep8-tuned"\nport = {port}\n[sim]\ntime_scale = {time_scale}\n')
    return path


def _pd_profile(profiles: Path, router_port: int) -> Path:
    path = profiles / "pd.toml"
    path.write_text(
        f'name = "pd"\nextends = "pd-1p1d"\nport = {router_port}\n[sim]\ntime_scale = 1.0\n'
        f'[pd]\n[pd.prefill]\nbase_gpu_id = 0\nport = {free_port()}\nbootstrap_port = {free_port()}\n'
        f'[pd.decode]\nbase_gpu_id = 4\nport = {free_port()}\n')
    return path


def _call_off_once_starting(session: Session, profile: str) -> asyncio.Event:
    """An event set as soon as ``profile`` is starting (its process runs, its weights load)."""
    called_off = asyncio.Event()

    def sink(e: Event) -> None:
        if isinstance(e, ProfileState) and e.profile == profile and e.state == "starting":
            called_off.set()

    session.add_sink(sink)
    return called_off


async def _alive(launcher: ProcessLauncher) -> list[str]:
    return sorted([f"{r.profile}:{r.role}" for r in await launcher.records() if await launcher.alive(r)])


@pytest.mark.parametrize("deployed", [False, True], ids=["one server", "pd deployment"])
async def test_a_start_from_nothing_called_off_stops_what_it_started(sim_home: Path, deployed: bool) -> None:
    profiles, port = sim_home / "cwd" / "profiles", free_port()
    target = _pd_profile(profiles, port) if deployed else _profile(profiles, "slow", port, 1.0)
    name = "pd" if deployed else "slow"
    session = Session(host="sim")
    events: list[Event] = []
    session.add_sink(events.append)
    async with LocalHost("sim", simulated=True) as host:
        launcher = ProcessLauncher(host, simulated=True, state_dir=str(sim_home / "state" / "kt"))
        began = time.monotonic()
        try:
            options = SwapOptions(timeout=120, call_off=_call_off_once_starting(session, name))
            out = await swap(host, str(target), options, session=session, launcher=launcher)
            took = time.monotonic() - began
            assert out.outcome == "failed" and out.serving is None and "called off" in out.reason, out.reason
            assert await _alive(launcher) == []
            assert took < 40, f"{took:.1f} s: the start was waited out"  # the simulator's start takes ~46 s
            states = [e.state for e in events if isinstance(e, ProfileState) and e.profile == name]
            assert states[-1] == "stopped", states
        finally:
            for rec in await launcher.records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2)


async def test_a_swap_that_replaced_a_server_ignores_the_call_off_and_serves(sim_home: Path) -> None:
    """Never left without a server: the swap finishes (or rolls back) as if nothing was asked."""
    profiles, port = sim_home / "cwd" / "profiles", free_port()
    good, other = _profile(profiles, "good", port, 40.0), _profile(profiles, "other", port, 40.0)
    called_off = asyncio.Event()
    called_off.set()
    async with LocalHost("sim", simulated=True) as host:
        launcher = ProcessLauncher(host, simulated=True, state_dir=str(sim_home / "state" / "kt"))
        try:
            assert (await swap(host, str(good), SwapOptions(timeout=60), launcher=launcher)).ok
            out = await swap(host, str(other), SwapOptions(timeout=60, call_off=called_off), launcher=launcher)
            assert out.ok and out.serving == "other" and out.previous == "good", out.reason
            assert await _alive(launcher) == ["other:None"]
        finally:
            for rec in await launcher.records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2)
