"""Is the load generator itself the bottleneck?  Measured inside the load process.

Three signals, reported once a second as :class:`~kimitui.events.ClientHealth`:
dispatch delay (actual minus intended send, p99 over the last second's sends),
event-loop lag (how late a 50 ms timer fires; the worst in the second) and the
process's CPU use.  A saturated client shows up here instead of being mistaken
for a slow server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kimitui.bench.stats import quantile
from kimitui.events import ClientHealth, Event

TICK_S = 0.05


class HealthMonitor:
    def __init__(self, sweep_id: str, host: str, emit: Callable[[Event], None], period_s: float = 1.0) -> None:
        self.sweep_id = sweep_id
        self.host = host
        self.emit = emit
        self.period_s = period_s
        self._delays_ms: list[float] = []
        self._lag_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    def dispatched(self, delay_ns: int) -> None:
        """Note one send's dispatch delay (cheap: one append)."""
        self._delays_ms.append(delay_ns / 1e6)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last_cpu, last_wall = time.process_time(), time.perf_counter()
        while True:
            end = time.perf_counter() + self.period_s
            while time.perf_counter() < end:
                due = loop.time() + TICK_S
                await asyncio.sleep(TICK_S)
                self._lag_ms = max(self._lag_ms, (loop.time() - due) * 1000.0)
            cpu, wall = time.process_time(), time.perf_counter()
            delays, self._delays_ms = sorted(self._delays_ms), []
            self.emit(ClientHealth(
                host=self.host,
                sweep_id=self.sweep_id,
                dispatch_delay_p99_ms=round(quantile(delays, 0.99), 3) if delays else None,
                loop_lag_ms=round(self._lag_ms, 3),
                cpu_pct=round(100.0 * (cpu - last_cpu) / (wall - last_wall), 1) if wall > last_wall else None,
            ))
            self._lag_ms = 0.0
            last_cpu, last_wall = cpu, wall
