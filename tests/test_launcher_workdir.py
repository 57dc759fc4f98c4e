"""``launcher.workdir`` is where the process launcher runs the server, as the rendered
``cd DIR && ...`` line says: the real simulated server, started locally and over the
in-process SSH server, is read back from ``/proc/PID/cwd``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kimitui.host.base import Host
from kimitui.launcher.base import LaunchError
from kimitui.launcher.profiles import load
from kimitui.profiles import render_command
from tests.support.launcher_env import SimEnv, write_profile

pytest_plugins = ["tests.support.launcher_env"]

pytestmark = pytest.mark.timeout(120)


def _cwd(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/cwd")


async def test_the_server_runs_in_the_profiles_workdir(both_hosts: list[tuple[Host, SimEnv]], tmp_path: Path) -> None:
    for host, env in both_hosts:
        workdir = tmp_path / f"it's {host.name} dir"  # a space and a quote: an argument, never code
        workdir.mkdir()
        path = write_profile(env.profiles, "here", "ep8-tuned", port=env.port,
                             body=f'[launcher]\nkind = "process"\nworkdir = "{workdir}"\n')
        profile = load(str(path))
        assert render_command(profile).startswith("cd ")  # what the profile says it does
        launcher = env.launcher(host)
        record = await launcher.start(profile)
        assert record.pid is not None and _cwd(record.pid) == str(workdir), host.name
        await launcher.stop(record, grace_s=2.0)
        again = await launcher.relaunch(record)  # a rollback reruns it in the same folder
        assert again.pid is not None and _cwd(again.pid) == str(workdir), host.name
        await launcher.stop(again, grace_s=2.0)


async def test_a_missing_workdir_is_named_and_nothing_starts(both_hosts: list[tuple[Host, SimEnv]],
                                                             tmp_path: Path) -> None:
    for host, env in both_hosts:
        gone = tmp_path / "no-such-dir"
        path = write_profile(env.profiles, "nowhere", "ep8-tuned", port=env.port,
                             body=f'[launcher]\nkind = "process"\nworkdir = "{gone}"\n')
        launcher = env.launcher(host)
        with pytest.raises(LaunchError, match=rf"launcher.workdir {gone}: no such folder"):
            await launcher.start(load(str(path)))
        assert await launcher.current() is None
