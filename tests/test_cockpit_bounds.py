"""Issue 16's bounds that a test can guard cheaply: snapshot size flat in C, bytes per kept
request result, and the cockpit's retained state after many sweeps."""

from __future__ import annotations

import random
import tracemalloc

from kimitui.loadgen.sweep import compact_in_flight
from kimitui.events import (
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    LogLine,
    RequestResult,
    Straggler,
    SweepProgress,
    SweepSpec,
    SweepStarted,
    parse_event,
)
from kimitui.recording.writer import dump_line
from kimitui.tui.model.compare_book import DETAIL_SWEEPS
from kimitui.tui.model.compact_history import HISTORY_HORIZON_S
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.packing import KeptResult, pack_figures, pack_offsets, unpack_offsets
from kimitui.tui.model.spread_data import spread_points


def rows(c: int, seed: int = 1) -> list[tuple[str, float, int, float | None]]:
    rng = random.Random(seed)
    out: list[tuple[str, float, int, float | None]] = []
    for i in range(c):
        el = rng.uniform(0.5, 90.0)
        rate = rng.gauss(6.0, 0.6)
        out.append((f"sw-20260304-101500-7f3a1c-c{c}-r{i:05d}", el, int(el * rate), rate))
    return out


def snapshot(c: int) -> SweepProgress:
    r = rows(c)
    listed, cloud = compact_in_flight(r)
    return SweepProgress(sweep_id="sw", concurrency=c, done=10, in_flight=listed, cloud=cloud, running=len(r),
                         level_tokens=1000, level_elapsed_s=30.0)


def test_progress_snapshot_is_flat_in_c_and_accounts_for_every_request():
    small, big = snapshot(64), snapshot(2048)
    assert len(dump_line(big)) < 4_000  # was 207 KB with every request listed
    assert len(dump_line(big)) < 1.6 * len(dump_line(small))
    for snap, c in ((small, 64), (big, 2048)):
        assert len(snap.in_flight) == SweepProgress.IN_FLIGHT_DETAIL and snap.n_in_flight == c
        assert len(snap.in_flight) + sum(n for _, _, n in snap.cloud) == c
    assert len(big.cloud) <= 16 * 12


def test_snapshot_lists_the_slowest_and_oldest():
    r = rows(500)
    r[7] = ("slow", 20.0, 20, 1.0)
    r[8] = ("oldest", 500.0, 3000, 6.0)
    listed, _ = compact_in_flight(r)
    assert {"slow", "oldest"} <= {f.request_id for f in listed}


def test_a_small_level_is_listed_whole_and_an_old_snapshot_loads_as_it_was():
    listed, cloud = compact_in_flight(rows(10))
    assert len(listed) == 10 and cloud == []
    old = parse_event('{"kind":"sweep_progress","t":1.0,"sweep_id":"s","concurrency":3,"in_flight":['
                      '{"request_id":"a","elapsed_s":1.0,"tokens":3}]}')
    assert isinstance(old, SweepProgress) and old.n_in_flight == 1 and old.cloud == []
    snap = snapshot(300)
    assert parse_event(dump_line(snap)) == snap


def test_spread_draws_the_cloud_counted_as_its_requests():
    m = CockpitModel()
    spec = SweepSpec(url="http://x", model="m", levels=[2048])
    m.apply([SweepStarted(sweep_id="s", spec=spec), LevelStarted(sweep_id="s", concurrency=2048)])
    snap = snapshot(2048).model_copy(update={"sweep_id": "s"})
    m.apply([snap])
    pts = spread_points(m.sweep)
    assert sum(p.n for p in pts) == 2048 and len(pts) < 300


def result(sweep: str, c: int, i: int, rng: random.Random, chunks: int = 512) -> RequestResult:
    acc, offs = 0.0, []
    for _ in range(chunks):
        acc += rng.uniform(150.0, 170.0) + rng.random() / 7
        offs.append(round(acc, 3))
    return RequestResult(sweep_id=sweep, request_id=f"{sweep}-c{c}-r{i}", concurrency=c, ok=True,
                         intended_send=1000.0, sent=1000.0, ttft_s=0.2, e2e_s=acc / 1000, completion_tokens=chunks,
                         decode_tok_s=6.0 + rng.random(), chunk_offsets_ms=offs)


def bytes_each(make, n: int = 200) -> float:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(i) for i in range(n)]
        return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()


def test_bytes_kept_per_request_result():
    rng = random.Random(3)
    src = [result("s", 64, i, rng) for i in range(200)]
    whole = bytes_each(lambda i: result("s", 64, i, random.Random(i)))
    packed = bytes_each(lambda i: KeptResult.of(src[i]))
    figures = bytes_each(lambda i: pack_figures(src[i]))
    assert whole > 15_000  # 512 float offsets: what the cockpit used to keep per request
    assert packed < 4_500  # figures + int32 0.1 ms steps
    assert figures < 1_000  # what the compare view keeps per request


def test_packed_offsets_are_what_a_recording_keeps():
    rng = random.Random(5)
    ev = result("s", 8, 1, rng, chunks=300)
    parsed = parse_event(dump_line(ev))
    assert isinstance(parsed, RequestResult)
    recorded = parsed.chunk_offsets_ms
    assert unpack_offsets(pack_offsets(ev.chunk_offsets_ms)) == recorded
    assert KeptResult.of(ev).result() == parse_event(dump_line(ev))
    odd = [1.0, float("inf")]
    assert unpack_offsets(pack_offsets(odd)) == odd


def test_retained_state_is_bounded_after_many_sweeps():
    m = CockpitModel()
    rng = random.Random(9)
    spec = SweepSpec(url="http://x", model="m", levels=[1, 4])
    sweeps = 8
    t = 0.0
    for k in range(sweeps):
        sid = f"s{k}"
        m.apply([SweepStarted(t=t, sweep_id=sid, spec=spec, profile=f"p{k % 2}")])
        for c in (1, 4):
            m.apply([LevelStarted(t=t, sweep_id=sid, concurrency=c)])
            m.apply([result(sid, c, i, rng, chunks=64) for i in range(2 * c)])
            m.apply([LevelResult(t=t, sweep_id=sid, concurrency=c, requests=2 * c, ok=2 * c, agg_tok_s=10.0 * c,
                                 stragglers=[Straggler(request_id=f"{sid}-c{c}-r0", concurrency=c)])])
            assert m.sweep is not None and not m.sweep.chunks  # a finished level keeps no chunks but its stragglers'
            t += 10
    events = m.sweep_events
    assert sum(isinstance(e, LevelResult) for e in events) == 2 * sweeps  # every sweep's level rows
    kept = {e.sweep_id for e in events if isinstance(e, RequestResult)}
    assert kept == {f"s{k}" for k in range(sweeps - DETAIL_SWEEPS, sweeps)}
    assert all(e.chunk_offsets_ms is None for e in events if isinstance(e, RequestResult))
    assert m.sweep is not None
    full = m.sweep.straggler_result(f"s{sweeps - 1}-c4-r0")
    assert full is not None and full.chunk_offsets_ms is not None and len(full.chunk_offsets_ms) == 64


def test_straggler_history_ages_out_but_keeps_the_running_sweep():
    m = CockpitModel()
    spec = SweepSpec(url="http://x", model="m", levels=[1])
    t0 = 10_000.0
    m.apply([SweepStarted(t=t0, sweep_id="s", spec=spec)])
    for i in range(4 * 3600):  # two hours at 2 Hz
        t = t0 + i * 0.5
        m.apply([GpuSample(t=t, gpus=[GpuReading(index=0, util_pct=50.0, temp_c=60.0)]),
                 LogLine(t=t, raw=f"line {i}")])
    assert len(m.history) == 6_000 + 4 * 3600  # the sweep still runs: its whole span is kept, within the caps
    m.apply([SweepStarted(t=t0 + 7200, sweep_id="s2", spec=spec)])
    m.apply([GpuSample(t=t0 + 7200.5, gpus=[GpuReading(index=0, util_pct=50.0)]), LogLine(t=t0 + 7200.5, raw="x")])
    assert len(m.history) <= 2 * (2 * HISTORY_HORIZON_S + 2)
    view = m.history.window(t0 + 7000, t0 + 7010)
    assert view.gpus[0].util_mean == 50.0 and view.gpus[0].temp_max == 60.0
    assert [line.raw for line in view.log_lines][:2] == ["line 13998", "line 13999"]
