"""Helpers for telemetry stream tests: waiting on Session events, finding stray processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from kimitui.events import ErrorEvent, Event
from kimitui.session import Session
from tests.support import waiting


class Collector:
    """Every event the Session publishes, in order (a sink: nothing is dropped)."""

    def __init__(self, session: Session) -> None:
        self.events: list[Event] = []
        session.add_sink(self.events.append)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    async def wait_for(self, pred: Callable[[list[Event]], bool], timeout: float = 30.0) -> None:
        """Until ``pred(events)``; fails with the last kinds seen and the last errors."""
        await waiting.wait_for(lambda: pred(self.events), timeout, "the events' condition", interval=0.05,
                               detail=self._story)

    def _story(self) -> str:
        kinds = [e.kind for e in self.events[-30:]]
        errors = [f"{e.message} {e.detail}" for e in self.events if isinstance(e, ErrorEvent)][-5:]
        return f"last kinds {kinds}; errors {errors}"


def processes_with(needle: str) -> list[int]:
    """Pids whose command line contains ``needle`` (ours only: /proc of this user)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmd and int(entry) != os.getpid():
            pids.append(int(entry))
    return pids


async def wait_gone(needle: str, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := processes_with(needle)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return left
