"""The sweep's load modes, one object each: how a mode launches a level's requests.

A mode drives one level through :class:`Level`, the engine's surface for it
(:class:`kimitui.loadgen.sweep.SweepEngine`), within :class:`LevelPlan` (how many measured requests, or for
how long).  The names are :data:`kimitui.events.SWEEP_MODES`, and how many requests a level gets is
:meth:`kimitui.events.SweepSpec.level_requests`: both written once, in the domain.

* ``burst`` - the seeds' way: C requests at once, wait for all (repeated in rounds when the plan asks for more).
* ``sustained`` - C slots each send the next request the moment their last one ends.  Warm-up
  requests run in the same slots (so they obey the cap) and a slot that finishes its warm-up goes
  straight on to measured work: no drain.
* ``rate`` - Poisson arrivals at ``rate_rps`` with at most C in flight; an arrival that finds C in
  flight waits, and its intended send time stays the arrival (coordinated omission is visible as
  dispatch delay, not hidden).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kimitui.events import SWEEP_MODES, SweepMode, SweepSpec
from kimitui.loadgen import h1client
from kimitui.loadgen.client import RequestTrace

_perf_ns = time.perf_counter_ns
T = TypeVar("T")


@dataclass(frozen=True)
class LevelPlan:
    """One level's size: C, and its measured requests (``budget``) or, when None, its measured span."""

    concurrency: int
    budget: int | None
    span_ns: float
    """Nanoseconds of measured dispatch when the level is timed (``duration_s``); inf otherwise."""

    @classmethod
    def of(cls, spec: SweepSpec, concurrency: int) -> LevelPlan:
        duration_s = spec.duration_s
        return cls(concurrency, spec.level_requests(concurrency),
                   duration_s * 1e9 if duration_s is not None else math.inf)


class Level(Protocol):
    """What a mode may use of the engine while it runs one level."""

    @property
    def spec(self) -> SweepSpec: ...

    @property
    def repeat(self) -> int: ...

    @property
    def pool(self) -> h1client.Pool: ...

    @property
    def stopped(self) -> bool:
        """Dispatch no more (abort, a stop rule, the level's time limit)."""
        ...

    def prepare(self, idx: int, warm: bool, intended_ns: int) -> tuple[RequestTrace, bytes]: ...

    async def one(self, idx: int, warm: bool, intended_ns: int, prepared: tuple[RequestTrace, bytes] | None = None,
                  conn: h1client.Conn | None = None) -> RequestTrace: ...

    async def hold_after_failure(self) -> bool: ...

    async def sleep_unless_stopped(self, seconds: float) -> None: ...


class Mode(Protocol):
    """One load mode."""

    name: SweepMode

    def check(self, spec: SweepSpec) -> str | None:
        """Why ``spec`` cannot run in this mode (the sweep fails with it), or None."""
        ...

    async def run(self, level: Level, plan: LevelPlan) -> None:
        """Send the level's requests; return once every one has ended."""
        ...


RAMP_BATCH = 16
"""Slots a ramp starts in one turn of the event loop.  A slot's set-up (its request's bytes, a connect, then
its send and announcement) takes ~250 us of wall at load average 5 on 2 cores, so 16 keep a turn to a few
ms; C=2048 started in one turn stalled the loop 290-380 ms (issue 33), and every stream's chunk stamps and
the level's dispatch delays carried it."""


OWNS_COLLECTOR = False
"""True in the load worker's own process (``worker.main`` sets it): there a large level's objects are frozen after
the ramp and thawed at its end.  Anywhere else (a test, a process that also runs a cockpit, whose collector
``QuietCollector`` owns) freezing would leave the host process's collector changed: the ramp only pauses it."""

FREEZE_FROM = 1024
"""The smallest ramp whose objects are frozen (in the load worker's own process).  A full collection over a
ramp's objects (~38 a slot, the imports already frozen) took 0.2 / 0.6 / 3.3 / 11.4 ms at C = 64 / 256 / 1024 /
2048 on this 2-core box, and 50-100 ms at C=2048 on a busy one; the thaw at the level's end walks the imports
again (~46k objects, ~31 ms).  Below this C the walk is cheaper than the thaw: at C=64 the thaw was 4 % of the
level's CPU (``bench/bench_bare_client.py``)."""

_level_frozen = False
"""The running level's ramp froze its objects: :func:`thaw_level` gives them back to the collector."""


async def ramp(n: int, start: Callable[[], Coroutine[Any, Any, T]],
               batch: int = RAMP_BATCH) -> list[asyncio.Task[T]]:
    """``n`` tasks of ``start()``, created ``batch`` per turn of the loop (a yield between batches).

    A slot's intended send time is when its task first runs, so a slot the ramp holds back a few
    turns carries no dispatch delay for it: what the ramp spreads is set-up, not a late send.  The
    collector is off meanwhile, and from :data:`FREEZE_FROM` slots what the ramp made is frozen after it
    (:func:`thaw_level` at the level's end): at C=2048 a full collection in or just after it took 11-100 ms."""
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[T]] = []
    collecting = gc.isenabled()
    gc.disable()  # the ramp makes C slots' objects at once: a collection over them stalled the loop 50-100 ms
    try:
        for i in range(n):
            if i and i % batch == 0:
                await asyncio.sleep(0)  # the previous batch runs (its connects go out) in this turn, not all at once
            tasks.append(loop.create_task(start()))
        await asyncio.sleep(0)  # the last batch's first step
    finally:
        if collecting:
            if OWNS_COLLECTOR and n >= FREEZE_FROM:
                global _level_frozen
                gc.freeze()  # the level's in-flight machinery: no collection walks it again until the level ends
                _level_frozen = True
            gc.enable()
    return tasks


def freeze_with_level() -> None:
    """A frozen level's finished results join its frozen objects: a young collection over 1,000 results' chunk
    lists (each float visited) took 35 ms mid-level at C=2048, and the health monitor reads a stall of 50 ms as a
    client that distorted the level.  The freeze is O(1); :func:`thaw_level` collects them with the rest."""
    if _level_frozen:
        gc.freeze()


def thaw_level() -> None:
    """At a level's end, nothing in flight: what its ramp froze goes back to the collector, collected once,
    and what lives on (the imports) is frozen again.  Nothing to do when the ramp froze nothing."""
    global _level_frozen
    if _level_frozen:
        _level_frozen = False
        gc.unfreeze()
        gc.collect()
        gc.freeze()


class Sustained:
    name: SweepMode = "sustained"

    def check(self, spec: SweepSpec) -> str | None:
        return None

    async def run(self, level: Level, plan: LevelPlan) -> None:
        warm = level.spec.warmup_requests
        budget, span_ns = plan.budget, plan.span_ns
        counter = iter(range(1 << 62))
        measure_start: list[int] = []

        def take() -> tuple[int, bool] | None:
            if level.stopped:
                return None
            idx = next(counter)
            if idx < warm:
                return idx, True
            if budget is not None:
                return (idx, False) if idx - warm < budget else None
            now = _perf_ns()
            if not measure_start:
                measure_start.append(now)
            return (idx, False) if now - measure_start[0] < span_ns else None

        async def slot() -> None:
            intended = _perf_ns()
            while (job := take()) is not None:
                done = await level.one(job[0], job[1], intended)
                intended = done.end_ns or _perf_ns()  # the slot was free from the moment its request ended
                if not done.ok and not done.warmup and await level.hold_after_failure():
                    intended = _perf_ns()  # held back by the stop rule, not free: no dispatch delay

        await asyncio.gather(*await ramp(plan.concurrency, slot))


class Burst:
    name: SweepMode = "burst"

    def check(self, spec: SweepSpec) -> str | None:
        return None

    async def run(self, level: Level, plan: LevelPlan) -> None:
        c = plan.concurrency
        warm = level.spec.warmup_requests
        if warm:
            sem = asyncio.Semaphore(c)

            async def warm_one(i: int) -> None:
                async with sem:
                    if not level.stopped:
                        await level.one(i, True, _perf_ns())

            await asyncio.gather(*(warm_one(i) for i in range(warm)))
        budget = plan.budget
        rounds = math.ceil(budget / c) if budget is not None else None
        start = _perf_ns()
        idx, r = warm, 0
        while not level.stopped:
            if rounds is not None and r >= rounds:
                break
            if rounds is None and _perf_ns() - start >= plan.span_ns:
                break
            n = c if budget is None else min(c, budget - r * c)
            await self._round(level, idx, n)
            idx += n
            r += 1

    @staticmethod
    async def _round(level: Level, idx: int, n: int) -> None:
        """``n`` requests written back to back, each stamped just before its write; wait for all.

        Everything but the sends happens before the clock starts: request bytes, traces and
        connections (set-up is not dispatch: a refused one is tried again, and reported, at send)."""
        pool = level.pool
        prepared = []
        for k in range(n):  # the bytes of RAMP_BATCH requests a turn: not C set-ups in one stall of the loop
            if k and k % RAMP_BATCH == 0:
                await asyncio.sleep(0)
            prepared.append(level.prepare(idx + k, False, 0))
        with contextlib.suppress(h1client.ConnectFailed):
            await pool.warm(n)
        loop = asyncio.get_running_loop()
        batch: list[tuple[h1client.Conn, RequestTrace, bytes]] = []
        conns: list[h1client.Conn | None] = []
        for trace, data in prepared:  # pair each request with an open connection and prime it
            conn = None
            while pool.idle and conn is None:
                conn = pool.idle.pop()
                conn = conn if conn.open else None
            if conn is not None:
                conn.prime(trace)
                batch.append((conn, trace, data))
            conns.append(conn)
        gc_was_on = gc.isenabled()
        gc.disable()  # a collection in the middle of the dispatch would show up as dispatch delay
        try:
            t0 = h1client.send_burst(batch)
            for trace, _ in prepared:
                trace.intended_ns = t0  # those without a connection connect now; that shows as their delay
            tasks = [loop.create_task(level.one(idx + k, False, t0, prepared[k], conns[k])) for k in range(n)]
            await asyncio.gather(*tasks)
        finally:
            if gc_was_on:
                gc.enable()


class Rate:
    name: SweepMode = "rate"

    def check(self, spec: SweepSpec) -> str | None:
        return None if spec.rate_rps else "mode 'rate' needs rate_rps > 0"

    async def run(self, level: Level, plan: LevelPlan) -> None:
        spec = level.spec
        c = plan.concurrency
        rate = float(spec.rate_rps or 1.0)
        rng = random.Random(spec.seed * 7919 + c * 31 + level.repeat)
        sem = asyncio.Semaphore(c)
        budget, span_ns = plan.budget, plan.span_ns
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()
        start = next_ns = _perf_ns()
        idx = 0

        async def one(i: int, warm: bool, intended: int) -> None:
            try:
                done = await level.one(i, warm, intended)
                if not done.ok and not warm:
                    await level.hold_after_failure()
            finally:
                sem.release()

        while not level.stopped:
            warm = idx < spec.warmup_requests
            if not warm:
                if budget is not None and idx - spec.warmup_requests >= budget:
                    break
                if budget is None and next_ns - start >= span_ns:
                    break
            next_ns += int(rng.expovariate(rate) * 1e9)
            wait = (next_ns - _perf_ns()) / 1e9
            if wait > 0:
                await level.sleep_unless_stopped(wait)
            await sem.acquire()
            if level.stopped:
                sem.release()
                break
            task = loop.create_task(one(idx, warm, next_ns))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            idx += 1
        if tasks:
            await asyncio.gather(*tasks)


_OBJECTS: dict[SweepMode, Mode] = {m.name: m for m in (Sustained(), Burst(), Rate())}
MODES: dict[SweepMode, Mode] = {name: _OBJECTS[name] for name in SWEEP_MODES}
"""The mode object of each name in :data:`kimitui.events.SWEEP_MODES` (in that order)."""


def mode_for(name: SweepMode) -> Mode:
    return MODES[name]
