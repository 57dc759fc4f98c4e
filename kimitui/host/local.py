"""The machine kimitui itself runs on, through asyncio subprocesses.

Every child gets its own process group (``start_new_session=True``) so that a
timeout or ``stop()`` ends the whole tree it spawned, not just its leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from kimitui.host.base import (
    CommandResult,
    CommandTimeout,
    EventCallback,
    Host,
    HostError,
    Stream,
)
from kimitui.host.lines import LineSplitter, StderrTail, decode, normalise_exit
from kimitui.private_files import atomic_write as _atomic_write

READ_CHUNK = 65536
COMMAND_NOT_FOUND = 127
"""What a shell answers for a missing program; LocalHost answers the same as SSH."""


def _kill_group(proc: asyncio.subprocess.Process, sig: int, *, stragglers: bool = False) -> None:
    """Signal the process group led by ``proc``.

    Normally only while the leader is unreaped; ``stragglers=True`` also
    signals a group whose leader has exited (children left holding pipes).
    Linux never hands out a pid still in use as a group id, so this is safe.
    """
    if proc.returncode is not None and not stragglers:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _merged_env(env: dict[str, str] | None) -> dict[str, str] | None:
    return None if env is None else {**os.environ, **env}


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


class LocalStream(Stream):
    """A local child process read line by line."""

    stderr_tail: StderrTail
    """Always kept here (an empty tail when stderr is merged into stdout)."""

    def __init__(self, proc: asyncio.subprocess.Process, argv: tuple[str, ...], host: str) -> None:
        self.proc = proc
        self.argv = argv
        self.host = host
        self.pid = proc.pid
        self.stderr_tail = StderrTail()
        self._stderr_task: asyncio.Task[None] | None = None
        if proc.stderr is not None:
            self._stderr_task = asyncio.get_running_loop().create_task(self._drain_stderr())
        self._stop_lock = asyncio.Lock()
        self.reaper: asyncio.Task[int] | None = None

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(READ_CHUNK):
            self.stderr_tail.feed(chunk)
        self.stderr_tail.close()

    async def __aiter__(self) -> AsyncIterator[str]:
        assert self.proc.stdout is not None
        split = LineSplitter()
        while chunk := await self.proc.stdout.read(READ_CHUNK):
            for line in split.feed(chunk):
                yield line
        for line in split.flush():
            yield line
        await self.wait()

    async def write(self, data: str | bytes) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            raise HostError(f"{self.host}: stdin of {self.argv[0]!r} is closed")
        try:
            stdin.write(_as_bytes(data))
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise HostError(f"{self.host}: {self.argv[0]!r} stopped reading stdin ({exc})") from exc

    async def close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()

    async def wait(self) -> int | None:
        code = await self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # nobody reads it any more; frees the transport
        if self._stderr_task is not None:
            await self._stderr_task
        self.exit_code = normalise_exit(code)
        return self.exit_code

    async def stop(self, grace_s: float = 3.0) -> None:
        """TERM the process group, KILL it after ``grace_s``; safe to call twice."""
        async with self._stop_lock:
            if self.proc.returncode is None:
                _kill_group(self.proc, signal.SIGTERM)
                try:
                    await asyncio.wait_for(asyncio.shield(self.proc.wait()), grace_s)
                except asyncio.TimeoutError:
                    _kill_group(self.proc, signal.SIGKILL)
                await self.proc.wait()
                _kill_group(self.proc, signal.SIGKILL, stragglers=True)
            await self.close_stdin()
            await self.wait()


class LocalHost(Host):
    """Runs commands on this machine.  Also the base of the simulated host ``sim``."""

    def __init__(self, name: str = "local", on_event: EventCallback | None = None, *, simulated: bool | None = False) -> None:
        super().__init__(name, on_event)
        self.simulated = simulated
        """True for the embedded simulated host: launchers start the simulator, not SGLang."""
        self._streams: set[LocalStream] = set()

    async def _spawn(
        self, argv: Sequence[str], env: dict[str, str] | None, *, stdin: bool, stderr: int
    ) -> asyncio.subprocess.Process | None:
        """Start ``argv`` in its own process group; ``None`` if the program does not exist."""
        if not argv:
            raise HostError(f"{self.name}: empty command")
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=_merged_env(self.command_env(env)),
                start_new_session=True,
            )
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PermissionError as exc:
            raise HostError(f"{self.name}: cannot execute {argv[0]!r}: {exc}") from exc

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
        proc = await self._spawn(argv, env, stdin=input is not None, stderr=asyncio.subprocess.PIPE)
        if proc is None:
            result = CommandResult(argv, COMMAND_NOT_FOUND, "", f"{argv[0]}: command not found\n")
        else:
            try:
                out, err = await asyncio.wait_for(
                    proc.communicate(None if input is None else _as_bytes(input)), timeout
                )
            except asyncio.TimeoutError:
                _kill_group(proc, signal.SIGKILL)
                await proc.wait()
                raise CommandTimeout(
                    f"{self.name}: {argv[0]!r} ran past its {timeout:g} s timeout and was killed"
                ) from None
            except BaseException:  # cancelled: never leave the child behind
                _kill_group(proc, signal.SIGKILL)
                raise
            result = CommandResult(argv, normalise_exit(proc.returncode), decode(out), decode(err))
        return self.checked(shlex.join(argv), result, check)

    async def stream(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        merge_stderr: bool = False,
    ) -> Stream:
        argv = tuple(argv)
        stderr = asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE
        proc = await self._spawn(argv, env, stdin=True, stderr=stderr)
        if proc is None:
            raise HostError(f"{self.name}: {argv[0]}: command not found")
        stream = LocalStream(proc, argv, self.name)
        self._streams.add(stream)
        reaper = asyncio.get_running_loop().create_task(proc.wait())
        reaper.add_done_callback(lambda _t: self._streams.discard(stream))
        stream.reaper = reaper
        return stream

    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        try:
            await asyncio.to_thread(_atomic_write, Path(path).expanduser(), _as_bytes(data), mode)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot write {path}: {exc.strerror or exc}") from exc

    async def read_file(self, path: str) -> bytes:
        try:
            return await asyncio.to_thread(Path(path).expanduser().read_bytes)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot read {path}: {exc.strerror or exc}") from exc

    async def connect(self) -> None:
        """Nothing to open; says ``connected`` so every host reports the same way (the cockpit logs it)."""
        self.connection_event("connected", self._in_words())

    def _in_words(self) -> str:
        """This host in the operator's words (the log reads "connection connected to this machine ...")."""
        simulated = self.simulated if self.simulated is not None else self.name == "sim"
        return "to this machine: the simulated host, no SSH" if simulated else "to this machine, no SSH"

    async def close(self) -> None:
        """Stop every stream still running."""
        streams = list(self._streams)
        await asyncio.gather(*(s.stop() for s in streams), return_exceptions=True)
        self.connection_event("closed", "(this machine)")
