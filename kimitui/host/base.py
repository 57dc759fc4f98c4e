"""The one way to touch a machine.

Everything above this module (launchers, telemetry, sweeps) works the same on
the local machine and over SSH.  Commands are argument lists, never shell
strings: implementations quote every argument with ``shlex.quote`` when a shell
is unavoidable (SSH), so nothing user-supplied is ever interpreted.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from kimitui.events import ConnectionState, Event, LinkState
from kimitui.host.lines import StderrTail


class HostError(Exception):
    """A host operation failed; the message names the host and what was tried."""


class HostUnavailable(HostError):
    """The host cannot be reached now (connection lost, refused, reconnecting)."""


class HostKeyError(HostError):
    """The host's key is unknown or changed; the message says how to trust it."""


class CommandTimeout(HostError):
    """A command ran past its timeout and was killed."""


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_code: int | None
    """``None`` when the process was killed by a signal or the link dropped."""
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Stream(abc.ABC):
    """A running command whose output is read line by line.

    ``async for line in stream`` yields stdout lines without their newline
    (stderr too when the stream was opened with ``merge_stderr=True``).
    ``write``/``close_stdin`` feed its stdin; ``stop`` ends the process (TERM,
    then KILL after a grace period) and is idempotent.  ``exit_code`` is set
    once the process has ended.
    """

    exit_code: int | None = None
    stderr_tail: StderrTail | None = None
    """The last lines it wrote to stderr (kept when stderr is not merged); ``None``: it keeps none."""

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[str]: ...

    @abc.abstractmethod
    async def write(self, data: str | bytes) -> None: ...

    @abc.abstractmethod
    async def close_stdin(self) -> None: ...

    @abc.abstractmethod
    async def stop(self, grace_s: float = 3.0) -> None: ...

    @abc.abstractmethod
    async def wait(self) -> int | None: ...

    async def __aenter__(self) -> "Stream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


EventCallback = Callable[[Event], None]


class Host(abc.ABC):
    """A machine kimitui can run commands on.

    Besides running commands, a host describes itself (``address``, ``python``, ``simulated``)
    and may offer a link's capabilities (``connected``, ``wait_connected``, ``forward``).  The
    defaults here are what the local machine answers, so callers never probe with ``getattr``:
    an SSH host overrides the link's methods, and :attr:`can_forward` says whether
    :meth:`forward` exists for real.
    """

    address: str | None = None
    """The name or address the link goes to; ``None`` for this machine."""
    python: str | None = None
    """The host's configured ``python3`` (``[hosts.NAME] python``); ``None``: find one on its PATH."""
    simulated: bool | None = None
    """True on a simulated host (launchers start the simulator); ``None``: decided by the name ``sim``."""
    can_forward: bool = False
    """True when :meth:`forward` tunnels a port (over SSH); locally the server is reached directly."""

    def __init__(self, name: str, on_event: EventCallback | None = None) -> None:
        self.name = name
        self._on_event = on_event
        self.env: dict[str, str] = {}
        """Set for every command run on this host (one of several simulated hosts on one machine
        carries its name: :data:`kimitui.sim.gpustate.SIM_NAME_ENV`)."""

    def command_env(self, env: dict[str, str] | None) -> dict[str, str] | None:
        """The host's own environment plus a command's ``env`` (the command's wins); None when both are empty."""
        if not self.env:
            return env
        return {**self.env, **(env or {})}

    @property
    def connected(self) -> bool:
        """Whether the link is up now (always, for this machine)."""
        return True

    @property
    def peer_address(self) -> str | None:
        """The address the link actually reached (``address`` may be an ~/.ssh/config alias)."""
        return self.address

    async def wait_connected(self, timeout: float | None = 30.0) -> None:
        """Return once the link is up (at once for this machine); raises HostUnavailable after ``timeout``."""

    async def forward(self, remote_host: str, remote_port: int) -> int:
        """A port on this machine's 127.0.0.1 reaching ``remote_host:remote_port`` as the host sees it."""
        raise HostError(f"{self.name}: this host has no link to forward a port through (reach it directly)")

    def emit(self, event: Event) -> None:
        """Hand an event (connection state...) to whoever listens."""
        if self._on_event is not None:
            self._on_event(event)

    def set_event_callback(self, on_event: EventCallback | None) -> None:
        self._on_event = on_event

    def connection_event(self, state: LinkState, detail: str = "", attempt: int = 0) -> None:
        self.emit(ConnectionState(host=self.name, state=state, detail=detail, attempt=attempt))

    def checked(self, argv_text: str, result: CommandResult, check: bool) -> CommandResult:
        """``result``, or (with ``check``) a HostError naming the host, the command and its stderr."""
        if check and not result.ok:
            raise HostError(
                f"{self.name}: {argv_text!r} failed (exit {result.exit_code}): {result.stderr.strip()[-500:]}"
            )
        return result

    async def connect(self) -> None:
        """Open the link (no-op for local hosts)."""

    async def close(self) -> None:
        """Close the link and stop anything still streaming."""

    @abc.abstractmethod
    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        input: str | bytes | None = None,
        env: dict[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult:
        """Run ``argv`` to completion; kill it after ``timeout`` (raises CommandTimeout)."""

    @abc.abstractmethod
    async def stream(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        merge_stderr: bool = False,
    ) -> Stream:
        """Start ``argv`` and return a :class:`Stream` over its output."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: str | bytes, *, mode: int = 0o644) -> None:
        """Write ``path`` atomically: a temp file beside it, then rename."""

    @abc.abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The file's bytes; raises HostError (naming host and path) if unreadable."""

    async def __aenter__(self) -> "Host":
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
