"""``SSHHost.signal_pid``: the public way a stream (or anyone) signals a remote process, on a real asyncssh server."""

from __future__ import annotations

import ast
from pathlib import Path

from kimitui.host.ssh import SSHHost
from tests.support.sshd import SSHTestServer
from tests.test_host_local import alive, wait_gone

ROOT = Path(__file__).resolve().parents[1]


async def test_signal_pid_signals_a_remote_process_and_says_when_it_cannot(ssh_server: SSHTestServer, tmp_path) -> None:
    host = ssh_server.make_host("gpu")
    try:
        assert await host.signal_pid(None, "TERM", timeout=1.0) is False  # nothing to signal
        marker = tmp_path / "term"
        s = await host.stream(["bash", "-c", f"trap 'echo term > {marker}; exit 0' TERM; echo up; "
                                             "while :; do sleep 0.05; done"])
        assert await anext(aiter(s)) == "up"
        assert s.pid is not None and alive(s.pid)
        assert await host.signal_pid(s.pid, "TERM", timeout=2.0) is True
        assert await wait_gone(s.pid)
        assert marker.read_text() == "term\n"
        await s.stop()
    finally:
        await host.close()
    assert await host.signal_pid(12345, "TERM", timeout=1.0) is False  # a closed link cannot run `kill`


def test_the_ssh_stream_calls_no_private_member_of_its_host() -> None:
    tree = ast.parse((ROOT / "kimitui" / "host" / "ssh_stream.py").read_text())
    private = [f"line {n.lineno}: host.{n.attr}" for n in ast.walk(tree)
               if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")
               and isinstance(n.value, ast.Attribute) and n.value.attr == "host"]
    assert not private, "SSHStream uses SSHHost's public surface only:\n" + "\n".join(private)
