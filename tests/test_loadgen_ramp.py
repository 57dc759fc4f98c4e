"""A level opens its connections a batch per turn of the event loop, never C at once (issue 33).

C=2048 started in one turn stalled the loop ~300 ms: every chunk stamp and dispatch delay of the level carried
it.  Counted here in turns of the loop (a callback that re-schedules itself each turn), never in time.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Iterator

import pytest

from kimitui.events import Event, RequestResult, RequestStarted, SweepSpec
from kimitui.loadgen import h1client, modes
from kimitui.loadgen.modes import RAMP_BATCH
from kimitui.loadgen.sweep import SweepEngine
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)


class TurnCounter:
    """Counts turns of the running loop; ``connects`` holds how many connects each turn started."""

    def __init__(self) -> None:
        self.turn = 0
        self.connects: Counter[int] = Counter()
        self.collections: list[int] = []
        """The turn in which each garbage collection started."""
        self.frozen_then: list[bool] = []
        """For each collection, whether a ramp's objects were frozen (``modes._level_frozen``) when it started."""
        self._stop = False

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.collections.append(self.turn)
            self.frozen_then.append(modes._level_frozen)

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.turn += 1
            if not self._stop:
                loop.call_soon(tick)

        loop.call_soon(tick)
        gc.callbacks.append(self._collected)

    def stop(self) -> None:
        self._stop = True
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> Iterator[TurnCounter]:
    counter = TurnCounter()
    connect = h1client.Pool.connect

    async def counted(self: h1client.Pool) -> h1client.Conn:
        counter.connects[counter.turn] += 1
        return await connect(self)

    monkeypatch.setattr(h1client.Pool, "connect", counted)
    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    monkeypatch.setattr(modes, "OWNS_COLLECTOR", True)  # as in the load worker's own process
    gc.enable()  # as it is there (a test before this one on the same worker may have left it off)
    yield counter
    counter.stop()
    if not frozen:
        gc.unfreeze()  # the test process's collector as it was
    if not enabled:
        gc.disable()


async def _run(spec: SweepSpec, turns: TurnCounter) -> list[Event]:
    events: list[Event] = []
    turns.start()
    try:
        await SweepEngine(spec, events.append).run()
    finally:
        turns.stop()
    return events


@pytest.mark.parametrize("frozen", [True, False], ids=["ramp-frozen", "ramp-below-freeze-from"])
async def test_sustained_ramp_opens_a_batch_of_connections_per_turn(minimal_server, turns: TurnCounter,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    frozen: bool) -> None:
    c = 160
    if frozen:  # as a ramp of FREEZE_FROM (1024) slots or more is, without waiting for 1024 streams here
        monkeypatch.setattr(modes, "FREEZE_FROM", c)
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[c], max_tokens=3, requests_per_level=c,
                     extra_body={"ttft_ms": 300, "tick_ms": 1})  # none ends (and frees its connection) in the ramp
    collecting = gc.isenabled()
    events = await _run(spec, turns)
    results = [e for e in events if isinstance(e, RequestResult)]
    assert len(results) == c and all(r.ok for r in results)
    assert sum(turns.connects.values()) == c
    assert max(turns.connects.values()) <= RAMP_BATCH, turns.connects  # was all 160 in one turn
    assert len(turns.connects) >= c // RAMP_BATCH
    # No collection in the ramp (one over C=2048 slots stalled the loop 11-100 ms).  A frozen ramp's objects are
    # walked by none until the level's end; a smaller ramp's may be, once its last batch has started.  In the turn
    # of the last batch the ramp ends, freezes and gives the collector back: a collection may start later in that
    # turn (a busy box hands the turn more ready I/O, and so more allocations), and it walks nothing frozen.
    ramp = range(min(turns.connects), max(turns.connects) + (1 if frozen else 0))
    walked = [t for t, was_frozen in zip(turns.collections, turns.frozen_then) if t in ramp and not was_frozen]
    assert not walked, (turns.collections, turns.frozen_then, sorted(turns.connects))
    if frozen:
        assert turns.collections  # the level's end collected what its ramp froze
    assert gc.isenabled() == collecting  # the ramp handed the collector back as it found it
    assert not modes._level_frozen  # the level's end thawed what its ramp froze
    # the start of each request stays the moment it was sent, and the ramp is no dispatch delay of its own
    started = {e.request_id: e.t for e in events if isinstance(e, RequestStarted)}
    for r in results:
        assert started[r.request_id] == r.sent and r.sent >= r.intended_send


async def test_burst_warms_its_connections_a_batch_per_turn(minimal_server, turns: TurnCounter) -> None:
    c = 100
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[c], mode="burst", max_tokens=3,
                     extra_body={"tick_ms": 1})
    events = await _run(spec, turns)
    results = [e for e in events if isinstance(e, RequestResult)]
    assert len(results) == c and all(r.ok for r in results)
    assert len({r.intended_send for r in results}) == 1  # still one burst, sent back to back
    assert max(turns.connects.values()) <= h1client.WARM_BATCH, turns.connects  # was all 100 in one turn
    assert minimal_server.state.connections == c


async def test_a_ramp_outside_the_load_workers_process_leaves_the_collector_as_it_was() -> None:
    """Only the load worker's own process freezes a level's objects (``modes.OWNS_COLLECTOR``); in any other (a
    test, a cockpit whose collector QuietCollector owns) the ramp pauses the collector and hands it back unfrozen."""
    async def slot() -> None:
        await asyncio.sleep(0)

    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    tasks = await modes.ramp(100, slot, batch=16)
    await asyncio.gather(*tasks)
    assert gc.get_freeze_count() == frozen and gc.isenabled() == enabled


def test_a_frozen_levels_finished_results_are_frozen_with_it_and_thawed_at_its_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At C >= FREEZE_FROM a young collection over the finished results' chunk lists stalled the loop 35 ms
    mid-level (C=2048); they join the level's frozen objects, and the level's end gives them all back."""
    frozen = gc.get_freeze_count()
    result = [0.5] * 256  # a finished result's chunk offsets: a list the collector would walk
    try:
        monkeypatch.setattr(modes, "_level_frozen", False)
        modes.freeze_with_level()  # a level whose ramp froze nothing freezes nothing more
        assert gc.get_freeze_count() == frozen and any(o is result for o in gc.get_objects())
        monkeypatch.setattr(modes, "_level_frozen", True)
        modes.freeze_with_level()
        assert gc.get_freeze_count() > frozen and not any(o is result for o in gc.get_objects())
        modes.thaw_level()
        assert not modes._level_frozen
    finally:
        if not frozen:
            gc.unfreeze()  # the test process's collector as it was
    if not frozen:
        assert any(o is result for o in gc.get_objects())
