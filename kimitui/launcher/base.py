"""What every launcher can do, and the record of one start.

A launcher starts one server from a profile on a Host, follows that start's
log, tells whether it is still alive and stops it.  It never touches a process
it did not start: each start leaves a :class:`RunRecord` on the host (in the
kimitui state dir) that identifies it exactly.
"""

from __future__ import annotations

import abc
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kimitui.host.base import Host, Stream
from kimitui.profiles import Profile


class LaunchError(Exception):
    """Starting or stopping failed; the message says what and on which host."""


class RunRecord(BaseModel):
    """One start of one server: enough to find it, check it and stop it later."""

    model_config = ConfigDict(extra="ignore")

    launcher: Literal["process", "systemd"]
    profile: str
    profile_path: str | None = None
    """Where the profile was loaded from (controller side), to reload it for a rollback."""
    port: int | None = None
    run_id: str
    started_at: float = Field(default_factory=time.time)
    pid: int | None = None
    start_ticks: str | None = None
    """/proc/<pid>/stat start time in clock ticks: with ``pid``, the process identity."""
    log_path: str | None = None
    record_path: str | None = None
    unit: str | None = None
    unit_path: str | None = None
    journal_cursor: str | None = None
    """The journal position taken just before this start (systemd)."""
    simulated: bool = False
    deployment: str | None = None
    """The id shared by every process of one start of a multi-process deployment (None: a lone server)."""
    role: str | None = None
    """Its role there: ``node-1``, ``prefill-0``, ``decode-0``, ``router``..."""
    node: str | None = None
    """The configured host it runs on, when not the deployment's home."""
    entry: bool = True
    """The process readiness is judged on (a lone server; rank 0; a PD router).  Its record lists
    the deployment's other processes in ``extra["members"]``."""
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def members(self) -> list["RunRecord"]:
        """The deployment's other processes (an entry's record only), as their records."""
        out = []
        for item in self.extra.get("members") or []:
            try:
                out.append(RunRecord.model_validate(item))
            except ValueError:
                continue
        return out


def process_tag(role: str | None, node: str | None) -> str:
    """How a deployment's process is named in lines and messages: ``decode-0``, ``node-1@gpu-b``."""
    return f"{role or 'server'}@{node}" if node else (role or "server")


class Launcher(abc.ABC):
    """Start, follow, check and stop a server on one host."""

    kind: str = "?"
    simulated: bool = False
    """Whether it starts the simulator instead of SGLang (only on the simulated host)."""
    next_run_id: str | None = None
    """The run id the next start takes (the swap announces it to the host's supervisor first)."""

    def __init__(self, host: Host) -> None:
        self.host = host

    @abc.abstractmethod
    async def state_dir(self) -> str:
        """kimitui's state dir on the host (run records, logs, the swap lock)."""

    @abc.abstractmethod
    async def current(self) -> RunRecord | None:
        """The server kimitui started on this host that still runs, if any."""

    @abc.abstractmethod
    async def start(self, profile: Profile) -> RunRecord:
        """Start ``profile`` (nothing else may be running); returns at once, not when ready."""

    @abc.abstractmethod
    async def relaunch(self, record: RunRecord) -> RunRecord:
        """Start again exactly what ``record`` ran (the rollback path: no profile file needed)."""

    @abc.abstractmethod
    async def stop(self, record: RunRecord, grace_s: float = 10.0) -> str:
        """Stop that start (TERM, then KILL after ``grace_s``); returns how it ended."""

    @abc.abstractmethod
    async def alive(self, record: RunRecord) -> bool:
        """Whether that start still runs."""

    @abc.abstractmethod
    async def follow_log(self, record: RunRecord) -> Stream:
        """This start's log lines only, from its first line, as they come."""

    async def read_log_tail(self, record: RunRecord, lines: int = 40) -> list[str]:
        """The last lines of this start's log (for a failure report)."""
        return []

    def begin_swap(self) -> None:
        """A new swap starts: what earlier starts changed is no longer to be undone."""

    async def restore_previous(self, record: RunRecord | None) -> None:
        """Undo what :meth:`start` changed on the host during this swap, besides the process (systemd: the unit)."""
