"""One autopilot per tune: a lock in the tune's folder, held by the process that drives it.

Two processes driving one ``state.json`` (``kimitui tune --resume`` while the first still runs, or the
CLI resuming the cockpit's tune) overwrite each other's steps: the second records real steps as "did not
start".  ``tune.lock`` holds the driver's pid and start time; the lock itself is an exclusive ``flock`` on
it, which the kernel drops when the process dies however it dies, so a pid that was reused never keeps a
dead tune locked.  A lock file nobody holds is stale: it is taken over, and that is said.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimitui.private_files import FILE_MODE

LOCK_NAME = "tune.lock"


def _when(started: object) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


class TuneLocked(RuntimeError):
    """Another live process drives this tune: its pid, what it is and when it started, in one line."""

    def __init__(self, directory: Path, holder: dict[str, Any]) -> None:
        self.directory = directory
        self.pid = holder.get("pid")
        self.started = holder.get("started")
        by = holder.get("by") or "kimitui"
        who = f"pid {self.pid}" if self.pid is not None else "another process (its pid is being written)"
        super().__init__(
            f"tune {directory.name} is already being run by {who} ({by}, started {_when(self.started)}): "
            f"one autopilot per tune; stop that one first (Ctrl-C there, or kill {self.pid or 'it'}), then --resume")


@dataclass
class TuneLock:
    """A held lock; ``release()`` (or leaving ``held``) gives it back.  ``took_over``: the stale holder's line."""

    path: Path
    fd: int
    took_over: str | None = None

    def release(self) -> None:
        """Unlink (while still ours) then close: a process that opened the old file sees it is gone and retries."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                os.unlink(self.path)
        os.close(self.fd)
        self.fd = -1

    @property
    def held(self) -> bool:
        return self.fd >= 0


def _read(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        data = json.loads(raw) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _took_over_line(directory: Path, old: dict[str, Any]) -> str | None:
    if not old:
        return None
    pid = old.get("pid")
    state = "which is no longer running" if not _alive(pid) else "which no longer holds it"
    return (f"tune {directory.name}: took over the lock of pid {pid} ({old.get('by') or 'kimitui'}, "
            f"started {_when(old.get('started'))}), {state}")


def acquire(directory: Path, by: str) -> TuneLock:
    """Hold ``directory``'s tune lock, or raise :class:`TuneLocked` naming the live holder.

    ``by`` says who drives it (``kimitui tune``, ``the cockpit``) in the refusal another process prints."""
    path = directory / LOCK_NAME
    for _ in range(20):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise TuneLocked(directory, holder) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its holder released it (unlinked) between our open and our flock: try the new file
            os.close(fd)
            continue
        old = _read(fd)
        mine = json.dumps({"pid": os.getpid(), "started": time.time(), "by": by}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, mine, 0)
        os.fsync(fd)
        return TuneLock(path, fd, _took_over_line(directory, old))
    raise OSError(f"{path}: cannot take the tune's lock (it kept being replaced)")


@contextlib.contextmanager
def held(directory: Path, by: str) -> Iterator[TuneLock]:
    """``with held(dir, "kimitui tune") as lock:``: released when the block ends, by an error or an abort too."""
    lock = acquire(directory, by)
    try:
        yield lock
    finally:
        lock.release()
