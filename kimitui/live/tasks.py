"""The live controller's background tasks, in one place.

A task that fails is not lost in the event loop's log: it becomes an ``ErrorEvent`` on
screen.  Shutdown cancels what is still running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

ErrorSink = Callable[[str, str], None]
"""``(source, message)``: how a part says something went wrong (the controller shows it)."""


class Background:
    """Tasks spawned by the controller and its parts."""

    def __init__(self, on_error: ErrorSink) -> None:
        self._on_error = on_error
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._on_error("cockpit", f"background task failed: {task.exception()}")

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
