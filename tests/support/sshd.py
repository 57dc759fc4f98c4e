"""A real SSH server inside the test process, on 127.0.0.1, for SSHHost tests.

Each session runs its command as a real ``bash -c`` subprocess (its own
process group), stdin forwarded, stdout and stderr kept apart.  The command is
killed when its channel closes, as a dying sshd session would.  ``stop()``
aborts every connection (what a client sees when the server crashes) and
``restart()`` comes back on the same port with the same host key.

Usage (the ``ssh_server`` fixture in ``tests/conftest.py`` does the first two)::

    server = SSHTestServer(tmp_path / "sshd"); await server.start()
    host = server.make_host("gpu", reconnect_initial_s=0.05)
    await host.run(["echo", "hi"])
    await server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh

if TYPE_CHECKING:
    from kimitui.host.ssh import SSHHost

LOOPBACK = "127.0.0.1"
USER = "tester"


class _Server(asyncssh.SSHServer):
    """Tracks live connections (so stop() can abort them) and allows jump tunnels to loopback."""

    def __init__(self, owner: "SSHTestServer") -> None:
        self._owner = owner
        self._conn: asyncssh.SSHServerConnection | None = None
        self.sessions = 0

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._owner.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner.connections.discard(self._conn)
        if exc is not None:  # the server's side of a link that broke, for a test that must say why
            self._owner.links_lost.append(f"{time.strftime('%H:%M:%S')} {type(exc).__name__}: {exc}")

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        return dest_host in (LOOPBACK, "localhost")  # direct-tcpip, for jump-host tests only

    def session_requested(self) -> asyncssh.SSHServerProcess[bytes] | bool:
        """A session runs bash; refused beyond ``max_sessions`` open ones (OpenSSH's MaxSessions)."""
        if self.sessions >= self._owner.max_sessions:
            return False
        self.sessions += 1
        return asyncssh.SSHServerProcess(self._run, None, 3, False)

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        try:
            await self._owner._run_in_bash(process)
        finally:
            self.sessions -= 1


class SSHTestServer:
    """An asyncssh server whose sessions execute real ``bash -c`` subprocesses."""

    def __init__(self, workdir: str | Path | None = None, user: str = USER) -> None:
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kimitui-sshd-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = LOOPBACK
        self.user = user
        self.port = 0
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self.pids: set[int] = set()
        """Pids of the commands running now (each leads its own process group)."""
        self.commands: list[str] = []
        """Every command string the server was asked to run, in order."""
        self.max_sessions = 10
        """Open sessions allowed per connection, as OpenSSH's default ``MaxSessions 10``."""
        self.login_noise = ""
        self.links_lost: list[str] = []
        """Why each connection that ended with an error ended, as the server saw it."""
        """Shell code run before each command, like a chatty ~/.bashrc (e.g. ``echo Welcome``)."""
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._sessions: set[asyncio.Task[Any]] = set()

        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.host_key_path = self.workdir / "ssh_host_ed25519_key"
        self.client_key_path = self.workdir / "client_ed25519_key"
        self.host_key.write_private_key(str(self.host_key_path))
        self.client_key.write_private_key(str(self.client_key_path))
        os.chmod(self.client_key_path, 0o600)
        self.known_hosts_path = self.workdir / "known_hosts"
        self.tofu_known_hosts_path = self.workdir / "kimitui_known_hosts"
        """Where make_host's SSHHost records keys it trusts on first use (empty at start)."""
        self.ssh_config_path = self.workdir / "ssh_config"

    # ------------------------------------------------------------------ lifecycle

    async def start(self, port: int = 0) -> None:
        self._acceptor = await asyncssh.listen(
            LOOPBACK,
            port,
            server_factory=lambda: _Server(self),
            server_host_keys=[self.host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(
                self.client_key.export_public_key().decode()
            ),
            encoding=None,  # sessions come from _Server.session_requested (MaxSessions)
            allow_scp=False,
            reuse_address=True,
        )
        self.port = self._acceptor.get_port()
        self._write_client_files()

    async def stop(self) -> None:
        """Go away like a crashed server: abort every connection, kill every command."""
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()
        for pid in list(self.pids):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        # let every session handler reap its command and close its channel
        sessions = [t for t in self._sessions if not t.done()]
        if sessions:
            await asyncio.wait(sessions, timeout=5.0)

    def freeze(self) -> None:
        """Hang like a host whose network vanished: no FIN, no RST, no answers.

        Stops reading every connection, so only the client's keepalive can
        notice.  (asyncssh has no public handle on the transport.)
        """
        for conn in self.connections:
            transport = conn._transport  # asyncssh's private transport: the only way to stop reading
            if transport is not None:  # None once the connection is closed: nothing left to freeze
                transport.pause_reading()

    async def restart(self) -> None:
        """Stop, then listen again on the same port with the same host key."""
        port = self.port
        await self.stop()
        await self.start(port)

    @property
    def running(self) -> bool:
        return self._acceptor is not None

    # ------------------------------------------------------------------ client side

    def known_hosts_line(self) -> str:
        return f"[{self.host}]:{self.port} {self.host_key.export_public_key().decode().strip()}\n"

    def _write_client_files(self) -> None:
        self.known_hosts_path.write_text(self.known_hosts_line())
        self.ssh_config_path.write_text(
            f"Host gpu-alias\n"
            f"    HostName {self.host}\n"
            f"    Port {self.port}\n"
            f"    User {self.user}\n"
            f"    IdentityFile {self.client_key_path}\n"
        )

    def connect_kwargs(self) -> dict[str, Any]:
        """Arguments for a raw, hermetic ``asyncssh.connect`` to this server."""
        return dict(
            host=self.host,
            port=self.port,
            username=self.user,
            client_keys=[str(self.client_key_path)],
            known_hosts=str(self.known_hosts_path),
            agent_path=None,
            config=None,
        )

    def make_host(self, name: str = "gpu", **kw: Any) -> "SSHHost":
        """An SSHHost for this server, hermetic (no agent, no ~/.ssh); ``kw`` overrides."""
        from kimitui.host.ssh import SSHHost

        options: dict[str, Any] = dict(
            address=self.host,
            port=self.port,
            user=self.user,
            client_keys=[str(self.client_key_path)],
            known_hosts=[str(self.known_hosts_path)],
            tofu_known_hosts=str(self.tofu_known_hosts_path),
            agent=False,
            ssh_config=None,
            # The server shares the test's event loop: under load it can miss a 1 s keepalive and the
            # link would be declared lost for no reason.  Tests of keepalive detection pass their own.
            keepalive_s=2.0,
            connect_timeout_s=5.0,
            reconnect_initial_s=0.05,
            reconnect_max_s=0.5,
        )
        options.update(kw)
        return SSHHost(name, **options)

    # ------------------------------------------------------------------ sessions

    async def _run_in_bash(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or "exit 0"
        self.commands.append(command)
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
            task.add_done_callback(self._sessions.discard)
        local = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            f"{self.login_noise}\n{command}" if self.login_noise else command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self.pids.add(local.pid)
        exited = asyncio.ensure_future(local.wait())
        closed = asyncio.ensure_future(process.channel.wait_closed())
        try:
            # send_eof=False: otherwise EOF follows stdout's end and late stderr is lost
            await process.redirect(stdin=local.stdin, stdout=local.stdout, stderr=local.stderr, send_eof=False)
            await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                rc = exited.result()
                await process.stdout.drain()
                await process.stderr.drain()
                if rc < 0:
                    process.exit_with_signal(signal.Signals(-rc).name.removeprefix("SIG"))
                else:
                    process.exit(rc)
        except (asyncssh.Error, ConnectionError, BrokenPipeError):
            pass
        finally:
            closed.cancel()
            # The channel went away first (kill it like a dying session), or the
            # command ended but left children holding its pipes: end them all.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(local.pid, signal.SIGKILL)
            await exited
            self.pids.discard(local.pid)
            # asyncio has no public close for a Process; without this the pipe
            # transports can outlive the test's event loop ("Event loop is closed").
            local._transport.close()  # type: ignore[attr-defined]
            process.close()
            with contextlib.suppress(Exception):
                await process.wait_closed()
