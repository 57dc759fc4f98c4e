"""A level shared by several load processes (``SweepSpec.workers``) reports as one process would (issue 33)."""

from __future__ import annotations

import asyncio

import pytest

from kimitui.analysis.level_stats import level_result
from kimitui.events import ErrorEvent, Event, LevelResult, RequestResult, RequestStarted, SweepSpec
from kimitui.loadgen import shards
from kimitui.loadgen.sweep import SweepEngine
from tests.support.simserver import start_sim
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)


def test_a_level_splits_evenly_and_keeps_a_slot_per_process() -> None:
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[5], workers=2, warmup_requests=3)
    assert [(s.concurrency, s.budget, s.warmup) for s in shards.shares(spec, 5)] == [(3, 5, 2), (2, 5, 1)]
    assert len(shards.shares(spec.model_copy(update={"workers": 8}), 3)) == 3  # never an empty process
    timed = spec.model_copy(update={"duration_s": 5.0, "requests_per_level": None})
    assert {s.budget for s in shards.shares(timed, 4)} == {None}
    assert shards.unfit(spec.model_copy(update={"mode": "rate", "rate_rps": 1.0})) is not None
    with pytest.raises(ValueError):
        SweepSpec(url="u", model="m", levels=[1], workers=0)


class Spawns:
    """Watches the helper processes a shared level starts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, kill_index: int | None = None) -> None:
        self.pids: list[int] = []
        spawn = shards.ShardedLevel._spawn

        async def watched(level: shards.ShardedLevel, share: shards.Share) -> object:
            helper = await spawn(level, share)
            self.pids.append(helper.proc.pid)
            if share.index == kill_index:
                helper.proc.kill()  # dies before its share ends
            return helper

        monkeypatch.setattr(shards.ShardedLevel, "_spawn", watched)


async def test_two_processes_merge_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    spawns = Spawns(monkeypatch)
    async with start_sim("tp8", time_scale=50) as sim:
        spec = SweepSpec(url=sim.url, model=sim.model, levels=[6], workers=2, max_tokens=24, requests_per_level=14,
                         warmup_requests=2)
        events: list[Event] = []
        result = await asyncio.wait_for(SweepEngine(spec, events.append).run(), 120)
    assert result.outcome == "completed", result.reason
    assert len(set(spawns.pids)) == 2
    results = [e for e in events if isinstance(e, RequestResult)]
    [level] = [e for e in events if isinstance(e, LevelResult)]
    measured = [r for r in results if not r.warmup]
    assert len(measured) == 14 and sum(r.warmup for r in results) == 2 and all(r.ok for r in results)
    # one numbering over both processes, as one process gives it: the level's indices 0..15, each once
    ids = sorted(int(r.request_id.rsplit("-", 1)[1]) for r in results)
    assert ids == list(range(16))
    assert {e.request_id for e in events if isinstance(e, RequestStarted)} == {r.request_id for r in results}
    assert all(r.concurrency == 6 for r in results)
    assert level.requests == 14 and level.ok == 14
    assert level.output_tokens == sum(r.completion_tokens for r in measured) == 14 * 24
    # every figure is level_result's over the union of the raw per-request records
    union = level_result(level.sweep_id, 6, 0, spec, results, host=level.host, t=level.t, client=level.client)
    assert level == union


async def test_a_process_that_dies_is_an_error_not_a_hang(minimal_server, monkeypatch: pytest.MonkeyPatch) -> None:
    Spawns(monkeypatch, kill_index=1)
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[4], workers=2, max_tokens=50,
                     requests_per_level=4, extra_body={"ttft_ms": 3000, "tick_ms": 20})
    events: list[Event] = []
    result = await asyncio.wait_for(SweepEngine(spec, events.append).run(), 60)
    assert result.outcome == "stopped"
    assert "load process 2 of 2" in result.reason and "exited with code -9" in result.reason
    assert any(isinstance(e, ErrorEvent) and "load process 2 of 2" in e.message for e in events)
    [level] = [e for e in events if isinstance(e, LevelResult)]
    assert level.stopped and "load process 2 of 2" in level.stopped


def test_workers_is_a_sweep_option() -> None:
    import argparse

    from kimitui.commands.sweep import add_workload_args, build_spec

    parser = argparse.ArgumentParser()
    add_workload_args(parser)
    assert build_spec(parser.parse_args(["--url", "http://127.0.0.1:1", "--workers", "3"])).workers == 3
    assert build_spec(parser.parse_args(["--url", "http://127.0.0.1:1"])).workers == 1
