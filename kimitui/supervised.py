"""The one start/stop lifecycle of kimitui's background sources.

Five things run a loop in the background between ``start()`` and ``stop()``: the GPU stream
(:class:`kimitui.telemetry.gpu.GpuStream`), the log follower (:class:`kimitui.telemetry.logs.LogFollower`),
the metrics poller (:class:`kimitui.telemetry.metrics_poll.MetricsPoller`), the load generator's
health monitor (:class:`kimitui.loadgen.client_health.HealthMonitor`) and the replayer
(:class:`kimitui.replay.replayer.Replayer`).  What they share is here, once:

- :class:`SupervisedTask`: one task running ``_run()``; ``start()`` (no second task while one runs),
  ``stop()`` (cancel and wait, idempotent, never raises), ``running``.
- :class:`RestartingTask`: for the two that follow a command on a host (GPU agent, log reader): each
  life of the command is ``_life()``; when one ends by itself the next starts after a backoff that
  doubles (back to the minimum after a life that ran a while), waiting for the host's link while it
  is down.  Failures are reported as the source's own events (``_error``), never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from kimitui.host.base import Host, HostError

log = logging.getLogger(__name__)

HEALTHY_AFTER_S = 10.0
"""A life that ran longer than this was fine: the next restart comes after the minimum backoff again."""


def _being_cancelled() -> bool:
    """Whether the running task has a cancellation pending that something swallowed on its way up."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class SupervisedTask:
    """Runs :meth:`_run` in one background task between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        """Set by :meth:`stop` before the task is ended: a loop reads it to tell a stop from a failure."""

    async def _run(self) -> None:
        raise NotImplementedError

    def _task_name(self) -> str:
        """The task's name (shown by asyncio's debug output and in task dumps)."""
        return type(self).__name__

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def _start_task(self) -> bool:
        """Start the task unless it is running now; True when it was started."""
        if self.running:
            return False
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._task_name())
        return True

    async def start(self) -> None:
        self._start_task()

    async def stop(self) -> None:
        """End the task; idempotent."""
        self._stopping = True
        await self._end_task()

    async def _end_task(self, grace_s: float = 0.0) -> None:
        """Let the task end by itself within ``grace_s``, else cancel it; wait until it has ended.

        Never raises: a task that died of an exception has it logged here (each source reports
        its own failures as events while it runs)."""
        task = self._task
        if task is None:
            return
        if not task.done() and grace_s > 0:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(task), grace_s)
        if not task.done():
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if _being_cancelled():  # our caller's cancellation, not the task's: it is theirs to see
                raise
        except Exception:  # noqa: BLE001 - stop() never raises; the failure is not lost either
            log.warning("%s ended with an error", task.get_name(), exc_info=True)
        finally:
            if self._task is task:  # running (so start() waits) until it has ended
                self._task = None


class RestartingTask(SupervisedTask):
    """A command followed on ``host``, restarted with backoff whenever it ends by itself."""

    host: Host
    label = "the"
    """Names the host in failure messages ("GPU host unreachable")."""

    def __init__(self, host: Host, *, reconnect_timeout_s: float = 30.0, min_backoff_s: float = 1.0,
                 max_backoff_s: float = 30.0) -> None:
        super().__init__()
        self.host = host
        self.reconnect_timeout_s = reconnect_timeout_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s

    async def _life(self) -> bool:
        """One life of the command; True: start the next one at once, without a backoff."""
        raise NotImplementedError

    def _error(self, message: str, detail: str = "") -> None:
        """Publish a failure as the source's own event."""
        raise NotImplementedError

    async def _run(self) -> None:
        backoff = self.min_backoff_s
        while not self._stopping:
            began = time.monotonic()
            again = await self._life()
            if self._stopping:
                return
            if _being_cancelled():  # a life swallowed our cancellation (awaiting a helper it cancelled):
                raise asyncio.CancelledError  # restarting would run on for ever under a loop shutting down
            if again:
                continue
            if time.monotonic() - began > HEALTHY_AFTER_S:
                backoff = self.min_backoff_s  # it ran fine for a while: restart promptly
            await self._wait_for_host(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)

    async def _wait_for_host(self, delay: float) -> None:
        """Back off while the host is up (the command itself failed); wait for it while it is not."""
        if self.host.connected:
            await asyncio.sleep(delay)
            return
        while not self._stopping:
            try:
                await self.host.wait_connected(timeout=self.reconnect_timeout_s)
                return
            except HostError as exc:
                self._error(f"{self.label} host unreachable", str(exc))
                await asyncio.sleep(min(delay, self.max_backoff_s))
            except Exception as exc:  # noqa: BLE001 - never raise into the caller
                self._error(f"waiting for the {self.label} host failed", repr(exc))
                await asyncio.sleep(delay)
