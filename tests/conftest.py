"""Shared fixtures.

``ssh_server``: a real in-process SSH server on 127.0.0.1.
``sim_home``: every kimitui directory inside the test's tmp_path, the simulated
profiles the cockpit tests run refined to a free port and a fast clock.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `from tests.support...` works under plain `pytest` too
    sys.path.insert(0, str(ROOT))

from tests.support.net import free_port  # noqa: E402
from tests.support.sshd import SSHTestServer  # noqa: E402


@pytest.fixture
async def ssh_server(tmp_path: Path) -> AsyncIterator[SSHTestServer]:
    """A started SSHTestServer (see tests/support/sshd.py); stopped afterwards."""
    server = SSHTestServer(tmp_path / "sshd")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


SIM_HOME_PROFILES = ("ep8-tuned", "ep8-v2", "ep8-eplb", "ep8-dflash")
"""The shipped profiles ``sim_home`` refines locally (same name, so they win)."""


@pytest.fixture
def sim_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every kimitui directory (tmp, state, data, config, cwd) inside tmp_path, so a
    LiveController on the embedded simulated host touches nothing outside the test.

    ./profiles holds a local refinement of each of SIM_HOME_PROFILES: one free port for
    all (a swap replaces the server in place), a 40x clock.  Returns tmp_path."""
    for var, sub in [("TMPDIR", "tmp"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CONFIG_HOME", "config")]:
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    for var in ("KIMITUI_SIM_STATE", "KIMITUI_CONFIG", "KIMITUI_PROFILES"):
        monkeypatch.delenv(var, raising=False)
    cwd = tmp_path / "cwd"
    (cwd / "profiles").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    port = free_port()
    for name in SIM_HOME_PROFILES:
        # a key is not inherited: the refinement keeps the shipped one (a new shipped profile moves no key)
        key = tomllib.loads((ROOT / "profiles" / f"{name}.toml").read_text()).get("key")
        declared = f'key = "{key}"\n' if key else ""
        (cwd / "profiles" / f"{name}.toml").write_text(
            f'extends = "{name}"\nport = {port}\n{declared}[sim]\ntime_scale = 40.0\n')
    return tmp_path
