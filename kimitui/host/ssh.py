"""A GPU host reached over SSH (asyncssh).

What it adds to the plain library, and why:

* **Host keys are verified** against known_hosts (``~/.ssh/known_hosts`` or the
  configured files, plus kimitui's own file of keys trusted on first use).  An
  unknown or changed key is refused with a message naming the host, its
  fingerprint and the exact command that trusts it.  Trust-on-first-use is an
  explicit opt-in; the key is recorded and verified from then on.
* **A dead link is noticed** after about ``keepalive_s * (keepalive_count_max + 1)`` s (4 s by default),
  and the host **reconnects by itself** with exponential backoff, publishing
  ``ConnectionState`` events (lost, reconnecting, connected, failed).  A
  changed host key or refused credentials stop the retries: those need a human.
* **Remote processes do not outlive their stream**: every command is started
  through ``sh -c 'echo "kimitui-pid $$"; exec "$@"'``, so the client learns the remote pid
  and ``stop()`` can ``kill`` it even on an sshd that ignores channel signals.
* **Commands are argument lists**, joined with ``shlex.join``; nothing is ever
  pasted into the remote shell unquoted.

A stream whose link drops simply ends: ``exit_code`` is ``None`` and
``lost`` is True, so a caller restarts it after ``await host.wait_connected()``.
A connection through :meth:`SSHHost.forward` whose link drops is cut at once, both ways, and marked
(:mod:`kimitui.host.link_marks`) so the load client calls its request ``link_lost``; a new
connection waits up to ``connect_timeout_s`` for the link to come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shlex
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from kimitui.host import link_marks
from kimitui.host.base import (
    CommandResult,
    CommandTimeout,
    EventCallback,
    Host,
    HostError,
    HostKeyError,
    HostUnavailable,
)
from kimitui.host.hostkeys import DEFAULT_PORT, GLOBAL_KNOWN_HOSTS, USER_KNOWN_HOSTS, HostKeyPolicy, default_tofu_known_hosts
from kimitui.host.lines import decode
from kimitui.host.quiet_asyncssh import asyncssh
from kimitui.host.ssh_stream import LINK_ERRORS, SSHStream, exit_code_of, read_pid, remote_command

__all__ = ["SSHHost", "SSHStream", "remote_command", "default_tofu_known_hosts"]

# $1 = path, $2 = octal mode; data on stdin.  A temp file beside the target,
# fsync where `sync FILE` exists, then an atomic rename.
_WRITE_SCRIPT = r"""set -e
p=$1; case $p in "~/"*) p=$HOME/${p#"~/"};; esac
d=$(dirname -- "$p"); b=$(basename -- "$p")
t=$(mktemp "$d/.$b.XXXXXX")
trap 'rm -f -- "$t"' EXIT
cat > "$t"
chmod "$2" "$t"
sync -- "$t" 2>/dev/null || :
mv -f -- "$t" "$p"
trap - EXIT"""
_READ_SCRIPT = 'p=$1; case $p in "~/"*) p=$HOME/${p#"~/"};; esac\nexec cat -- "$p"'


class _ByteReader(Protocol):
    """One end of a forwarded connection, read side (asyncio's or asyncssh's stream reader)."""

    async def read(self, n: int = -1) -> bytes: ...


class _ByteWriter(Protocol):
    """One end of a forwarded connection, write side (asyncio's or asyncssh's stream writer)."""

    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def can_write_eof(self) -> bool: ...
    def write_eof(self) -> None: ...
    def close(self) -> None: ...


def _local_ends(writer: asyncio.StreamWriter) -> tuple[int, int] | None:
    """(our listening port, the client's port) of a forwarded connection: what the client can look up."""
    ours, theirs = writer.get_extra_info("sockname"), writer.get_extra_info("peername")
    if not ours or not theirs:
        return None
    return int(ours[1]), int(theirs[1])


class _Client(asyncssh.SSHClient):
    """Per-connection callbacks: host-key decisions and loss of the link."""

    def __init__(self, host: "SSHHost") -> None:
        self._host = host
        self.key_problem: str | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        # Only called for a key that known_hosts does not already trust.
        verdict, message = self._host.host_keys().judge(host, addr, port, key)
        self.key_problem = message
        return verdict

    def connection_lost(self, exc: Exception | None) -> None:
        self._host._on_link_lost(self, exc)


class SSHHost(Host):
    """A host reached over SSH, with key verification, keepalive and reconnect."""

    address: str
    can_forward = True

    def __init__(
        self,
        name: str,
        address: str,
        *,
        user: str | None = None,
        port: int | None = None,
        client_keys: Sequence[str] | None = None,
        agent: bool | str = True,
        known_hosts: str | Sequence[str] | None = None,
        trust_on_first_use: bool = False,
        tofu_known_hosts: str | Path | None = None,
        ssh_config: Sequence[str] | str | None | tuple[()] = (),
        jump: "SSHHost | str | None" = None,
        keepalive_s: float = 1.0,
        keepalive_count_max: int = 3,
        connect_timeout_s: float = 10.0,
        reconnect_initial_s: float = 0.5,
        reconnect_max_s: float = 30.0,
        on_event: EventCallback | None = None,
    ) -> None:
        """``client_keys=None`` and ``agent=True`` use the usual keys and ``$SSH_AUTH_SOCK``;
        ``ssh_config=()`` reads ``~/.ssh/config``, ``None`` reads nothing;
        ``known_hosts=None`` means ``~/.ssh/known_hosts`` and ``/etc/ssh/ssh_known_hosts``; ``jump`` is another SSHHost or
        ``"user@host:port"``."""
        super().__init__(name, on_event)
        self.address = address
        self.user = user
        self.port = port
        self.client_keys = list(client_keys) if client_keys is not None else None
        self.agent = agent
        files = [known_hosts] if isinstance(known_hosts, str) else list(known_hosts or [USER_KNOWN_HOSTS, GLOBAL_KNOWN_HOSTS])
        self.known_hosts_files = [Path(f).expanduser() for f in files]
        self.trust_on_first_use = trust_on_first_use
        self.tofu_known_hosts = Path(tofu_known_hosts).expanduser() if tofu_known_hosts else default_tofu_known_hosts()
        self.ssh_config = ssh_config
        self.jump = jump
        self.keepalive_s = keepalive_s
        self.keepalive_count_max = keepalive_count_max
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_initial_s = reconnect_initial_s
        self.reconnect_max_s = reconnect_max_s

        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: _Client | None = None
        self._connected = asyncio.Event()
        self._connect_lock = asyncio.Lock()
        self._reconnect_task: asyncio.Task[None] | None = None
        self._attempt = 0
        self._fatal: HostError | None = None
        self._closed = False
        self._streams: weakref.WeakSet[SSHStream] = weakref.WeakSet()
        self._forwards: dict[tuple[str, int], asyncio.base_events.Server] = {}
        self._pipes: set[asyncio.Task[Any]] = set()
        """Forwarded connections open now (close() ends them)."""
        self._lost_reason = "link lost"

    # ------------------------------------------------------------------ describing

    @property
    def target(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port and self.port != DEFAULT_PORT else ""
        return f"{user}{self.address}{port}"

    @property
    def connected(self) -> bool:
        return self._conn is not None

    @property
    def peer_address(self) -> str:
        """The IP the SSH link actually reached (``address`` may be a ~/.ssh/config alias)."""
        if self._conn is not None:
            peer = self._conn.get_extra_info("peername")
            if peer:
                return str(peer[0])
        return self.address

    # ------------------------------------------------------------------ host keys

    def host_keys(self) -> HostKeyPolicy:
        """Who this host trusts now (built from the current settings)."""
        return HostKeyPolicy(
            self.name,
            self.known_hosts_files,
            trust_on_first_use=self.trust_on_first_use,
            tofu_file=self.tofu_known_hosts,
            on_trusted=lambda text: self.connection_event("connecting", text),
        )

    # ------------------------------------------------------------------ the link

    async def _open(self) -> None:
        """One connection attempt; maps every failure to a HostError kind."""
        client = _Client(self)
        options: dict[str, Any] = dict(
            known_hosts=lambda h, a, p: self.host_keys().known_hosts().match(h, a, p),
            client_factory=lambda: client,
            keepalive_interval=self.keepalive_s,
            keepalive_count_max=self.keepalive_count_max,
            connect_timeout=self.connect_timeout_s,
            config=self.ssh_config,
        )
        if self.port is not None:
            options["port"] = self.port
        if self.user is not None:
            options["username"] = self.user
        if self.client_keys is not None:
            options["client_keys"] = self.client_keys
        if self.agent is False:
            options["agent_path"] = None
        elif isinstance(self.agent, str):
            options["agent_path"] = self.agent
        if isinstance(self.jump, SSHHost):
            await self.jump.wait_connected(self.connect_timeout_s)
            options["tunnel"] = self.jump._conn
        elif self.jump:
            options["tunnel"] = self.jump
        try:
            conn = await asyncssh.connect(self.address, **options)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostKeyError(client.key_problem or f"{self.name}: {exc}") from None
        except asyncssh.PermissionDenied as exc:
            raise HostError(
                f"{self.name}: {self.target} refused our credentials ({exc.reason}); check `key` in the "
                f"kimitui config, your ssh-agent, or ~/.ssh/config"
            ) from None
        except (asyncio.TimeoutError, *LINK_ERRORS) as exc:
            reason = str(exc) or type(exc).__name__
            raise HostUnavailable(f"{self.name}: cannot reach {self.target}: {reason}") from None
        except UnicodeError:  # the resolver's idna codec: an empty or over-63-character label
            where = "`address` and `jump`" if self.jump else "`address`"
            raise HostError(
                f"{self.name}: cannot reach {self.target}: not a valid host name (a part between dots is empty "
                f"or over 63 characters); check {where} in the kimitui config or ~/.ssh/config"
            ) from None
        self._conn, self._client = conn, client
        self._fatal = None
        self._connected.set()

    async def connect(self) -> None:
        """Open the link now; raises HostKeyError / HostError / HostUnavailable."""
        async with self._connect_lock:
            if self._conn is not None:
                return
            if self._closed:
                raise HostError(f"{self.name}: host is closed")
            self.connection_event("connecting", self.target)
            try:
                await self._open()
            except HostError as exc:
                self.connection_event("failed", str(exc))
                raise
            self.connection_event("connected", self.target)

    def _on_link_lost(self, client: _Client, exc: Exception | None) -> None:
        if client is not self._client or self._closed:
            return
        self._conn, self._client = None, None
        self._connected.clear()
        self._lost_reason = str(exc) if exc else "closed by the server"
        self.connection_event("lost", self._lost_reason)
        self._start_reconnect(immediate=False)

    def _start_reconnect(self, *, immediate: bool) -> None:
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect(immediate))

    def _backoff(self, attempt: int) -> float:
        delay = min(self.reconnect_initial_s * 2 ** (attempt - 1), self.reconnect_max_s)
        return delay * random.uniform(0.8, 1.2)

    async def _reconnect(self, immediate: bool) -> None:
        """Retry with exponential backoff until connected, closed, or refused for good."""
        self._attempt = 0
        last_error = ""
        while not self._closed:
            self._attempt += 1
            delay = 0.0 if immediate and self._attempt == 1 else self._backoff(self._attempt)
            self.connection_event("reconnecting", f"next try in {delay:.1f} s{last_error}", attempt=self._attempt)
            await asyncio.sleep(delay)
            try:
                async with self._connect_lock:
                    if self._conn is None and not self._closed:
                        await self._open()
            except HostUnavailable as exc:
                last_error = f"; last error: {exc}"
                continue
            except HostError as exc:  # changed key, refused credentials: a human must act
                self._fatal = exc
                self.connection_event("failed", str(exc), attempt=self._attempt)
                return
            if not self._closed:
                self.connection_event("connected", self.target, attempt=self._attempt)
            return

    async def wait_connected(self, timeout: float | None = 30.0) -> None:
        """Return once the link is up (connecting or reconnecting as needed).

        Raises HostUnavailable after ``timeout``, or the HostError that made
        reconnecting pointless (changed host key, refused credentials).
        """
        if self._conn is not None:
            return
        if self._closed:
            raise HostError(f"{self.name}: host is closed")
        self._start_reconnect(immediate=True)
        task = self._reconnect_task
        assert task is not None
        waiter = asyncio.ensure_future(self._connected.wait())
        try:
            await asyncio.wait({waiter, task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self._conn is not None:
            return
        if self._fatal is not None:
            raise self._fatal
        raise HostUnavailable(f"{self.name}: not connected to {self.target} after {timeout} s")

    async def _ensure_conn(self) -> asyncssh.SSHClientConnection:
        if self._conn is not None:
            return self._conn
        if self._closed:
            raise HostError(f"{self.name}: host is closed")
        if self._reconnect_task is not None and not self._reconnect_task.done():
            raise HostUnavailable(f"{self.name}: link to {self.target} lost; reconnecting (attempt {self._attempt})")
        await self.connect()
        assert self._conn is not None
        return self._conn

    async def forward(self, remote_host: str, remote_port: int) -> int:
        """A port on this machine's 127.0.0.1 that reaches ``remote_host:remote_port`` as seen
        from the GPU host, through the SSH link (for a server bound to the host's loopback).

        The listener is ours, not the connection's: each new TCP connection opens a
        direct-tcpip channel on the *current* link, so the port survives reconnects.
        """
        key = (remote_host, remote_port)
        if key not in self._forwards:
            self._forwards[key] = await asyncio.start_server(
                lambda r, w: self._pipe_forward(r, w, remote_host, remote_port), "127.0.0.1", 0
            )
        return int(self._forwards[key].sockets[0].getsockname()[1])

    async def _pipe_forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, remote_host: str, remote_port: int
    ) -> None:
        """One forwarded connection: the handler task of our listener, so it never ends in an exception
        (asyncio would print it): a link lost under it cuts it, marked ``link_lost`` for the client."""
        task = asyncio.current_task()
        if task is not None:
            self._pipes.add(task)
        try:
            await self._pipe(reader, writer, remote_host, remote_port)
        except asyncio.CancelledError:  # close() (or the loop's end) stopped it: its sockets are closed below
            pass
        finally:
            writer.close()
            if task is not None:
                self._pipes.discard(task)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, remote_host: str, remote_port: int
    ) -> None:
        ends = _local_ends(writer)
        conn: asyncssh.SSHClientConnection | None = None
        try:
            await self.wait_connected(self.connect_timeout_s)  # a link coming back within seconds is waited for
            conn = self._conn
            if conn is None:
                raise HostUnavailable(f"{self.name}: link to {self.target} lost")
            remote_reader, remote_writer = await conn.open_connection(remote_host, remote_port)
        except (HostError, *LINK_ERRORS) as exc:
            if self._closed:
                return
            if conn is None or self._link_gone(conn) or not isinstance(exc, asyncssh.ChannelOpenError):
                self._mark_cut(ends, str(exc) or type(exc).__name__)
            # else: nothing listens at remote_host:remote_port on the host: the client sees a refusal
            return
        link = conn

        async def pump(src: _ByteReader, dst: _ByteWriter) -> bool:
            """Copy until EOF and pass the EOF on: True; False when the link (or a socket) broke."""
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except LINK_ERRORS:
                return False
            if self._link_gone(link):  # asyncssh ends a channel's reads with EOF when the server hangs up
                return False
            if dst.can_write_eof():
                dst.write_eof()
            return True

        pumps = {asyncio.ensure_future(pump(reader, remote_writer)), asyncio.ensure_future(pump(remote_reader, writer))}
        try:
            while pumps:
                done, pumps = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                if not all(t.result() for t in done):
                    break  # one side broke: the other can only wait forever, so both are ended here
            if self._link_gone(link) and not self._closed:
                self._mark_cut(ends, self._lost_reason)
        finally:
            for t in pumps:
                t.cancel()
            remote_writer.close()

    def _link_gone(self, conn: asyncssh.SSHClientConnection) -> bool:
        return conn.is_closed() or self._conn is not conn

    def _mark_cut(self, ends: tuple[int, int] | None, reason: str) -> None:
        """Before the socket closes: tell its client (another process) it was the link, not the server."""
        if ends is not None:
            if not reason.startswith(f"{self.name}: "):
                reason = f"{self.name}: SSH link to {self.target} lost ({reason})"
            link_marks.mark(ends[0], ends[1], reason)

    async def close(self) -> None:
        """Stop every stream and forward, close the link, stop reconnecting."""
        if self._closed:
            return
        for server in self._forwards.values():
            server.close()
        self._forwards.clear()
        for pipe in list(self._pipes):  # forwarded connections still open: ended now, not at the loop's end
            pipe.cancel()
        if self._pipes:
            await asyncio.wait(list(self._pipes), timeout=2.0)
        await asyncio.gather(*(s.stop(grace_s=1.0) for s in list(self._streams)), return_exceptions=True)
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect_task
        conn, self._conn, self._client = self._conn, None, None
        self._connected.clear()
        if conn is not None:
            conn.close()
            with contextlib.suppress(*LINK_ERRORS):
                await conn.wait_closed()
        self.connection_event("closed")

    # ------------------------------------------------------------------ commands

    async def _start(
        self, argv: tuple[str, ...], env: dict[str, str] | None, merge: bool, timeout: float | None
    ) -> tuple[asyncssh.SSHClientProcess[bytes], int | None]:
        """Open a channel and learn the remote pid, within ``timeout`` (a hung link never hangs us)."""
        command = remote_command(argv, self.command_env(env), merge_stderr=merge)
        conn = await self._ensure_conn()
        proc: asyncssh.SSHClientProcess[bytes] | None = None

        async def start() -> int | None:
            nonlocal proc
            delay = 0.02
            while True:
                try:
                    proc = await conn.create_process(command, encoding=None)
                    break
                except asyncssh.ChannelOpenError:
                    # sshd refuses sessions beyond MaxSessions (10 by default): wait for one to end
                    if conn.is_closed():
                        raise
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.5)
            return await read_pid(proc)

        try:
            pid = await asyncio.wait_for(start(), timeout)
        except asyncio.TimeoutError:
            if proc is not None:
                proc.close()
            raise HostUnavailable(f"{self.name}: {self.target} did not start {argv[0]!r} within {timeout:g} s") from None
        except LINK_ERRORS as exc:
            raise HostUnavailable(f"{self.name}: cannot start {argv[0]!r}: {exc}") from exc
        assert proc is not None
        return proc, pid

    async def signal_pid(self, pid: int | None, sig: str, timeout: float) -> bool:
        """Best effort ``kill -SIG pid`` on its own channel; False if the link could not run it.

        Public for :class:`kimitui.host.ssh_stream.SSHStream`: a signal sent through the channel alone
        is honoured only by OpenSSH >= 7.9, so a stream stops its process this way too."""
        if pid is None or self._conn is None:
            return False
        try:
            await self.run(["kill", f"-{sig}", str(pid)], timeout=max(timeout, 1.0))
        except (HostError, asyncio.TimeoutError, *LINK_ERRORS):
            return False
        return True

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        input: str | bytes | None = None,
        env: dict[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult:
        argv = tuple(argv)
        started = time.monotonic()
        try:
            proc, pid = await self._start(argv, env, merge=False, timeout=timeout)
        except HostUnavailable:
            if timeout is not None and time.monotonic() - started >= timeout:
                raise CommandTimeout(f"{self.name}: {argv[0]!r} did not even start within its {timeout:g} s timeout") from None
            raise
        left = None if timeout is None else max(0.001, timeout - (time.monotonic() - started))
        try:
            if input is not None:
                proc.stdin.write(input.encode() if isinstance(input, str) else input)
            proc.stdin.write_eof()
            out, err = await asyncio.wait_for(asyncio.gather(proc.stdout.read(), proc.stderr.read()), left)
            await asyncio.wait_for(proc.wait_closed(), 5.0)
        except asyncio.TimeoutError:
            await self.signal_pid(pid, "KILL", timeout=2.0)
            proc.close()
            raise CommandTimeout(
                f"{self.name}: {argv[0]!r} ran past its {timeout:g} s timeout and was killed"
            ) from None
        except LINK_ERRORS as exc:
            proc.close()
            raise HostUnavailable(f"{self.name}: link lost while running {argv[0]!r}: {exc}") from exc
        except BaseException:
            proc.close()
            raise
        if proc.exit_status is None and proc.exit_signal is None:
            raise HostUnavailable(f"{self.name}: link to {self.target} closed while running {argv[0]!r}")
        result = CommandResult(argv, exit_code_of(proc), decode(out), decode(err))
        return self.checked(shlex.join(argv), result, check)

    async def stream(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        merge_stderr: bool = False,
    ) -> SSHStream:
        argv = tuple(argv)
        proc, pid = await self._start(argv, env, merge=merge_stderr, timeout=self.connect_timeout_s)
        stream = SSHStream(self, proc, argv, pid, merge_stderr)
        self._streams.add(stream)
        return stream

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        result = await self.run(["sh", "-c", _WRITE_SCRIPT, "kimitui-write", path, format(mode, "o")], input=data)
        if not result.ok:
            raise HostError(f"{self.name}: cannot write {path}: {result.stderr.strip() or f'exit {result.exit_code}'}")

    async def read_file(self, path: str) -> bytes:
        conn = await self._ensure_conn()
        try:
            proc = await conn.create_process(shlex.join(["sh", "-c", _READ_SCRIPT, "kimitui-read", path]), encoding=None)
            proc.stdin.write_eof()
            out, err = await asyncio.wait_for(asyncio.gather(proc.stdout.read(), proc.stderr.read()), 60.0)
            await asyncio.wait_for(proc.wait_closed(), 5.0)
        except (asyncio.TimeoutError, *LINK_ERRORS) as exc:
            raise HostUnavailable(f"{self.name}: cannot read {path}: {'timed out' if isinstance(exc, asyncio.TimeoutError) else exc}") from exc
        if proc.exit_status != 0:
            raise HostError(f"{self.name}: cannot read {path}: {decode(err).strip() or f'exit {proc.exit_status}'}")
        return out
