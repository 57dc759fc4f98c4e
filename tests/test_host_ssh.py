"""SSHHost against a real in-process asyncssh server whose sessions run real bash."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import pytest

from kimitui.events import ConnectionState
from kimitui.host.base import CommandTimeout, HostError, HostKeyError, HostUnavailable
from kimitui.host.ssh import SSHHost
from tests.support import waiting
from tests.support.sshd import SSHTestServer
from tests.test_host_local import alive, wait_gone


class Events(list):
    """Collects ConnectionState events; waits for a given state."""

    def __call__(self, event: ConnectionState) -> None:
        self.append(event)

    @property
    def states(self) -> list[str]:
        return [e.state for e in self]

    async def wait_for(self, state: str, after: int = 0, within: float = 5.0) -> ConnectionState:
        await waiting.wait_for(lambda: state in self.states[after:], within, f"a {state!r} event",
                               detail=lambda: self.states)
        return next(e for e in self[after:] if e.state == state)


@pytest.fixture
async def host(ssh_server: SSHTestServer):
    # The in-process server shares the test's loop: with both cores busy a 4 s stall (the default keepalive's
    # 1 s x 4) read as a lost link mid-write.  These tests are not about link loss (those make their own host).
    h = ssh_server.make_host("gpu", keepalive_s=10)
    yield h
    await h.close()


async def test_run_exit_code_stdout_stderr_env_stdin(host: SSHHost) -> None:
    r = await host.run(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    r = await host.run(["bash", "-c", 'cat; echo "$KIMI_X"'], input="in put\n", env={"KIMI_X": "a b'c"})
    assert r.stdout == "in put\na b'c\n" and r.ok
    assert (await host.run(["kimitui-no-such-program"])).exit_code == 127
    with pytest.raises(HostError, match="exit 1"):
        await host.run(["false"], check=True)


async def test_arguments_stay_inert_in_the_remote_shell(host: SSHHost, ssh_server: SSHTestServer, tmp_path) -> None:
    target = tmp_path / "x"
    evil = [f"; touch {target}", f"$(touch {target})", f"`touch {target}`", "'\"", "*", "a\nb"]
    r = await host.run(["printf", "%s|", *evil])
    assert r.stdout == "|".join(evil) + "|"
    assert not target.exists()
    assert f"; touch {target}" not in ssh_server.commands[-1].replace(f"'; touch {target}'", "")


async def test_run_timeout_kills_the_remote_command(host: SSHHost, tmp_path) -> None:
    pidfile = tmp_path / "pid"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout, match="gpu: 'bash' ran past its 0.3 s timeout"):
        await host.run(["bash", "-c", f"echo $$ > {pidfile}; exec sleep 30"], timeout=0.3)
    assert time.monotonic() - t0 < 3
    assert await wait_gone(int(pidfile.read_text()))


async def test_stream_lines_stdin_and_merged_stderr(host: SSHHost) -> None:
    s = await host.stream(["bash", "-c", "for i in 1 2 3; do echo l$i; sleep 0.05; done; echo e >&2; exit 2"])
    assert [line async for line in s] == ["l1", "l2", "l3"]
    assert s.exit_code == 2 and not s.lost and s.stderr_tail.text() == "e"
    s = await host.stream(["bash", "-c", "echo a; echo b >&2"], merge_stderr=True)
    assert sorted([line async for line in s]) == ["a", "b"]
    s = await host.stream(["bash", "-c", "while read -r l; do echo got:$l; done"])
    lines = aiter(s)
    await s.write("one\n")
    assert await anext(lines) == "got:one"
    await s.write(b"two\n")
    assert await anext(lines) == "got:two"
    await s.close_stdin()
    assert [line async for line in lines] == []
    assert s.exit_code == 0


async def test_stopping_a_stream_ends_the_remote_process(host: SSHHost, tmp_path) -> None:
    marker = tmp_path / "term"
    s = await host.stream(["bash", "-c", f"trap 'echo term > {marker}; exit 0' TERM; echo up; while :; do sleep 0.05; done"])
    assert await anext(aiter(s)) == "up"
    assert s.pid is not None and alive(s.pid)
    await asyncio.gather(s.stop(grace_s=2), s.stop(grace_s=2))
    assert marker.read_text() == "term\n"  # it got TERM from us, not a KILL from the channel closing
    assert await wait_gone(s.pid)
    await s.stop()  # idempotent


async def test_stop_escalates_to_kill_when_term_is_ignored(host: SSHHost) -> None:
    s = await host.stream(["bash", "-c", "trap '' TERM; echo up; while :; do sleep 0.05; done"])
    assert await anext(aiter(s)) == "up"
    t0 = time.monotonic()
    await s.stop(grace_s=0.3)
    assert time.monotonic() - t0 < 2
    assert s.pid is not None and await wait_gone(s.pid)
    assert s.exit_code is None


async def test_atomic_write_and_read(host: SSHHost, tmp_path) -> None:
    tmp_path = tmp_path / "files"
    tmp_path.mkdir()
    path = tmp_path / "launch.sh"
    path.write_text("old")
    await host.write_file(str(path), "#!/bin/sh\necho new\n", mode=0o750)
    assert path.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert os.listdir(tmp_path) == ["launch.sh"]  # temp file renamed away
    blob = bytes(range(256)) * 100
    await host.write_file(str(path), blob)
    assert await host.read_file(str(path)) == blob
    with pytest.raises(HostError, match=r"gpu: cannot read .*missing.*No such file"):
        await host.read_file(str(tmp_path / "missing"))
    with pytest.raises(HostError, match="gpu: cannot write"):
        await host.write_file(str(tmp_path / "no-dir" / "f"), "x")
    assert path.read_bytes() == blob


async def test_unknown_host_key_is_refused_with_how_to_trust(ssh_server: SSHTestServer, tmp_path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    events = Events()
    h = ssh_server.make_host("gpu", known_hosts=[str(empty)], on_event=events)
    with pytest.raises(HostKeyError) as err:
        await h.run(["true"])
    msg = str(err.value)
    assert "gpu" in msg and f"[127.0.0.1]:{ssh_server.port}" in msg
    assert f"ssh-keyscan -p {ssh_server.port} 127.0.0.1 >> {empty}" in msg
    assert "trust_on_first_use = true" in msg and ssh_server.host_key.get_fingerprint() in msg
    assert events.states == ["connecting", "failed"]
    assert ssh_server.commands == []  # nothing ran on an untrusted host
    await h.close()


async def test_changed_host_key_is_refused(ssh_server: SSHTestServer, tmp_path) -> None:
    import asyncssh

    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    stale = tmp_path / "stale_known_hosts"
    stale.write_text(f"[127.0.0.1]:{ssh_server.port} {other}")
    # even with TOFU on: a changed key is never silently accepted
    h = ssh_server.make_host("gpu", known_hosts=[str(stale)], trust_on_first_use=True)
    with pytest.raises(HostKeyError, match=r"CHANGED.*ssh-keygen -R '\[127.0.0.1\]:\d+'"):
        await h.connect()
    assert not ssh_server.tofu_known_hosts_path.exists()
    await h.close()


async def test_trust_on_first_use_records_then_verifies(ssh_server: SSHTestServer, tmp_path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    h = ssh_server.make_host("gpu", known_hosts=[str(empty)], trust_on_first_use=True)
    assert (await h.run(["echo", "ok"])).stdout == "ok\n"
    await h.close()
    recorded = ssh_server.tofu_known_hosts_path.read_text()
    assert recorded.startswith(f"[127.0.0.1]:{ssh_server.port} ssh-ed25519 ")
    # next time, without TOFU, the recorded key is what makes it trusted
    h = ssh_server.make_host("gpu", known_hosts=[str(empty)])
    assert (await h.run(["echo", "again"])).stdout == "again\n"
    await h.close()


async def test_server_killed_mid_stream_then_back(ssh_server: SSHTestServer) -> None:
    events = Events()
    h = ssh_server.make_host("gpu", on_event=events)
    s = await h.stream(["bash", "-c", "while :; do echo tick; sleep 0.05; done"])
    lines = aiter(s)
    assert await anext(lines) == "tick"
    await ssh_server.stop()
    rest = [line async for line in lines]  # the stream ends instead of hanging
    assert set(rest) <= {"tick"}
    assert s.exit_code is None and s.lost
    await events.wait_for("lost")
    with pytest.raises(HostUnavailable, match="reconnecting"):
        await h.run(["true"])
    lost_at = events.states.index("lost")  # a few failed attempts while the server is down:
    await waiting.wait_for(lambda: events.states[lost_at:].count("reconnecting") >= 3, 5,
                           "three reconnect attempts", detail=lambda: events.states)
    await ssh_server.start(ssh_server.port)
    await h.wait_connected(timeout=5)
    back = await events.wait_for("connected", after=events.states.index("lost"))
    assert back.attempt >= 1 and back.host == "gpu"
    assert events.states[:2] == ["connecting", "connected"]
    between = events.states[events.states.index("lost") + 1 : -1]
    assert between and set(between) == {"reconnecting"}
    assert (await h.run(["echo", "back"])).stdout == "back\n"
    await h.close()
    assert events.states[-1] == "closed"


async def test_hung_server_is_noticed_by_keepalive(ssh_server: SSHTestServer) -> None:
    events = Events()
    h = ssh_server.make_host("gpu", keepalive_s=0.2, on_event=events)
    s = await h.stream(["bash", "-c", "echo up; exec sleep 30"])
    assert await anext(aiter(s)) == "up"
    t0 = time.monotonic()
    ssh_server.freeze()
    lost = await events.wait_for("lost", within=5)
    assert time.monotonic() - t0 < 2.5  # 3 missed keepalives at 0.2 s, not a TCP timeout
    assert "keepalive" in lost.detail
    assert [line async for line in s] == [] and s.lost
    await h.close()


async def test_stop_on_a_hung_link_gives_up_in_bounded_time(ssh_server: SSHTestServer) -> None:
    h = ssh_server.make_host("gpu", keepalive_s=30)  # keepalive will not save us here
    s = await h.stream(["bash", "-c", "echo up; exec sleep 30"])
    assert await anext(aiter(s)) == "up"
    ssh_server.freeze()
    t0 = time.monotonic()
    await s.stop(grace_s=0.2)
    assert time.monotonic() - t0 < 5
    assert s.exit_code is None and s.stopped and not s.lost
    await asyncio.wait_for(h.close(), 5)


async def test_login_shell_noise_does_not_reach_the_output(ssh_server: SSHTestServer, host: SSHHost) -> None:
    ssh_server.login_noise = "echo 'Welcome to gpu-host!'; echo 'motd' >&2"
    assert (await host.run(["echo", "clean"])).stdout == "clean\n"
    s = await host.stream(["bash", "-c", "echo $$; exec sleep 30"])
    first = await anext(aiter(s))
    assert s.pid == int(first)  # the wrapper's pid is the command's pid (exec)
    await s.stop()


async def test_more_commands_than_sshd_max_sessions_wait_their_turn(ssh_server: SSHTestServer, host: SSHHost) -> None:
    ssh_server.max_sessions = 3
    s = await host.stream(["sleep", "30"])  # holds one of the three
    results = await asyncio.gather(*(host.run(["bash", "-c", f"sleep 0.05; echo {i}"]) for i in range(8)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    await s.stop()


async def test_wait_connected_times_out_while_server_down(ssh_server: SSHTestServer) -> None:
    h = ssh_server.make_host("gpu")
    await ssh_server.stop()
    with pytest.raises(HostUnavailable, match="not connected"):
        await h.wait_connected(timeout=0.3)
    await h.close()


async def test_ssh_config_alias_and_jump_host(ssh_server: SSHTestServer) -> None:
    # The server's ssh_config maps `gpu-alias` to its address, port, user and key.
    h = SSHHost(
        "gpu",
        "gpu-alias",
        ssh_config=[str(ssh_server.ssh_config_path)],
        known_hosts=[str(ssh_server.known_hosts_path)],
        tofu_known_hosts=str(ssh_server.tofu_known_hosts_path),
        agent=False,
    )
    assert (await h.run(["echo", "via-config"])).stdout == "via-config\n"
    assert h.peer_address == "127.0.0.1"  # what an HTTP client should use, not the alias
    await h.close()
    jump = ssh_server.make_host("bastion")
    h = ssh_server.make_host("gpu", jump=jump)
    assert (await h.run(["echo", "via-jump"])).stdout == "via-jump\n"
    assert len(ssh_server.connections) == 2  # the bastion link and the tunnelled one
    await h.close()
    await jump.close()


async def test_the_suggested_keyscan_command_really_trusts_the_host(ssh_server: SSHTestServer, tmp_path) -> None:
    import re
    import subprocess

    known = tmp_path / "my_known_hosts"
    known.write_text("")
    h = ssh_server.make_host("gpu", known_hosts=[str(known)])
    with pytest.raises(HostKeyError) as err:
        await h.connect()
    command = re.search(r"`(ssh-keyscan [^`]+)`", str(err.value))
    assert command is not None
    # run exactly what the message told the operator to run
    proc = await asyncio.create_subprocess_shell(command[1], stderr=subprocess.DEVNULL)
    assert await asyncio.wait_for(proc.wait(), 10) == 0
    assert (await h.run(["echo", "trusted"])).stdout == "trusted\n"
    await h.close()


async def test_agent_authentication(ssh_server: SSHTestServer, tmp_path) -> None:
    sock = tmp_path / "agent.sock"
    agent = await asyncio.create_subprocess_exec(
        "ssh-agent", "-D", "-a", str(sock), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        added: list[tuple[int | None, bytes]] = []

        async def agent_answered() -> bool:  # ssh-add exits 2 while it cannot reach the agent
            add = await asyncio.create_subprocess_exec(
                "ssh-add", str(ssh_server.client_key_path), env={"SSH_AUTH_SOCK": str(sock)},
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )
            _, add_err = await add.communicate()
            added.append((add.returncode, add_err))
            return add.returncode != 2

        await waiting.wait_for(agent_answered, 10, "ssh-agent to listen", detail=lambda: added[-1:])
        assert added[-1][0] == 0, added[-1][1]
        # no key file given: only the agent holds the authorised key
        h = ssh_server.make_host("gpu", client_keys=None, agent=str(sock))
        assert (await h.run(["echo", "agent"])).stdout == "agent\n"
        await h.close()
        h = ssh_server.make_host("gpu", client_keys=[], agent=False)
        with pytest.raises(HostError, match="refused our credentials") as err:
            await h.connect()
        assert not isinstance(err.value, HostUnavailable)  # not retried: a human must act
        await h.close()
    finally:
        agent.terminate()
        await agent.wait()


def test_importing_the_ssh_host_prints_no_cryptography_warning_and_silences_no_other() -> None:
    """Issue 30: every SSH command began with six CryptographyDeprecationWarning lines from asyncssh's import."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import warnings; before = list(warnings.filters); import kimitui.host.ssh; "
            "assert warnings.filters == before, 'a filter was left behind'; "
            "warnings.warn('any other warning is still shown', UserWarning)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr
    assert "CryptographyDeprecationWarning" not in out.stderr and "DSA" not in out.stderr, out.stderr
    assert "any other warning is still shown" in out.stderr
