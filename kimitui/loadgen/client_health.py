"""Is the load generator itself the bottleneck?  Measured inside the load process.

Three signals, reported once a second as :class:`~kimitui.events.ClientHealth`:
dispatch delay (actual minus intended send, p99 over the last second's sends),
event-loop lag (how late a 50 ms timer fires; the worst in the second) and the
process's CPU use.  A saturated client shows up here instead of being mistaken
for a slow server.

Per level (``begin_level()``/``end_level()``) the monitor keeps its own figures
at the 50 ms tick, not from the once-a-second events: a level shorter than a
second still gets them, and a single 500 ms stall is caught as 500 ms of lag
(a stall still under way when the level ends counts too).  The summary is a
:class:`~kimitui.events.ClientSummary`; :func:`kimitui.analysis.level_stats.client_distortion`
judges it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kimitui.analysis.level_stats import quantile
from kimitui.events import ClientHealth, ClientSummary, Event
from kimitui.supervised import SupervisedTask

TICK_S = 0.05


class _Level:
    """What one level has seen so far."""

    def __init__(self, cpu: float, wall: float) -> None:
        self.cpu0, self.wall0 = cpu, wall
        self.lags_ms: list[float] = []
        self.cpu_pcts: list[float] = []
        self.delay_p99s_ms: list[float] = []
        self.samples = 0


class HealthMonitor(SupervisedTask):
    """Ticks every 50 ms while started; one :class:`~kimitui.events.ClientHealth` per ``period_s``."""

    def __init__(self, sweep_id: str, host: str, emit: Callable[[Event], None], period_s: float = 1.0) -> None:
        super().__init__()
        self.sweep_id = sweep_id
        self.host = host
        self.emit = emit
        self.period_s = period_s
        self._delays_ms: list[float] = []
        self._level_delays_ms: list[float] = []
        self._lag_ms = 0.0
        self._due: float | None = None
        self._level: _Level | None = None
        self._last_cpu, self._last_wall = time.process_time(), time.perf_counter()

    def dispatched(self, delay_ns: int) -> None:
        """Note one send's dispatch delay (cheap: two appends)."""
        ms = delay_ns / 1e6
        self._delays_ms.append(ms)
        if self._level is not None:
            self._level_delays_ms.append(ms)

    async def stop(self) -> None:
        """Stop ticking; the last, partial second is still reported (a stall in it is not lost)."""
        if self._task is not None:
            await super().stop()
            if time.perf_counter() - self._last_wall >= TICK_S:
                self._tick()

    # -- per level -----------------------------------------------------------------
    def begin_level(self) -> None:
        """Start collecting one level's figures (any previous level's are dropped)."""
        self._level = _Level(time.process_time(), time.perf_counter())
        self._level_delays_ms = []

    def end_level(self) -> ClientSummary | None:
        """The level's client figures; None if ``begin_level()`` was not called."""
        lv, self._level = self._level, None
        if lv is None:
            return None
        lags = list(lv.lags_ms)
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            now = None
        if self._task is not None and self._due is not None and now is not None and now > self._due:
            lags.append((now - self._due) * 1000.0)  # a stall still under way: its tick has not fired yet
        cpu, wall = time.process_time(), time.perf_counter()
        cpus = list(lv.cpu_pcts)
        if wall - lv.wall0 > 0.05:
            cpus.append(100.0 * (cpu - lv.cpu0) / (wall - lv.wall0))
        delays = sorted(self._level_delays_ms)
        self._level_delays_ms = []
        p99s = list(lv.delay_p99s_ms) + ([quantile(delays, 0.99)] if delays else [])
        lags.sort()
        return ClientSummary(
            samples=lv.samples,
            loop_lag_max_ms=round(lags[-1], 3) if lags else None,
            loop_lag_p50_ms=round(quantile(lags, 0.5), 3) if lags else None,
            cpu_max_pct=round(max(cpus), 1) if cpus else None,
            dispatch_delay_max_p99_ms=round(max(p99s), 3) if p99s else None,
        )

    # -- the ticker ------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self._last_cpu, self._last_wall = time.process_time(), time.perf_counter()
        while True:
            end = time.perf_counter() + self.period_s
            while time.perf_counter() < end:
                self._due = loop.time() + TICK_S
                await asyncio.sleep(TICK_S)
                lag = max(0.0, (loop.time() - self._due) * 1000.0)
                self._due = None
                self._lag_ms = max(self._lag_ms, lag)
                if self._level is not None:
                    self._level.lags_ms.append(lag)
            self._tick()

    def _tick(self) -> None:
        """Emit one ClientHealth for the time since the last one."""
        cpu, wall = time.process_time(), time.perf_counter()
        last_cpu, last_wall = self._last_cpu, self._last_wall
        delays, self._delays_ms = sorted(self._delays_ms), []
        cpu_pct = round(100.0 * (cpu - last_cpu) / (wall - last_wall), 1) if wall > last_wall else None
        p99 = round(quantile(delays, 0.99), 3) if delays else None
        self.emit(ClientHealth(
            host=self.host,
            sweep_id=self.sweep_id,
            dispatch_delay_p99_ms=p99,
            loop_lag_ms=round(self._lag_ms, 3),
            cpu_pct=cpu_pct,
        ))
        lv = self._level
        if lv is not None:
            lv.samples += 1
            whole = last_wall >= lv.wall0  # the whole second inside the level
            if cpu_pct is not None and whole:
                lv.cpu_pcts.append(cpu_pct)
            if p99 is not None and whole:
                lv.delay_p99s_ms.append(p99)
        self._lag_ms = 0.0
        self._last_cpu, self._last_wall = cpu, wall
