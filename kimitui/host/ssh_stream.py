"""Remote commands over one SSH channel: the pid-announcing wrapper and the line stream.

Every command runs as ``sh -c 'echo "kimitui-pid $$"; exec "$@"' kimitui ARGV...``:
each word quoted by ``shlex.join``, and the remote pid learnt from the first
marked line (login-shell noise before it is skipped), so a stream can be
stopped with ``kill`` even where sshd ignores channel signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from kimitui.host.base import HostError, HostUnavailable, Stream
from kimitui.host.lines import LineSplitter, StderrTail
from kimitui.host.quiet_asyncssh import asyncssh

if TYPE_CHECKING:
    from kimitui.host.ssh import SSHHost

READ_CHUNK = 65536
_PID_MARK = b"kimitui-pid "
_PID_SCRIPT = 'echo "kimitui-pid $$"; exec "$@"'
_PID_SCRIPT_MERGED = 'echo "kimitui-pid $$"; exec "$@" 2>&1'
LINK_ERRORS = (asyncssh.Error, ConnectionError, OSError, EOFError)


def remote_command(argv: Sequence[str], env: dict[str, str] | None = None, *, merge_stderr: bool = False) -> str:
    """The shell line for ``argv``: every word quoted, pid announced on the first stdout line."""
    if not argv:
        raise HostError("empty command")
    prefix: list[str] = []
    if env:
        for key, value in env.items():
            if not key or "=" in key or not key.replace("_", "a").isalnum():
                raise HostError(f"invalid environment variable name {key!r}")
            prefix.append(f"{key}={value}")
        prefix.insert(0, "env")
    script = _PID_SCRIPT_MERGED if merge_stderr else _PID_SCRIPT
    return shlex.join(["exec", "sh", "-c", script, "kimitui", *prefix, *argv])


def exit_code_of(proc: asyncssh.SSHClientProcess[bytes]) -> int | None:
    """The remote exit status; ``None`` if killed by a signal or the link dropped."""
    status = proc.exit_status
    if proc.exit_signal is not None or status is None or status < 0:
        return None
    return status


async def read_pid(proc: asyncssh.SSHClientProcess[bytes]) -> int | None:
    """The pid line our wrapper prints first; anything before it is login-shell noise (rc files)."""
    for _ in range(1000):
        line = await proc.stdout.readline()
        if not line:
            return None
        if line.startswith(_PID_MARK):
            try:
                return int(line[len(_PID_MARK):].strip())
            except ValueError:
                return None
    return None


class SSHStream(Stream):
    """A remote command read line by line over an SSH channel."""

    stderr_tail: StderrTail
    """Always kept here (an empty tail when stderr is merged into stdout)."""

    def __init__(self, host: "SSHHost", proc: asyncssh.SSHClientProcess[bytes], argv: tuple[str, ...], pid: int | None, merged: bool) -> None:
        self.host = host
        self.proc = proc
        self.argv = argv
        self.pid = pid
        """The remote process id (None if the remote shell did not report it)."""
        self.lost = False
        """True when the stream ended because the SSH link dropped."""
        self.stopped = False
        """True once :meth:`stop` ended it."""
        self._gave_up = False
        self.error = ""
        self.stderr_tail = StderrTail()
        self._stop_lock = asyncio.Lock()
        self._closed = asyncio.ensure_future(proc.wait_closed())
        self._stderr_task = None if merged else asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        with contextlib.suppress(*LINK_ERRORS):
            while chunk := await self.proc.stderr.read(READ_CHUNK):
                self.stderr_tail.feed(chunk)
        self.stderr_tail.close()

    async def __aiter__(self) -> AsyncIterator[str]:
        split = LineSplitter()
        try:
            while chunk := await self.proc.stdout.read(READ_CHUNK):
                for line in split.feed(chunk):
                    yield line
        except LINK_ERRORS as exc:
            self.lost, self.error = True, str(exc) or type(exc).__name__
        for line in split.flush():
            yield line
        await self.wait()

    async def write(self, data: str | bytes) -> None:
        if self._closed.done() or self.proc.stdin.is_closing():
            raise HostError(f"{self.host.name}: stdin of {self.argv[0]!r} is closed")
        try:
            self.proc.stdin.write(data.encode() if isinstance(data, str) else data)
            await self.proc.stdin.drain()
        except LINK_ERRORS as exc:
            raise HostUnavailable(f"{self.host.name}: cannot write to {self.argv[0]!r}: {exc}") from exc

    async def close_stdin(self) -> None:
        with contextlib.suppress(*LINK_ERRORS):
            if not self._closed.done():
                self.proc.stdin.write_eof()

    async def wait(self) -> int | None:
        if not self._gave_up:
            with contextlib.suppress(*LINK_ERRORS):
                await asyncio.shield(self._closed)
        if self._stderr_task is not None:
            if self._gave_up:
                self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr_task
        self.exit_code = exit_code_of(self.proc)
        if self.proc.exit_status is None and self.proc.exit_signal is None and not self.stopped:
            self.lost = True
        return self.exit_code

    async def stop(self, grace_s: float = 3.0) -> None:
        """TERM the remote process, KILL it after ``grace_s``, close the channel; idempotent."""
        async with self._stop_lock:
            if not self._closed.done():
                self.stopped = True
                with contextlib.suppress(*LINK_ERRORS):
                    self.proc.send_signal("TERM")  # honoured by OpenSSH >= 7.9
                link_ok = await self.host.signal_pid(self.pid, "TERM", timeout=grace_s)
                try:
                    await asyncio.wait_for(asyncio.shield(self._closed), grace_s)
                except asyncio.TimeoutError:
                    if link_ok:  # a link that could not run `kill` will not run it now
                        await self.host.signal_pid(self.pid, "KILL", timeout=grace_s)
                self.proc.close()
                with contextlib.suppress(asyncio.TimeoutError, *LINK_ERRORS):
                    await asyncio.wait_for(asyncio.shield(self._closed), grace_s)
            if not self._closed.done():  # a hung link: stop waiting for it
                self._gave_up = True
                self._closed.cancel()
            await self.wait()
