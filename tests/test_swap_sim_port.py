"""`kimitui swap --host H` starts a simulated host's server where the cockpit would: on the
host's ``[hosts.H] sim_port``.  Two simulated hosts on one machine, real servers, real ports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kimitui.config import load_config
from kimitui.hosts_from_config import make_host
from kimitui.launcher.process import ProcessLauncher
from kimitui.live import LiveController
from tests.support.launcher_env import stop_everything, write_profile
from tests.support.net import free_port

pytestmark = pytest.mark.timeout(180)


async def _running_port(config: Path, host_name: str) -> int | None:
    async with make_host(load_config(config), host_name) as host:
        record = await ProcessLauncher(host, simulated=True).current()
    return record.port if record is not None else None


def test_cli_swap_serves_on_the_hosts_sim_port_as_the_cockpit_does(sim_home: Path, capsys) -> None:
    from kimitui.cli import main

    shared, port_a, port_b = free_port(), free_port(), free_port()
    good = write_profile(sim_home / "cwd" / "profiles", "good", "ep8-tuned", port=shared)
    config = sim_home / "config.toml"
    config.write_text(f"[hosts.sim-a]\nsim = true\nsim_port = {port_a}\n\n"
                      f"[hosts.sim-b]\nsim = true\nsim_port = {port_b}\n")
    # the cockpit's port for each host, from the same rule
    for name, port in (("sim-a", port_a), ("sim-b", port_b)):
        assert LiveController(config_path=str(config), host=name, record=False).sim_port == port
    states = [sim_home / "state" / "kimitui" / "sim" / "hosts" / n for n in ("sim-a", "sim-b")]
    try:
        for name in ("sim-a", "sim-b"):
            code = main(["--config", str(config), "swap", "--host", name, str(good), "--yes", "--timeout", "60"])
            assert code == 0, capsys.readouterr()
        # both serve at once, each on its own port: no collision on the profile's port
        assert asyncio.run(_running_port(config, "sim-a")) == port_a
        assert asyncio.run(_running_port(config, "sim-b")) == port_b
        # --sim-port still wins over the host's setting
        flag = free_port()
        code = main(["--config", str(config), "--sim-port", str(flag), "swap", "--host", "sim-a", str(good),
                     "--yes", "--timeout", "60"])
        assert code == 0, capsys.readouterr()
        assert asyncio.run(_running_port(config, "sim-a")) == flag
    finally:
        for state in states:
            asyncio.run(stop_everything(state))
