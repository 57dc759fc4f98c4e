"""A PD deployment on a simulated host moves whole with ``--sim-port`` / ``[hosts.H] sim_port``:
its prefill, decode and bootstrap ports too, not only the router's.  Two simulated hosts on one
machine each run ``pd-1p1d`` at once (real sim servers, routers and bootstrap sockets)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from kimitui.config import load_config
from kimitui.hosts_from_config import make_host
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.profiles import load
from kimitui.profiles import deployment, diff_profiles
from kimitui.profiles.deploy import on_port
from kimitui.profiles.schema import PD_BOOTSTRAP_PORT
from tests.support.launcher_env import stop_everything
from tests.support.net import free_port

pytestmark = pytest.mark.timeout(240)

PREFILL, BOOT, DECODE = 10, 20, 30
"""The profile's layout: prefill, bootstrap and decode ports this far above the router's."""


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _two_sim_ports() -> int:
    """A port A such that A and A+1 and both hosts' moved PD ports are free now."""
    for _ in range(200):
        a = free_port()
        if a + DECODE + 1 < 32000 and all(_bindable(a + d + i) for d in (0, PREFILL, BOOT, DECODE) for i in (0, 1)):
            return a
    raise RuntimeError("no free run of ports")


def test_on_port_moves_every_pd_port_by_the_routers_shift() -> None:
    shipped = load("pd-1p1d")
    assert shipped.pd is not None
    (prefill,), (decode,) = shipped.pd.prefill, shipped.pd.decode
    moved = on_port(shipped, shipped.port + 123)
    assert moved.pd is not None
    assert moved.port == shipped.port + 123
    assert moved.pd.prefill[0].port == prefill.port + 123 and moved.pd.decode[0].port == decode.port + 123
    assert moved.pd.prefill[0].bootstrap_port == (prefill.bootstrap_port or PD_BOOTSTRAP_PORT) + 123
    specs = {s.role: s for s in deployment(moved, simulated=True)}
    assert specs["prefill-0"].port == prefill.port + 123 and specs["decode-0"].port == decode.port + 123
    assert str((prefill.bootstrap_port or PD_BOOTSTRAP_PORT) + 123) in specs["prefill-0"].argv
    assert f"http://127.0.0.1:{decode.port + 123}" in specs["router"].argv
    # a move below the bootstrap port's own shift stays a port a user can bind
    low = on_port(shipped, 20000).pd
    assert low is not None and all(1024 <= p <= 65535 for p in (low.prefill[0].bootstrap_port, low.decode[0].port))
    # moving is where it listens, not a knob: never a confound
    diff = diff_profiles(shipped, moved)
    assert diff.families == {} and "pd.ports" in diff.observability, diff.changes


async def _ports(config: Path, name: str) -> dict[str | None, int | None]:
    async with make_host(load_config(config), name) as host:
        launcher = ProcessLauncher(host, simulated=True)
        return {r.role: r.port for r in await launcher.records() if await launcher.alive(r)}


def _answers(port: int) -> int:
    with httpx.Client(trust_env=False, timeout=30) as http:
        model = http.get(f"http://127.0.0.1:{port}/v1/models").json()["data"][0]["id"]
        return http.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                         json={"model": model, "messages": [{"role": "user", "content": "hi"}],
                               "max_tokens": 4}).status_code


def test_two_simulated_hosts_each_run_pd_on_their_own_ports(sim_home: Path, capsys) -> None:
    from kimitui.cli import main

    base = 30001
    profile = sim_home / "cwd" / "profiles" / "pd.toml"
    profile.write_text(
        f'name = "pd"\nextends = "pd-1p1d"\nport = {base}\n[sim]\ntime_scale = 100.0\n'
        f'[pd]\n[pd.prefill]\nbase_gpu_id = 0\nport = {base + PREFILL}\nbootstrap_port = {base + BOOT}\n'
        f'[pd.decode]\nbase_gpu_id = 4\nport = {base + DECODE}\n')
    a = _two_sim_ports()
    config = sim_home / "config.toml"
    config.write_text(f"[hosts.sim-a]\nsim = true\nsim_port = {a}\n\n[hosts.sim-b]\nsim = true\nsim_port = {a + 1}\n")
    states = [sim_home / "state" / "kimitui" / "sim" / "hosts" / n for n in ("sim-a", "sim-b")]
    try:
        for name in ("sim-a", "sim-b"):
            code = main(["--config", str(config), "swap", "--host", name, str(profile), "--yes", "--timeout", "90"])
            assert code == 0, capsys.readouterr()
        for name, router in (("sim-a", a), ("sim-b", a + 1)):
            ports = asyncio.run(_ports(config, name))
            assert ports == {"router": router, "prefill-0": router + PREFILL, "decode-0": router + DECODE}, name
            assert not _bindable(router + BOOT), f"{name}'s bootstrap port {router + BOOT} is not listening"
            assert _answers(router) == 200, name
    finally:
        for state in states:
            asyncio.run(stop_everything(state))
