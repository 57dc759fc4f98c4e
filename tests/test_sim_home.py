"""The simulated host has a home of its own: its state lives under the user's state dir,
and a port held by a process kimitui did not start is named (pid, command line, user) with
the ways on (another port, or watching that server).  Real processes throughout: the sim
server, the launcher's shell scripts, sockets held by this test."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
from pathlib import Path

import pytest

from kimitui.live import LiveController
from kimitui.control import NotAvailable
from kimitui.host.local import LocalHost
from kimitui.launcher import ports
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.select import find_running
from kimitui.launcher.swap import SwapOptions, swap
from kimitui.sim import gpustate
from tests.support.launcher_env import stop_everything, write_profile
from tests.support.net import free_port
from tests.support.simserver import start_sim
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test override of the sim's places: only XDG_STATE_HOME decides (as for a user)."""
    for var in ("KIMITUI_SIM_STATE", "KIMITUI_STATE_DIR", "KIMITUI_CONFIG", "KIMITUI_PROFILES"):
        monkeypatch.delenv(var, raising=False)
    for var, sub in [("TMPDIR", "tmp"), ("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config")]:
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "profiles").mkdir()
    return tmp_path


async def _serving(path: Path, timeout: float = 20.0) -> gpustate.SimGpuState:
    await wait_for(lambda: gpustate.read_state(path).phase == "serving", timeout, f"{path} to say serving",
                   interval=0.1, detail=lambda: gpustate.read_state(path).phase)
    return gpustate.read_state(path)


async def test_two_state_dirs_on_one_account_never_see_each_others_simulated_server(
    homes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = homes / "alice-state", homes / "bob-state"
    port = free_port()
    good = write_profile(homes / "profiles", "good", "ep8-tuned", port=port)
    monkeypatch.setenv("XDG_STATE_HOME", str(alice))
    try:
        async with LocalHost("sim", simulated=True) as host:
            launcher = ProcessLauncher(host, simulated=True)
            assert await launcher.state_dir() == str(alice / "kimitui" / "sim")
            assert gpustate.state_path() == alice / "kimitui" / "sim" / "gpus.json"
            out = await swap(host, str(good), SwapOptions(timeout=60))
            assert out.ok, out.reason
            theirs = await launcher.current()
            assert theirs is not None and theirs.record_path.startswith(str(alice / "kimitui" / "sim"))
            assert (await _serving(alice / "kimitui" / "sim" / "gpus.json")).phase == "serving"

        monkeypatch.setenv("XDG_STATE_HOME", str(bob))
        async with LocalHost("sim", simulated=True) as host:
            assert await find_running(host) is None  # not "found running": alice's server is not bob's
            assert gpustate.read_state().phase == "idle"  # nor are her GPUs
            # bob's swap to the same port is refused by that port, naming alice's server; it lives on
            refused = await swap(host, str(good), SwapOptions(timeout=30, port_wait_s=0.3))
            assert refused.outcome == "failed", refused
            assert f"pid {theirs.pid}" in refused.reason and "kimitui sim serve" in refused.reason, refused.reason
            assert await ProcessLauncher(LocalHost("alice"), simulated=True,
                                         state_dir=str(alice / "kimitui" / "sim")).alive(theirs)
            # and his swap elsewhere starts his own server, again without stopping hers
            mine = await swap(host, str(write_profile(homes / "profiles", "mine", "ep8-tuned", port=free_port())), SwapOptions(timeout=60))
            assert mine.ok and mine.previous is None, mine
            assert await ProcessLauncher(LocalHost("alice"), simulated=True,
                                         state_dir=str(alice / "kimitui" / "sim")).alive(theirs)
            assert (await _serving(bob / "kimitui" / "sim" / "gpus.json")).profile == "mine"
    finally:
        await stop_everything(alice / "kimitui" / "sim")
        await stop_everything(bob / "kimitui" / "sim")


async def test_a_held_port_names_the_process_its_command_line_and_user() -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        held = await ports.holder(LocalHost("sim"), port)
        assert held is not None
        assert (held.pid, held.uid, held.user) == (os.getpid(), os.getuid(), pwd.getpwuid(os.getuid()).pw_name)
        assert held.command == Path("/proc/self/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode()
        text = await ports.listening(LocalHost("sim"), port)
        assert text.startswith(f"pid {os.getpid()}, user {held.user} (uid {os.getuid()}): ")
    assert await ports.holder(LocalHost("sim"), port) is None


class _AsUser(LocalHost):
    """This machine, every command run as another (unprivileged) user: what a colleague's kimitui sees."""

    def __init__(self, user: str) -> None:
        super().__init__("sim")
        self.ids = pwd.getpwnam(user)

    async def run(self, argv, **kwargs):  # type: ignore[override]
        return await super().run(["setpriv", f"--reuid={self.ids.pw_uid}", f"--regid={self.ids.pw_gid}",
                                  "--clear-groups", *argv], **kwargs)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to be another user")
async def test_another_users_process_is_said_to_be_unseen_with_its_user() -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        held = await ports.holder(_AsUser("nobody"), port)
        assert held is not None and held.pid is None and held.user == pwd.getpwuid(os.getuid()).pw_name
        text = held.describe()
        assert "cannot see" in text and f"user {held.user}" in text and f"sport = :{port}" in text


@pytest.fixture
def cockpit_home(homes: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(homes / "state"))
    cwd = homes / "cwd"
    (cwd / "profiles").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return cwd


def _default_profile_on(cwd: Path, port: int) -> None:
    (cwd / "profiles" / "ep8-tuned.toml").write_text(
        f'extends = "ep8-tuned"\nport = {port}\n[sim]\ntime_scale = 60.0\n')


async def _until(sub, pred, timeout: float, seen: list) -> list:
    """Keep every event in ``seen`` until one satisfies ``pred``."""
    def found() -> bool:
        seen.extend(sub.drain())
        return any(pred(e) for e in seen)

    def story() -> str:
        errors = [e.message for e in seen if e.kind == "error"]
        states = [(e.state, e.profile, e.detail) for e in seen if e.kind == "profile_state"]
        return f"errors: {errors}; states: {states}"

    await wait_for(found, timeout, "the event", interval=0.05, detail=story)
    return seen


async def test_the_cockpit_names_a_foreign_server_on_its_port_and_can_watch_it(cockpit_home: Path) -> None:
    with start_sim("ep8-tuned", time_scale=60) as foreign:
        _default_profile_on(cockpit_home, foreign.port)
        c = LiveController(record=False)
        sub = c.session.subscribe("all", maxsize=100_000)
        seen: list = []
        await c.start()
        try:
            await _until(sub, lambda e: e.kind == "error" and e.severity == "info" and "/v1/models" in e.message,
                         30, seen)
            (held,) = [e for e in seen if e.kind == "error" and e.source == "launcher"]
            assert f"port {foreign.port}" in held.message and f"pid {foreign.proc.pid}" in held.message
            assert "kimitui sim serve" in held.message and "user " in held.message
            assert "--sim-port N" in held.message and f"kimitui run --url http://127.0.0.1:{foreign.port}" in held.message
            assert c.watch_offer == f"http://127.0.0.1:{foreign.port}"
            assert not any(e.kind in ("profile_switch", "swap_progress") for e in seen)  # nothing started or stopped
            await c.watch()
            await _until(sub, lambda e: e.kind == "server_stats" and e.source == "metrics", 30, seen)
            with pytest.raises(NotAvailable, match="kimitui did not start"):
                await c.swap("ep8-v2")
            assert c.default_sweep_spec().url == foreign.url
        finally:
            await c.shutdown()
        assert foreign.health() == 200  # quitting left the foreign server alone


async def test_the_sim_port_setting_starts_the_simulated_host_elsewhere(cockpit_home: Path) -> None:
    with socket.socket() as stranger:  # not a server: nothing to watch, so nothing is offered
        stranger.bind(("127.0.0.1", free_port()))
        stranger.listen()
        held = stranger.getsockname()[1]
        _default_profile_on(cockpit_home, held)
        c = LiveController(record=False)
        sub, seen = c.session.subscribe("all", maxsize=100_000), []
        await c.start()
        try:
            await _until(sub, lambda e: e.kind == "error" and e.source == "launcher", 30, seen)
            assert f"pid {os.getpid()}" in next(e.message for e in seen if e.kind == "error")
            assert c.watch_offer is None
            with pytest.raises(NotAvailable, match="no server to watch"):
                await c.watch()
        finally:
            await c.shutdown()

        other = free_port()
        config = cockpit_home / "config.toml"
        config.write_text(f"[sim]\nport = {other}\n")
        for controller in (LiveController(config_path=str(config), record=False),
                           LiveController(record=False, sim_port=other)):
            c = controller
            sub, seen = c.session.subscribe("all", maxsize=100_000), []
            await c.start()
            try:
                await _until(sub, lambda e: e.kind == "profile_switch", 90, seen)
                switch = next(e for e in seen if e.kind == "profile_switch")
                assert switch.outcome == "ok", switch.reason
                assert not any(e.kind == "error" and e.source == "launcher" for e in seen)
                found = await find_running(c._host)  # noqa: SLF001
                assert found is not None and found[1].port == other
                assert found[1].record_path.startswith(str(cockpit_home.parent / "state" / "kimitui" / "sim"))
                assert c.default_sweep_spec().url == f"http://127.0.0.1:{other}"
            finally:
                await c.shutdown()
                await stop_everything(cockpit_home.parent / "state" / "kimitui" / "sim")


def test_headless_swap_on_the_simulated_host_serves_on_the_sim_port(cockpit_home: Path, capsys) -> None:
    """`kimitui --sim-port N swap` (and `[sim] port`) put the profile where the cockpit would."""
    from kimitui.cli import main

    held, other = free_port(), free_port()
    good = write_profile(cockpit_home / "profiles", "good", "ep8-tuned", port=held)
    state = cockpit_home.parent / "state" / "kimitui" / "sim"
    try:
        assert main(["--sim-port", str(other), "swap", str(good), "--yes", "--timeout", "60"]) == 0, capsys.readouterr()
        record = asyncio.run(ProcessLauncher(LocalHost("sim"), simulated=True).current())
        assert record is not None and record.port == other and record.record_path.startswith(str(state))
        config = cockpit_home / "config.toml"
        third = free_port()
        config.write_text(f"[sim]\nport = {third}\n")
        assert main(["--config", str(config), "swap", str(good), "--yes", "--timeout", "60"]) == 0, capsys.readouterr()
        record = asyncio.run(ProcessLauncher(LocalHost("sim"), simulated=True).current())
        assert record is not None and record.port == third
    finally:
        asyncio.run(stop_everything(state))


async def test_a_cockpit_swap_onto_a_held_port_says_the_ways_on(cockpit_home: Path) -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", free_port()))
        stranger.listen()
        _default_profile_on(cockpit_home, stranger.getsockname()[1])
        c = LiveController(record=False, autostart=False)
        sub, seen = c.session.subscribe("all", maxsize=100_000), []
        await c.start()
        try:
            await _until(sub, lambda e: e.kind == "gpu_sample", 30, seen)
            await c.swap("ep8-tuned")
            await _until(sub, lambda e: e.kind == "error" and e.source == "swap", 60, seen)
            error = next(e for e in seen if e.kind == "error" and e.source == "swap")
            assert f"pid {os.getpid()}" in error.message and "--sim-port N" in error.message, error.message
        finally:
            await c.shutdown()
