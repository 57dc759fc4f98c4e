"""SSH errors from ``status``, ``swap``, ``stop``: one clear message, no traceback, exit code 2 (issue 13).

The commands run as real processes against the in-process SSH server: once
with a known_hosts that trusts another key for it (a CHANGED key, whose message
names each fingerprint once), once against a port where nothing listens.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import asyncssh
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(120)


async def _kimitui(*args: str, config: Path, home: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
           "XDG_DATA_HOME": str(home / "data"), "COLUMNS": "200"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kimitui", "--config", str(config), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env)
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode or 0, out.decode()


def _config(tmp_path: Path, port: int, user: str, key: Path, known_hosts: Path) -> Path:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[hosts.gpu]\naddress = "127.0.0.1"\nport = {port}\nuser = "{user}"\nkey = "{key}"\n'
                   f'agent = false\nknown_hosts = "{known_hosts}"\n')
    return cfg


COMMANDS = [("status",), ("stop", "--yes"), ("swap", "ep8-tuned", "--yes")]


async def test_a_changed_host_key_is_one_message_naming_each_fingerprint_once(ssh_server, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {other.export_public_key().decode().strip()}\n")
    cfg = _config(tmp_path, ssh_server.port, ssh_server.user, ssh_server.client_key_path, known)
    offered = ssh_server.known_hosts_line().split()[-2:]
    new_fp = asyncssh.import_public_key(" ".join(offered)).get_fingerprint()
    old_fp = other.get_fingerprint()
    for args in COMMANDS:
        code, out = await _kimitui(*args, config=cfg, home=tmp_path / "home")
        assert code == 2, (args, code, out)
        assert "Traceback" not in out and "File \"" not in out, (args, out)
        assert "CHANGED" in out, (args, out)
        assert out.count(new_fp) == 1 and out.count(old_fp) == 1, (args, out)
        assert len([line for line in out.splitlines() if "CHANGED" in line]) == 1, (args, out)


async def test_an_unreachable_host_is_one_message_and_exit_2(ssh_server, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    known = tmp_path / "known_hosts"
    known.write_text(ssh_server.known_hosts_line())
    cfg = _config(tmp_path, port, ssh_server.user, ssh_server.client_key_path, known)
    for args in COMMANDS:
        code, out = await _kimitui(*args, config=cfg, home=tmp_path / "home")
        assert code == 2, (args, code, out)
        assert "Traceback" not in out, (args, out)
        assert "cannot reach" in out and "error" in out, (args, out)


def _sim_over_ssh_config(home: Path, server) -> Path:
    cfg = home / "config.toml"
    cfg.write_text(f'[hosts.gpu]\naddress = "127.0.0.1"\nport = {server.port}\nuser = "{server.user}"\n'
                   f'key = "{server.client_key_path}"\nknown_hosts = "{server.known_hosts_path}"\n'
                   f'agent = false\nkeepalive_s = 2\nconnect_timeout_s = 5\nsim = true\npython = "{sys.executable}"\n')
    return cfg


@pytest.mark.timeout(240)
async def test_status_over_ssh_through_the_forward_prints_its_lines_and_nothing_else(sim_home: Path, ssh_server) -> None:
    """Issue 30: every `status` ended with a CancelledError traceback from the forward, and every SSH
    command began with six CryptographyDeprecationWarning lines from asyncssh's import."""
    cfg = _sim_over_ssh_config(sim_home, ssh_server)
    home = sim_home / "home"
    code, out = await _kimitui("swap", "ep8-tuned", "--host", "gpu", "--yes", config=cfg, home=home)
    try:
        assert code == 0, out
        assert "Warning" not in out and "Traceback" not in out, out
        for _ in range(2):
            code, out = await _kimitui("status", "--host", "gpu", config=cfg, home=home)
            assert code == 0, out
            assert "gpu: ep8-tuned via process" in out and "healthy" in out, out
            assert "http://127.0.0.1:" in out, out  # reached through the SSH forward
            for noise in ("Traceback", "CancelledError", "Exception in callback", "Warning", "DSA"):
                assert noise not in out, (noise, out)
    finally:
        code, out = await _kimitui("stop", "--host", "gpu", "--yes", config=cfg, home=home)
        assert code == 0, out


@pytest.mark.parametrize("address", ["bad..host", "a" * 64 + ".example", ".leading-dot"])
async def test_an_address_that_is_no_host_name_is_one_line_and_exit_2(tmp_path: Path, address: str) -> None:
    """Issue 30: an empty or over-long DNS label crashed `status` and `swap` with the idna codec's UnicodeError."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[hosts.gpu]\naddress = "{address}"\nagent = false\nconnect_timeout_s = 3\n')
    for args in COMMANDS:
        code, out = await _kimitui(*args, config=cfg, home=tmp_path / "home")
        assert code == 2, (args, code, out)
        assert "Traceback" not in out and "UnicodeError" not in out, (args, out)
        said = " ".join(out.split())  # the console wraps a long message: still one message
        assert said.startswith("error: gpu: cannot reach") and said.count("error") == 1, (args, out)
        assert "not a valid host name" in said and said.endswith("check `address` in the kimitui config or ~/.ssh/config"), (args, out)
