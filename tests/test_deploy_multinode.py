"""A two-node deployment on two simulated hosts of this machine, swapped and rolled back as one.

``[hosts.pair-a] sim = true`` and ``[hosts.pair-b] sim = true``: each simulated host keeps its own
state dir (``KIMITUI_SIM_NAME``), so rank 0 runs on pair-a and rank 1 on pair-b, both on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from kimitui.config import parse_config
from kimitui.host.base import Host
from kimitui.hosts_from_config import make_host
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.select import find_running
from kimitui.launcher.swap import SwapOptions, swap
from kimitui.session import Session
from tests.support.net import free_port

pytestmark = pytest.mark.timeout(240)

CONFIG = "[hosts.pair-a]\nsim = true\n[hosts.pair-b]\nsim = true\n"


def _profiles(profiles: Path, port: int) -> tuple[Path, Path]:
    good = profiles / "good.toml"
    good.write_text(f'name = "good"\nextends = "ep8-tuned"\nport = {port}\n[sim]\ntime_scale = 100.0\n')
    two = profiles / "two.toml"
    two.write_text(f'name = "two"\nextends = "ep16-2node"\nport = {port}\nnodes = ["pair-a", "pair-b"]\n'
                   f'dist_init_addr = "127.0.0.1:{free_port()}"\n[sim]\ntime_scale = 100.0\n')
    return good, two


class _Hosts:
    """The config's hosts by name, connected once (the resolver a swap takes)."""

    def __init__(self) -> None:
        self.config = parse_config(CONFIG)
        self.open: dict[str, Host] = {}

    async def __call__(self, name: str) -> Host:
        if name not in self.open:
            host = make_host(self.config, name)
            await host.connect()
            self.open[name] = host
        return self.open[name]

    async def close(self) -> None:
        for host in self.open.values():
            for rec in await (launcher := ProcessLauncher(host, simulated=True)).records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2.0)
            await host.close()


@pytest.fixture
async def hosts(sim_home: Path) -> AsyncIterator[_Hosts]:
    resolver = _Hosts()
    try:
        yield resolver
    finally:
        await resolver.close()


async def _alive(host: Host) -> list[tuple[str, str | None]]:
    launcher = ProcessLauncher(host, simulated=True)
    return sorted([(r.profile, r.role) for r in await launcher.records() if await launcher.alive(r)])


async def test_two_nodes_start_together_serve_on_rank_0_and_swap_out_whole(sim_home: Path, hosts: _Hosts) -> None:
    port = free_port()
    good, two = _profiles(sim_home / "cwd" / "profiles", port)
    a, b = await hosts("pair-a"), await hosts("pair-b")
    session = Session(host="pair-a")
    options = SwapOptions(timeout=90, hosts=hosts)
    assert (await swap(a, str(good), options, session=session)).ok
    out = await swap(a, str(two), options, session=session)
    assert out.ok and out.previous == "good" and out.serving == "two", out.reason
    assert await _alive(a) == [("two", "node-0")] and await _alive(b) == [("two", "node-1")]
    assert out.record is not None and [(m.role, m.node) for m in out.record.members] == [("node-1", "pair-b")]
    found = await find_running(a)
    assert found is not None and found[1].role == "node-0"
    async with httpx.AsyncClient(trust_env=False) as http:
        assert (await http.get(f"http://127.0.0.1:{port}/health")).status_code == 200

    back = await swap(a, str(good), options, session=session)
    assert back.ok and back.previous == "two", back.reason
    assert await _alive(a) == [("good", None)] and await _alive(b) == []


async def test_rank_1_dying_rolls_every_node_back(sim_home: Path, hosts: _Hosts) -> None:
    port = free_port()
    good, two = _profiles(sim_home / "cwd" / "profiles", port)
    a, b = await hosts("pair-a"), await hosts("pair-b")
    session = Session(host="pair-a")
    options = SwapOptions(timeout=90, hosts=hosts)
    assert (await swap(a, str(good), options, session=session)).ok

    async def kill_rank_1() -> bool:
        launcher = ProcessLauncher(b, simulated=True)
        for _ in range(400):
            running = [r for r in await launcher.records() if r.role == "node-1" and await launcher.alive(r)]
            if running:
                assert running[0].pid is not None
                res = await b.run(["kill", "-s", "KILL", "--", f"-{running[0].pid}"])
                return res.ok
            await asyncio.sleep(0.02)
        return False

    killer = asyncio.get_running_loop().create_task(kill_rank_1())
    out = await swap(a, str(two), options, session=session)
    assert await killer
    assert out.outcome == "rolled_back" and out.serving == "good", out.reason
    assert await _alive(a) == [("good", None)] and await _alive(b) == []
    async with httpx.AsyncClient(trust_env=False) as http:
        assert (await http.get(f"http://127.0.0.1:{port}/health")).status_code == 200
