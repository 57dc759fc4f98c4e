"""Calling off a start from nothing: why wait for a server only to stop it?

A swap that replaced a running server always finishes or rolls back (the operator is never
left without one).  A start with nothing before it has nothing to roll back to, so its caller
may call it off — the cockpit does when it quits on the simulated host, where it would stop
that server anyway once it served.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class CalledOff(Exception):
    """The start was called off before it served (its work was cancelled)."""


async def unless_called_off(work: Awaitable[T], call_off: asyncio.Event | None) -> T:
    """``work``'s result, or CalledOff once ``call_off`` is set first (``work`` is then cancelled and awaited)."""
    task = asyncio.ensure_future(work)
    if call_off is None:
        return await task
    waiter = asyncio.ensure_future(call_off.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait([task])
    raise CalledOff()


Launch = Callable[[], Awaitable[T]]


def remembered(launch: Launch[T]) -> tuple[Launch[T], Callable[[], Awaitable[T | None]]]:
    """``launch`` run so that a cancellation cannot lose what it started, and a way to get that afterwards.

    The launch itself is shielded (a process half started is still recorded); the second callable
    waits for it and returns what it started, or None when it never ran or failed."""
    started: list[asyncio.Future[T]] = []

    def launch_once() -> Awaitable[T]:
        started.append(asyncio.ensure_future(launch()))
        return asyncio.shield(started[0])

    async def what_started() -> T | None:
        if not started:
            return None
        with contextlib.suppress(Exception):
            return await started[0]
        return None

    return launch_once, what_started
