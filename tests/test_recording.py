"""RecordingWriter / read_recording / RecordingIndex: format, crash safety, compression, round trip."""

from __future__ import annotations

import gzip
import json
import math
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimitui.events import LogLine, Marker, Note, SweepSpec
from kimitui.recording import (
    FORMAT_VERSION,
    RecordingError,
    RecordingIndex,
    RecordingWriter,
    default_recording_path,
    iter_recording,
    read_recording,
    spec_from_recording,
    write_recording,
)
from kimitui.session import Session
from tests.support.recordings import any_event, busy_minute, synthetic_sweep
from tests.support.waiting import wait_until


@pytest.mark.parametrize("name", ["a.jsonl.gz", "a.jsonl"])
def test_the_named_path_is_the_path_written(tmp_path: Path, name: str) -> None:
    session = Session(host="sim")
    writer = RecordingWriter(tmp_path / name, hosts=["sim"], meta={"profile": "ep8-tuned"}).start()
    session.add_sink(writer)
    events = busy_minute(seconds=5)
    session.publish_many(events)
    assert writer.path == tmp_path / name
    final = writer.close()
    assert final == tmp_path / name and sorted(p.name for p in tmp_path.iterdir()) == [f".{name}.idx", name]
    data = final.read_bytes()
    assert (data[:2] == b"\x1f\x8b") == name.endswith(".gz")  # compressed exactly when the name says so
    text = gzip.decompress(data) if name.endswith(".gz") else data  # a complete gzip file once closed
    header = json.loads(text.split(b"\n")[0])
    assert header["format"] == "kimitui-recording" and header["version"] == FORMAT_VERSION
    assert header["hosts"] == ["sim"] and header["meta"] == {"profile": "ep8-tuned"}
    rec = read_recording(final)
    assert rec.events == events and rec.skipped == []


def test_compressed_while_recording_and_readable_before_close(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl.gz"
    writer = RecordingWriter(path, hosts=["sim"])
    events = busy_minute(seconds=10)
    for ev in events[:50]:
        writer(ev)
    writer.flush()
    assert path.read_bytes()[:2] == b"\x1f\x8b" and path.stat().st_size < writer.bytes_in / 3
    assert read_recording(path).events == events[:50]  # every flush is decodable without the rest
    for ev in events[50:]:
        writer(ev)
    writer.close()
    assert read_recording(path).events == events


def test_a_new_gzip_member_every_few_mb_bounds_what_damage_costs(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import zlib

    from kimitui.recording import writer as writer_mod

    monkeypatch.setattr(writer_mod, "MEMBER_BYTES", 20_000)
    events = busy_minute(seconds=30)
    path = tmp_path / "m.jsonl.gz"
    w = RecordingWriter(path, hosts=["sim"])
    for ev in events:
        w(ev)
        w.flush()
    w.close()
    data = path.read_bytes()
    starts, lines, pos = [], [], 0  # each member's start and how many lines precede it
    text = b""
    while pos < len(data):
        starts.append(pos)
        lines.append(text.count(b"\n") - 1)
        d = zlib.decompressobj(wbits=31)
        text += d.decompress(data[pos:])
        pos = len(data) - len(d.unused_data)
    assert len(starts) > 4
    damaged = bytearray(data)
    damaged[(starts[1] + starts[2]) // 2] ^= 0x40  # damage inside the second member
    path.write_bytes(bytes(damaged))
    rec = read_recording(path)
    assert rec.events[: lines[1]] == events[: lines[1]]
    # reading resumed at the third member: everything from there on is back
    assert rec.events[-(len(events) - lines[2]):] == events[lines[2]:]
    assert any(f"resumed at byte {starts[2]}" in s.reason for s in rec.skipped), rec.skipped


def test_one_big_flush_is_still_written_as_members_of_member_bytes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole recording written at once (write_recording, a full buffer) ends a member at each line end past
    MEMBER_BYTES: every member decodes alone, so a replay reaches any line by decoding one (issue 33)."""
    import zlib

    from kimitui.recording import writer as writer_mod

    monkeypatch.setattr(writer_mod, "MEMBER_BYTES", 20_000)
    events = busy_minute(seconds=30)
    path = write_recording(tmp_path / "once.jsonl.gz", events, hosts=["sim"])  # one flush of everything
    data, pos, texts = path.read_bytes(), 0, []
    while pos < len(data):
        d = zlib.decompressobj(wbits=31)
        texts.append(d.decompress(data[pos:]))
        pos = len(data) - len(d.unused_data)
    longest = max(len(line) for t in texts for line in t.split(b"\n"))
    assert len(texts) > 4 and all(t.endswith(b"\n") for t in texts)  # whole lines in each
    assert all(len(t) <= 20_000 + longest for t in texts)
    assert read_recording(path).events == events


def test_flushed_within_a_second_and_readable_while_written(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "live.jsonl", hosts=["sim"], flush_interval=0.1).start()
    try:
        writer(Note(text="first"))
        wait_until(lambda: read_recording(tmp_path / "live.jsonl").events, 1.0, "the first event on disk",
                   interval=0.02)
        rec = read_recording(tmp_path / "live.jsonl")
        assert [e.text for e in rec.events] == ["first"]  # type: ignore[attr-defined]
    finally:
        writer.close()


def test_flushes_on_size_without_a_timer(tmp_path: Path) -> None:
    writer = RecordingWriter(tmp_path / "s.jsonl", hosts=["sim"], max_buffer=10, flush_interval=3600)
    for i in range(25):
        writer(Note(text=str(i)))
    assert len(read_recording(tmp_path / "s.jsonl").events) == 20
    writer.close()
    assert len(read_recording(tmp_path / "s.jsonl").events) == 25


def test_truncated_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    events = busy_minute(seconds=2)
    path = write_recording(tmp_path / "t.jsonl", events, compress=False)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # a crash mid-write
    rec = read_recording(path)
    assert rec.events == events[:-1]
    assert len(rec.skipped) == 1
    assert rec.skipped[0].line_no == len(events) + 1 and "truncated" in rec.skipped[0].reason
    idx = RecordingIndex.open(path)
    assert len(idx) == len(events) - 1 and idx.skipped[0].line_no == len(events) + 1


def test_malformed_middle_line_is_skipped_rest_kept(tmp_path: Path) -> None:
    events = [Note(t=float(i), text=str(i)) for i in range(10)]
    path = write_recording(tmp_path / "m.jsonl", events, compress=False)
    lines = path.read_text().splitlines(keepends=True)
    lines[4] = '{"kind":"note","t":3.0,"host":"sim","text":42}\n'  # wrong type (event 3)
    lines[6] = "garbage }{\n"  # not JSON (event 5)
    path.write_text("".join(lines))
    rec = read_recording(path)
    assert [e.text for e in rec.events] == ["0", "1", "2", "4", "6", "7", "8", "9"]  # type: ignore[attr-defined]
    assert [s.line_no for s in rec.skipped] == [5, 7]
    assert "text" in rec.skipped[0].reason
    # the index skips lazily but reports the same lines
    idx = RecordingIndex.open(path)
    assert [e.text for e in idx.events()] == ["0", "1", "2", "4", "6", "7", "8", "9"]  # type: ignore[attr-defined]
    assert sorted(s.line_no for s in idx.skipped) == [5, 7]


def test_streaming_reader(tmp_path: Path) -> None:
    events = synthetic_sweep()
    path = write_recording(tmp_path / "x.jsonl", events)
    reader = iter_recording(path)
    assert reader.header.hosts == ["sim"]
    assert list(reader) == events


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "line 1: empty"),
        (b"not json\n", "line 1: not JSON"),
        (b'{"kind":"note","t":1,"host":"sim","text":"x"}\n', "format"),
        (b'{"format":"kimitui-recording","version":99}\n', "newer"),
        (b'{"format":"kimitui-recording","version":1,"hosts":"sim"}\n', "'hosts'"),
    ],
)
def test_bad_header_names_file_and_line(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(RecordingError) as err:
        read_recording(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no such recording"):
        read_recording(tmp_path / "nope.jsonl")


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "o.jsonl", [Note(text="x")], compress=False)
    with pytest.raises(RecordingError, match="already exists"):
        RecordingWriter(path, hosts=["sim"])
    done = write_recording(tmp_path / "d.jsonl.gz", [Note(text="y")])
    with pytest.raises(RecordingError, match="d.jsonl.gz: already exists"):
        RecordingWriter(done, hosts=["sim"])
    assert read_recording(done).events[0].text == "y"  # type: ignore[attr-defined]


def test_old_recordings_still_load(tmp_path: Path) -> None:
    """Format 1: chunk offsets as float lists, and a live ``X.jsonl`` that was renamed ``X.jsonl.gz`` on close."""
    header = {"format": "kimitui-recording", "version": 1, "kimitui": "0.1.0", "hosts": ["sim"],
              "started": 1.0, "meta": {}}
    line = ('{"kind":"request_result","t":2.0,"host":"sim","sweep_id":"s","request_id":"r","concurrency":1,'
            '"ok":true,"intended_send":1.0,"sent":1.0,"chunk_offsets_ms":[150.123,162.456,175.0]}')
    (tmp_path / "old.jsonl.gz").write_bytes(gzip.compress((json.dumps(header) + "\n" + line + "\n").encode()))
    for path in (tmp_path / "old.jsonl.gz", tmp_path / "old.jsonl"):
        rec = read_recording(path)
        assert rec.header.version == 1 and rec.skipped == []
        assert rec.events[0].chunk_offsets_ms == [150.123, 162.456, 175.0]  # type: ignore[attr-defined]


def test_paused_writer_skips_events(tmp_path: Path) -> None:
    w = RecordingWriter(tmp_path / "p.jsonl", hosts=["sim"])
    w(Note(text="a"))
    w.paused = True
    w(Note(text="b"))
    w.paused = False
    w(Note(text="c"))
    assert [e.text for e in read_recording(w.close()).events] == ["a", "c"]  # type: ignore[attr-defined]


def test_gzip_cut_short_keeps_what_was_there(tmp_path: Path) -> None:
    events = busy_minute(seconds=30)
    path = write_recording(tmp_path / "g.jsonl.gz", events)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    rec = read_recording(path)
    assert 0 < len(rec.events) < len(events)
    assert rec.events == events[: len(rec.events)]


def test_default_recording_path(tmp_path: Path) -> None:
    when = time.mktime((2026, 3, 4, 10, 41, 7, 0, 0, -1))
    p = default_recording_path("ct200", "ep8-tuned", base=tmp_path, when=when)
    assert p == tmp_path / "recordings" / "ct200-20260304-104107-ep8-tuned.jsonl.gz"
    assert default_recording_path("a/b", None, base=tmp_path, when=when).name == "a_b-20260304-104107.jsonl.gz"
    several = default_recording_path("ct200", ["ep8-tuned", "ep8-v2", "ep8-tuned"], base=tmp_path, when=when)
    assert several.name == "ct200-20260304-104107-ep8-tuned+ep8-v2.jsonl.gz"
    many = default_recording_path("ct200", [f"profile-number-{i}" for i in range(20)], base=tmp_path, when=when)
    assert len(many.name) < 120 and many.name.endswith("+17more.jsonl.gz"), many.name


def test_a_recording_of_several_profiles_is_named_after_all_of_them(tmp_path: Path) -> None:
    from kimitui.events import ProfileState, ProfileSwitch

    when = time.mktime((2026, 3, 4, 10, 41, 7, 0, 0, -1))
    path = default_recording_path("ct200", "ep8-tuned", base=tmp_path, when=when)
    w = RecordingWriter(path, hosts=["ct200"],
                        rename=lambda ps: default_recording_path("ct200", ["ep8-tuned", *ps], base=tmp_path, when=when))
    w(ProfileState(profile="ep8-tuned", state="serving"))
    w(ProfileSwitch(from_profile="ep8-tuned", to_profile="ep8-eplb", outcome="failed"))  # never served
    w(ProfileSwitch(from_profile="ep8-tuned", to_profile="ep8-v2", outcome="ok"))
    assert w.path == path  # while recording: the name on disk
    final = w.close()
    assert final.name == "ct200-20260304-104107-ep8-tuned+ep8-v2.jsonl.gz" and w.path == final
    assert sorted(p.name for p in final.parent.iterdir()) == [f".{final.name}.idx", final.name]  # with its index
    assert len(read_recording(final).events) == 3


def test_spec_from_recording(tmp_path: Path) -> None:
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[1, 4], mode="burst", max_tokens=128,
                     prompts="random:64", seed=7)
    path = write_recording(tmp_path / "sp.jsonl", synthetic_sweep(spec=spec, levels=[1, 4]))
    assert spec_from_recording(path) == spec
    empty = write_recording(tmp_path / "e.jsonl", [Note(text="x")])
    with pytest.raises(RecordingError, match="contains no sweep"):
        spec_from_recording(empty)


def test_index_times_never_run_backwards(tmp_path: Path) -> None:
    events = [LogLine(t=10.0, raw="a"), LogLine(t=9.0, raw="late stamp"), Marker(t=11.0)]
    idx = RecordingIndex.open(write_recording(tmp_path / "i.jsonl", events))
    assert list(idx.times) == [10.0, 10.0, 11.0]
    assert idx.position(10.5) == 2 and idx.kinds == ["log_line", "log_line", "marker"]
    assert list(idx.events()) == events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(events=st.lists(any_event, max_size=8), compress=st.booleans())
def test_round_trip_any_events(tmp_path: Path, events: list, compress: bool) -> None:
    path = tmp_path / f"rt-{os.urandom(6).hex()}.jsonl"
    final = write_recording(path, events, hosts=["sim"], compress=compress)
    rec = read_recording(final)
    assert rec.skipped == []
    expected = [_as_recorded(e) for e in events]
    assert rec.events == expected
    assert list(RecordingIndex.open(final).events()) == expected


def _as_recorded(event):  # type: ignore[no-untyped-def]
    """The event a recording gives back: each chunk offset floored to the largest 0.1 ms step not above it."""
    from fractions import Fraction

    from kimitui.events import RequestResult

    offs = getattr(event, "chunk_offsets_ms", None)
    if not isinstance(event, RequestResult) or not offs or not all(-1e12 < o < 1e12 for o in offs):
        return event
    ks = [math.floor(Fraction(o) * 10) for o in offs]  # exact arithmetic, then the float step that equals o
    ks = [k + 1 if (k + 1) / 10 <= o else k for k, o in zip(ks, offs)]
    return event.model_copy(update={"chunk_offsets_ms": [k / 10 for k in ks]})


@pytest.mark.parametrize("name", ["killed.jsonl", "killed.jsonl.gz"])
def test_kill_9_loses_at_most_the_last_second(tmp_path: Path, name: str) -> None:
    import signal
    import subprocess
    import sys
    import threading

    path = tmp_path / name
    child = (
        "import sys, time\n"
        "from kimitui.events import Note\n"
        "from kimitui.recording import RecordingWriter\n"
        f"w = RecordingWriter({str(path)!r}, hosts=['sim']).start()\n"
        "i = 0\n"
        "while True:\n"
        "    ev = Note(text=str(i))\n"
        "    w(ev)\n"
        "    if i % 10 == 0: print(i, ev.t, flush=True)\n"
        "    i += 1\n"
        "    time.sleep(0.005)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parents[1])
    published: list[tuple[int, float]] = []  # (index, time) the child reported as handed to the writer

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            i, t = line.split()
            published.append((int(i), float(t)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until(lambda: published, 30, "the child's first event")
        time.sleep(1.5)  # a fixed window on purpose: the child records for longer than the one-second promise
        killed_at = time.time()
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
        reader.join(timeout=5)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # the writer never got to close: the named file
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")  # compressed while it recorded
    rec = read_recording(path)
    texts = [int(e.text) for e in rec.events]  # type: ignore[attr-defined]
    assert texts == list(range(len(texts)))  # a gap-free prefix
    old_enough = [i for i, t in published if t <= killed_at - 1.0]
    assert old_enough, "the child published nothing in time (host too loaded?)"
    assert max(old_enough) < len(texts)  # everything handed over more than a second before the kill is there
    assert all(s.reason.startswith("truncated") for s in rec.skipped)
    assert not any("damaged" in s.reason for s in rec.skipped)  # a cut stream is not damage


def test_non_finite_floats_do_not_lose_the_event(tmp_path: Path) -> None:
    from kimitui.events import InFlight, LevelResult, SweepProgress

    events = [
        LevelResult(t=1.0, sweep_id="s", concurrency=1, wall_s=float("nan"), agg_tok_s=float("inf")),
        SweepProgress(t=2.0, sweep_id="s", concurrency=1, in_flight=[InFlight(request_id="r", elapsed_s=float("inf"), tokens=1)]),
        Note(t=3.0, text="after"),
    ]
    path = write_recording(tmp_path / "nan.jsonl", events)
    for got in (read_recording(path).events, list(RecordingIndex.open(path).events())):
        assert [e.kind for e in got] == ["level_result", "sweep_progress", "note"]
        lv, sp = got[0], got[1]
        assert math.isnan(lv.wall_s) and lv.agg_tok_s is None  # type: ignore[attr-defined]  # optional: "not available"
        assert math.isnan(sp.in_flight[0].elapsed_s)  # type: ignore[attr-defined]


def test_a_value_json_cannot_hold_is_written_as_its_repr(tmp_path: Path) -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    w = RecordingWriter(tmp_path / "odd.jsonl", hosts=["sim"]).start()
    w(LogLine(t=1.0, raw="x", fields={"v": Odd()}))
    w(Note(t=2.0, text="still recorded"))
    rec = read_recording(w.close())
    assert w.events_repr == 1
    assert rec.events[0].fields == {"v": "<odd>"} and rec.events[1].text == "still recorded"  # type: ignore[attr-defined]
