"""Waiting for a condition in a test: poll it until a deadline, then FAIL saying what never happened.

A fixed ``sleep`` followed by an assertion either wastes time (the thing happened
early) or flakes (it happened late); these wait exactly as long as needed and no
longer than ``timeout``.

    await wait_for(lambda: len(lines) >= 3, 5, "three log lines", detail=lambda: lines)
    wait_until(lambda: path.exists(), 2, f"{path} to be written")
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


def _timed_out(what: str, timeout: float, detail: Callable[[], object] | None) -> AssertionError:
    seen = f"; last seen: {detail()!r}" if detail is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")


async def wait_for(predicate: Callable[[], object], timeout: float, what: str, *,
                   interval: float = 0.01, detail: Callable[[], object] | None = None) -> None:
    """Return as soon as ``predicate()`` is true (checked every ``interval`` s, the event loop
    running in between); raise AssertionError naming ``what`` (and ``detail()``) after ``timeout``.

    ``predicate`` may be a coroutine function (``async def``): its result is awaited."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, detail)
        await asyncio.sleep(interval)


def wait_until(predicate: Callable[[], object], timeout: float, what: str, *,
               interval: float = 0.01, detail: Callable[[], object] | None = None) -> None:
    """``wait_for`` for synchronous tests (threads or subprocesses do the work meanwhile)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, detail)
        time.sleep(interval)


async def event_until(sub, pred: Callable[[Any], object], timeout: float, seen: list[Any]) -> Any:
    """The first event (already in ``seen`` or still to come on ``sub``) that satisfies ``pred``; every event
    drained is kept in ``seen``.  Times out with the kinds seen and the errors' (host, message)."""
    for ev in seen:
        if pred(ev):
            return ev
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = sub.drain()
        seen.extend(batch)
        for ev in batch:
            if pred(ev):
                return ev
        await asyncio.sleep(0.05)
    errors = [(e.host, e.message) for e in seen if e.kind == "error"]
    raise AssertionError(f"timed out; saw kinds {sorted({e.kind for e in seen})}; errors {errors}")
