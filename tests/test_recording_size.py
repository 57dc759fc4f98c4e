"""What keeps a recording small: compact chunk offsets (0.1 ms integer deltas) and 1 Hz sweep progress.

Neither may change what a report computes beyond the 0.1 ms rounding, and old recordings still load.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kimitui.analysis.level_stats import level_result
from kimitui.events import (
    InFlight,
    LevelResult,
    LevelStarted,
    RequestResult,
    SweepProgress,
    SweepResult,
    SweepSpec,
    dump_event,
    parse_event,
)
from kimitui.recording import RecordingWriter, read_recording, write_recording
from kimitui.recording.writer import dump_line
from kimitui.session import Session


def _result(offs: list[float], **kw: object) -> RequestResult:
    return RequestResult(sweep_id="s", request_id="r", concurrency=1, ok=True, intended_send=1.0, sent=1.0,
                         chunk_offsets_ms=offs, **kw)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(offs=st.lists(st.floats(min_value=-1e3, max_value=1e9, allow_nan=False), max_size=40))
def test_offsets_are_floored_to_a_tenth_of_a_ms_never_rounded_up(offs: list[float]) -> None:
    back = parse_event(dump_line(_result(offs))).chunk_offsets_ms  # type: ignore[attr-defined]
    for b, o in zip(back, offs):  # the largest step not above o: floored, never rounded up
        k = round(b * 10)
        assert b == k / 10 and b <= o < (k + 1) / 10


def test_microsecond_offsets_as_the_client_floors_them() -> None:
    us = [150_000, 150_099, 150_100, 162_345, 1_000_000, 123_456_789]  # offsets in whole microseconds
    offs = [u / 1000 for u in us]
    line = dump_line(_result(offs))
    assert '"chunk_offsets_ms":{"per_ms":10,"deltas":[1500,0,1,122,8377,1224567]}' in line
    assert parse_event(line).chunk_offsets_ms == [150.0, 150.0, 150.1, 162.3, 1000.0, 123456.7]  # type: ignore[attr-defined]
    # outside a recording the event is what it was: the live session and the load process's pipe
    assert json.loads(dump_event(_result(offs)))["chunk_offsets_ms"] == offs


def test_offsets_a_step_cannot_hold_stay_floats(tmp_path: Path) -> None:
    offs = [1.0, float("inf"), 2e300]
    line = dump_line(_result(offs))
    assert '"chunk_offsets_ms":[1.0,null,2e+300]' in line  # as format 1 wrote them: nothing lost
    back = read_recording(write_recording(tmp_path / "o.jsonl", [_result(offs)])).events[0]
    assert back.chunk_offsets_ms[0] == 1.0 and math.isnan(back.chunk_offsets_ms[1])  # type: ignore[attr-defined]
    assert back.chunk_offsets_ms[2] == 2e300  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [{"per_ms": 0, "deltas": [1]}, {"per_ms": 10, "deltas": [1.5]},
                                 {"per_ms": 10}, {"per_ms": 10, "deltas": [1], "x": 1}, {"per_ms": True, "deltas": []}])
def test_a_malformed_compact_form_names_the_field(bad: dict) -> None:
    raw = json.loads(dump_event(_result([1.0])))
    raw["chunk_offsets_ms"] = bad
    with pytest.raises(ValidationError) as err:
        parse_event(raw)
    assert "chunk_offsets_ms" in str(err.value)


def _level(rng: random.Random, c: int, n: int, t0: float) -> list[RequestResult]:
    """Requests as the client measures them: chunk offsets floored to the microsecond."""
    out = []
    slot_t = [t0 + rng.uniform(0, 0.05) for _ in range(c)]
    for j in range(n):
        k = j % c
        sent = slot_t[k]
        rate = rng.uniform(40, 70)
        us, acc = [], rng.uniform(150_000, 400_000)
        for _ in range(128):
            us.append(int(acc))
            acc += rng.expovariate(rate / 1e6)
        e2e = us[-1] / 1e6 + rng.uniform(0, 0.0002)
        offs = [u / 1000 for u in us]
        gaps = [(b - a) / 1000 for a, b in zip(offs, offs[1:])]
        big = max(range(len(gaps)), key=gaps.__getitem__)
        out.append(RequestResult(
            t=sent + e2e, sweep_id="s", request_id=f"r{j}", concurrency=c, ok=True, intended_send=sent, sent=sent,
            ttft_s=offs[0] / 1000, e2e_s=e2e, completion_tokens=128, chunks=128,
            decode_tok_s=127 / ((us[-1] - us[0]) / 1e6), e2e_tok_s=128 / e2e, tpot_s=(e2e - offs[0] / 1000) / 127,
            max_gap_s=gaps[big], max_gap_at=sent + offs[big] / 1000, chunk_offsets_ms=offs))
        slot_t[k] = sent + e2e + rng.uniform(0.0001, 0.0005)
    return out


def test_level_figures_from_a_recording_are_the_live_ones(tmp_path: Path) -> None:
    rng = random.Random(3)
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[32], max_tokens=128)
    live = _level(rng, 32, 160, 1_000.0)
    recorded = [e for e in read_recording(write_recording(tmp_path / "l.jsonl.gz", live)).events]
    assert recorded != live  # the offsets did change, by less than 0.1 ms each
    a = level_result("s", 32, 0, spec, live, t=2_000.0)
    b = level_result("s", 32, 0, spec, recorded, t=2_000.0)  # type: ignore[arg-type]
    assert b.steady_tok_s == pytest.approx(a.steady_tok_s, rel=1e-3)  # a chunk at a window edge may move
    same = {"steady_tok_s"}
    assert {k: v for k, v in b.model_dump().items() if k not in same} == \
        {k: v for k, v in a.model_dump().items() if k not in same}


# --------------------------------------------------------------------------- sweep progress at 1 Hz


def _progress(t: float, c: int, done: int) -> SweepProgress:
    fl = [InFlight(request_id=f"r{c}-{j}", elapsed_s=0.1, tokens=j) for j in range(c)]
    return SweepProgress(t=t, sweep_id="s", concurrency=c, done=done, in_flight=fl, level_tokens=done * 10)


def test_progress_is_recorded_at_1_hz_and_the_last_of_each_level_is_kept(tmp_path: Path) -> None:
    session = Session(host="sim")
    seen = session.subscribe("ui", maxsize=100_000)
    writer = RecordingWriter(tmp_path / "p.jsonl.gz", hosts=["sim"])
    session.add_sink(writer)
    published = []
    t = 100.0
    for c in (8, 64):
        published.append(LevelStarted(t=t, sweep_id="s", concurrency=c))
        for k in range(43):  # 4 Hz for 10.5 s; the last one comes at the level's end
            published.append(_progress(t + k * 0.25, c, k))
        published.append(LevelResult(t=t + 10.6, sweep_id="s", concurrency=c))
        t += 11.0
    published.append(SweepResult(t=t, sweep_id="s"))
    session.publish_many(published)
    assert seen.drain() == published  # the live session gets every one
    rec = read_recording(writer.close())
    progress = [e for e in rec.events if isinstance(e, SweepProgress)]
    assert len(progress) == 2 * 12  # 0, 1, ... 10 s and the level's last
    for c in (8, 64):
        mine = [e for e in progress if e.concurrency == c]
        assert all(b.t - a.t >= 1.0 for a, b in zip(mine[:-2], mine[1:-1]))
        assert mine[-1].done == 42  # the last progress of the level
    kinds = [e.kind for e in rec.events]
    for i, kind in enumerate(kinds):  # still before its level's result
        if kind == "level_result":
            assert kinds[i - 1] == "sweep_progress" and rec.events[i - 1].done == 42  # type: ignore[attr-defined]
    assert writer.progress_dropped == 2 * (43 - 12)


def test_progress_held_back_is_written_on_close(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "c.jsonl", hosts=["sim"])
    for k in range(3):
        writer(_progress(1.0 + k * 0.25, 4, k))
    rec = read_recording(writer.close())  # the sweep was cut off: no level result followed
    assert [e.done for e in rec.events] == [0, 2]  # type: ignore[attr-defined]
