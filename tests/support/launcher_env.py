"""Fixtures for the launcher/swap tests: sim profiles on a free port, hosts, fake systemd.

Every test gets its own state dir, sim GPU state file and port, and everything a
test started is stopped afterwards (through the launcher, so only what it started).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kimitui.host.base import Host
from kimitui.host.local import LocalHost
from kimitui.launcher.process import ProcessLauncher
from kimitui.session import Session
from tests.support.net import free_port

FAKE_SYSTEMD_DIR = Path(__file__).resolve().parent / "fake_systemd"
TIME_SCALE = 100.0
"""Sim clock speed for tests: a start-up takes ~1 s of wall time (mostly Python imports)."""


def write_profile(directory: Path, name: str, extends: str, *, port: int, body: str = "", **sim: Any) -> Path:
    """A profile file ``NAME.toml`` extending a shipped one, on ``port``, with a ``[sim]`` table."""
    sim = {"time_scale": TIME_SCALE, **sim}
    sim_lines = "\n".join(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in sim.items())
    path = directory / f"{name}.toml"
    path.write_text(f'name = "{name}"\nextends = "{extends}"\nport = {port}\n{body}\n[sim]\n{sim_lines}\n')
    return path


@dataclass
class SimEnv:
    """Where a test's profiles and state live, and what it publishes."""

    profiles: Path
    state: Path
    port: int
    session: Session
    events: list

    def profile(self, name: str, extends: str = "ep8-tuned", body: str = "", **sim: Any) -> Path:
        return write_profile(self.profiles, name, extends, port=self.port, body=body, **sim)

    def launcher(self, host: Host) -> ProcessLauncher:
        return ProcessLauncher(host, simulated=True, state_dir=str(self.state))

    def kinds(self, kind: str) -> list:
        return [e for e in self.events if e.kind == kind]


def make_env(root: Path) -> SimEnv:
    """A fresh SimEnv under ``root`` (its own profiles dir, state dir and port)."""
    (root / "profiles").mkdir(parents=True)
    session = Session(host="sim")
    events: list = []
    session.add_sink(events.append)
    return SimEnv(root / "profiles", root / "state", free_port(), session, events)


@pytest.fixture
async def sim_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SimEnv]:
    monkeypatch.setenv("KIMITUI_SIM_STATE", str(tmp_path / "gpus.json"))
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "kimitui-state"))
    env = make_env(tmp_path / "main")
    try:
        yield env
    finally:
        await stop_everything(env.state)


@pytest.fixture
async def both_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[tuple[Host, SimEnv]]]:
    """The simulated host reached directly (LocalHost) and through the in-process SSH server,
    each with its own SimEnv, so a test can run the same story on both at once."""
    from tests.support.sshd import SSHTestServer

    monkeypatch.setenv("KIMITUI_SIM_STATE", str(tmp_path / "gpus.json"))
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "kimitui-state"))
    local_env, ssh_env = make_env(tmp_path / "local"), make_env(tmp_path / "ssh")
    server = SSHTestServer(tmp_path / "sshd")
    await server.start()
    try:
        async with LocalHost("sim") as local, server.make_host("sim-ssh") as remote:
            yield [(local, local_env), (remote, ssh_env)]
    finally:
        await stop_everything(local_env.state)
        await stop_everything(ssh_env.state)
        await server.stop()


async def stop_everything(state: Path) -> None:
    """Stop every server a test started (via the launcher's own records)."""
    host = LocalHost("cleanup")
    launcher = ProcessLauncher(host, simulated=True, state_dir=str(state))
    if state.exists():
        for rec in await launcher.records():
            if await launcher.alive(rec):
                await launcher.stop(rec, grace_s=2.0)


@pytest.fixture(params=["local", "ssh"])
async def sim_host(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Host]:
    """The simulated host, reached directly (LocalHost) or through the in-process SSH server."""
    if request.param == "local":
        async with LocalHost("sim") as host:
            yield host
        return
    from tests.support.sshd import SSHTestServer

    server = SSHTestServer(tmp_path / "sshd")
    await server.start()
    try:
        async with server.make_host("sim") as host:
            yield host
    finally:
        await server.stop()


@pytest.fixture
def fake_systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The systemctl/journalctl stand-ins first on PATH; yields their state root (units in root/units)."""
    root = tmp_path / "fake-systemd"
    (root / "units").mkdir(parents=True)
    monkeypatch.setenv("FAKE_SYSTEMD_ROOT", str(root))
    monkeypatch.setenv("PATH", f"{FAKE_SYSTEMD_DIR}:{os.environ['PATH']}")
    try:
        yield root
    finally:
        for state in (root / "run").glob("*.json"):
            subprocess.run([str(FAKE_SYSTEMD_DIR / "systemctl"), "stop", state.name[: -len(".json")]],
                           check=False, timeout=60)
