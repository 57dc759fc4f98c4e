"""Replay memory stays flat: the index keeps compact arrays (never the text) and a bounded cache of parsed events.

(``bench/bench_replay_memory.py`` measures RSS over a 100x replay of a 200 MB recording; these are the
cheap guards of the bounds behind it.)
"""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest

from kimitui.events import (
    Event,
    GpuReading,
    GpuSample,
    LevelStarted,
    LogLine,
    Marker,
    Note,
    RequestResult,
    SweepProgress,
)
from kimitui.recording import RecordingIndex, write_recording
from kimitui.recording.index_file import index_path
from kimitui.replay import HIGH_RATE_KINDS, LATEST_KINDS, LEVEL_DETAIL_KINDS, Replayer
from kimitui.replay.replayer import SKIP_KINDS
from kimitui.session import Session


def _many_events(n: int) -> list[Event]:
    """Telemetry, log lines and requests with chunk offsets: each parses to several times its line."""
    out: list[Event] = []
    for i in range(n):
        t = 1000.0 + i * 0.05
        if i % 3 == 0:
            out.append(GpuSample(t=t, gpus=[GpuReading(index=g, util_pct=50.0 + g, mem_used_mib=80_000.0 + i)
                                            for g in range(8)]))
        elif i % 3 == 1:
            out.append(LogLine(t=t, raw=f"Decode batch. #running-req: {i % 256}, gen throughput (token/s): 1500.0"))
        else:
            out.append(RequestResult(t=t, sweep_id="sw", request_id=f"r{i}", concurrency=8, ok=True,
                                     intended_send=t - 8.0, sent=t - 8.0, e2e_s=8.0, chunks=256, chunk_offsets_ms=[150.0 + 30.5 * k for k in range(256)]))
    out.append(Note(t=1000.0 + n * 0.05, text="end"))
    return out


@pytest.mark.parametrize("compress", [False, True])
def test_replay_keeps_at_most_the_cache_bound_of_parsed_events(tmp_path: Path, compress: bool) -> None:
    events = _many_events(3000)
    path = write_recording(tmp_path / "many.jsonl", events, hosts=["sim"], compress=compress)
    index = RecordingIndex.open(path, cache_events=16)
    held: list[int] = []

    async def play() -> int:
        session = Session()
        sub = session.subscribe("ui", maxsize=100_000)
        rep = Replayer(session, index, speed=None)
        got = 0
        await rep.start()
        while not rep.finished or not rep._finished.is_set():  # drain as a UI does, watching the cache
            got += sum(1 for e in sub.drain() if e.kind not in ("replay_state", "dropped"))
            held.append(index.cached)
            await asyncio.sleep(0)  # one turn of the loop to the replayer, as between a UI's frames
        await rep.seek((index.start + index.end) / 2)  # a seek parses thousands: the bound holds there too
        held.append(index.cached)
        await rep.stop()
        return got + sum(1 for e in sub.drain() if e.kind not in ("replay_state", "dropped"))

    got = asyncio.run(play())
    assert got >= len(events)  # every event played (and the seek's rebuild after)
    assert max(held) <= 16 and index.cached <= 16
    assert index.parsed >= len(events)  # each parsed as it played: nothing was kept in place of its bytes
    assert all(index.raw(i) is not None for i in range(len(index)))
    assert [index.event(i) for i in (0, 1, 2, len(index) - 1)] == [events[0], events[1], events[2], events[-1]]


def test_cache_bytes_bound_evicts_big_events_first(tmp_path: Path) -> None:
    events = _many_events(600)
    index = RecordingIndex.open(write_recording(tmp_path / "b.jsonl", events, hosts=["sim"]),
                                cache_events=1000, cache_bytes=20_000)
    for i in range(len(index)):
        assert index.event(i) is not None
        held = [j for j in range(len(index)) if j in index._cache]
        assert sum(len(index.raw(j) or b"") for j in held) <= 20_000 or len(held) == 1
    assert 1 <= index.cached < 1000


def test_an_evicted_event_reads_back_equal(tmp_path: Path) -> None:
    events = _many_events(200)
    index = RecordingIndex.open(write_recording(tmp_path / "e.jsonl", events, hosts=["sim"]), cache_events=4)
    first = index.event(2)
    for i in range(3, 50):
        index.event(i)
    again = index.event(2)
    assert again == first == events[2] and again is not first  # parsed again from the bytes kept


@pytest.mark.parametrize("compress", [False, True])
def test_open_never_holds_the_text(tmp_path: Path, compress: bool) -> None:
    """With its index an open holds the arrays, not the text; without one the scan peaks near the plain
    size at most (one piece at a time, no list of per-line bytes)."""
    path = write_recording(tmp_path / "big.jsonl", _many_events(6000), hosts=["sim"], compress=compress)
    peaks = []
    for _ in ("with its index", "scanned"):
        tracemalloc.start()
        try:
            index = RecordingIndex.open(path, write_index=False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        peaks.append(peak)
        index_path(path).unlink(missing_ok=True)  # the second open scans (and, told so, writes nothing)
    assert not index_path(path).exists()
    plain = index.text_bytes
    assert plain > 4_000_000
    assert peaks[0] < 0.1 * plain, (peaks, plain)
    assert peaks[1] < 1.45 * plain + 2_000_000, (peaks, plain)


def _reference_rebuild(idx: RecordingIndex, t: float, hi: int, history_s: float, max_logs: int) -> list[Event]:
    """The seek rebuild as first written: a walk over every event before ``hi`` (the module doc's rules)."""
    kinds, hosts = idx.kinds, idx.hosts
    since = idx.position(t - history_s)
    first_log, logs_left = (since if max_logs > 0 else hi), max_logs
    latest: set[int] = set()
    seen: set[tuple[str, str]] = set()
    level_start = next((i for i in range(hi - 1, -1, -1) if kinds[i] == "level_started"), 0)
    for i in range(hi - 1, since - 1, -1):
        if kinds[i] == "log_line":
            logs_left -= 1
            if logs_left == 0:
                first_log = i
        elif kinds[i] in LATEST_KINDS and (kinds[i], hosts[i]) not in seen:
            seen.add((kinds[i], hosts[i]))
            latest.add(i)
    out = []
    for i in range(hi):
        kind = kinds[i]
        if kind in HIGH_RATE_KINDS:
            if kind in LEVEL_DETAIL_KINDS:
                if i < since and i < level_start:
                    continue
            elif kind in SKIP_KINDS or i < since:
                continue
            if kind in LATEST_KINDS and i not in latest:
                continue
            if kind == "log_line" and i < first_log:
                continue
        ev = idx.event(i)
        if ev is not None:
            out.append(ev)
    return out


def test_seek_rebuild_walks_only_the_windows_but_delivers_the_same(tmp_path: Path) -> None:
    """The rebuild skips to the history window through the always-delivered events' positions."""
    events = _many_events(4000)  # 200 s of telemetry and requests
    for k in range(10):  # levels, progress, notes and markers all through it
        t = 1000.0 + k * 20.0
        events += [LevelStarted(t=t, sweep_id="sw", concurrency=k + 1), Note(t=t + 1, text=f"n{k}"),
                   Marker(t=t + 2, label=f"m{k}"),
                   SweepProgress(t=t + 3, sweep_id="sw", concurrency=k + 1, done=k, in_flight=[])]
    events.sort(key=lambda e: e.t)
    idx = RecordingIndex.open(write_recording(tmp_path / "r.jsonl", events, hosts=["sim"]), cache_events=8)

    async def check() -> None:
        rep = Replayer(Session(), idx, speed=None, start_paused=True, history_s=15.0, max_log_lines=40)
        for t in (idx.start, 1003.0, 1055.5, 1110.0, 1199.0, idx.end):
            hi = idx.position_after(t)
            assert list(rep._rebuild(t, hi)) == _reference_rebuild(idx, t, hi, 15.0, 40), t

    asyncio.run(check())
