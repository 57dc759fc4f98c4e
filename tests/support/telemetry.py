"""Helpers for telemetry stream tests: waiting on Session events, finding stray processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from kimitui.events import Event
from kimitui.session import Session


class Collector:
    """Every event the Session publishes, in order (a sink: nothing is dropped)."""

    def __init__(self, session: Session) -> None:
        self.events: list[Event] = []
        session.add_sink(self.events.append)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    async def wait_for(self, pred: Callable[[list[Event]], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not pred(self.events):
            if time.monotonic() > deadline:
                kinds = [e.kind for e in self.events[-30:]]
                errors = [getattr(e, "message", "") + " " + getattr(e, "detail", "") for e in self.of("error")][-5:]
                raise AssertionError(f"condition not met in {timeout} s; last kinds {kinds}; errors {errors}")
            await asyncio.sleep(0.05)


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
