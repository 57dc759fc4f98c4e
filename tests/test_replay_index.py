"""The replay index on disk (``.NAME.idx``, issue 33): written on close, reused without a scan, rebuilt when
stale or damaged, never a wrong result.

Real files only: recordings written by the writer, changed on disk the way a person, a copy or a
running writer changes them, and read back by ``RecordingIndex``, against the plain reader.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import stat
from pathlib import Path

import pytest

from kimitui.events import Event, LogLine, Note
from kimitui.recording import RecordingIndex, RecordingWriter, dump_line, read_recording, write_recording
from kimitui.recording import index as index_module
from kimitui.recording.index_file import index_path
from kimitui.recording.scan import BULK_KINDS
from kimitui.recording.writer import MEMBER_BYTES
from kimitui.replay import HIGH_RATE_KINDS, ReplayController, Replayer
from kimitui.session import Session
from tests.support.recordings import busy_minute, synthetic_sweep


def _events() -> list[Event]:
    evs = busy_minute(seconds=40) + synthetic_sweep(levels=[1, 4])
    evs.append(LogLine(t=evs[-1].t + 1, raw="CUDA error: an illegal memory access", severity="error"))
    evs.append(Note(t=evs[-1].t + 1, text="the end"))
    return evs


def _same_as_a_scan(index: RecordingIndex, path: Path) -> None:
    """Everything the index says equals what a full read says."""
    rec = read_recording(path)
    assert list(index.events()) == rec.events
    assert index.skipped == rec.skipped
    assert len(index) == len(rec.events)


def _no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the recording was scanned")
    monkeypatch.setattr(index_module, "scan", refuse)


@pytest.mark.parametrize("compress", [False, True])
def test_the_writer_writes_the_index_on_close_and_a_reader_uses_it_without_a_scan(
        tmp_path: Path, compress: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events()
    path = write_recording(tmp_path / "r.jsonl", events, hosts=["sim"], compress=compress)
    idx_file = index_path(path)
    assert idx_file.name == f".{path.name}.idx" and idx_file.exists()
    assert stat.S_IMODE(idx_file.stat().st_mode) == 0o600  # private, as the recording
    _no_scan(monkeypatch)
    index = RecordingIndex.open(path)
    assert index.index_status == f"read from {idx_file.name}"
    _same_as_a_scan(index, path)


@pytest.mark.parametrize("compress", [False, True])
def test_seeks_deliver_the_same_with_the_index_as_from_memory(tmp_path: Path, compress: bool) -> None:
    events = _events()
    path = write_recording(tmp_path / "s.jsonl", events, hosts=["sim"], compress=compress)
    on_disk = RecordingIndex.open(path)
    in_memory = RecordingIndex.from_recording(read_recording(path))
    assert on_disk.index_status.startswith("read from")

    async def check() -> None:
        a = Replayer(Session(), on_disk, speed=None, start_paused=True, history_s=10.0, max_log_lines=20)
        b = Replayer(Session(), in_memory, speed=None, start_paused=True, history_s=10.0, max_log_lines=20)
        span = on_disk.end - on_disk.start
        for frac in (0.0, 0.1, 0.33, 0.5, 0.77, 0.95, 1.0):
            t = on_disk.start + frac * span
            hi = on_disk.position_after(t)
            assert list(a._rebuild(t, hi)) == list(b._rebuild(t, hi)), frac
        for kind in ("straggler", "note", "error", "profile_switch", "marker"):
            assert a.targets(kind) == b.targets(kind), kind
        assert a.targets("error") and a.targets("note")

    asyncio.run(check())


def test_a_seek_into_a_big_gzip_decodes_a_few_members_not_the_file(tmp_path: Path) -> None:
    events: list[Event] = []
    t = 1000.0
    while sum(len(dump_line(e)) for e in events[-50:]) * len(events) / 50 < 6 * MEMBER_BYTES:  # ~6 members
        events += busy_minute(t0=t, seconds=20)
        t = events[-1].t + 0.25
    writer = RecordingWriter(tmp_path / "big.jsonl.gz", hosts=["sim"], max_buffer=1 << 30, progress_interval=0.0)
    for k, ev in enumerate(events):
        writer(ev)
        if k % 200 == 0:
            writer.flush()  # as the flusher does: a member ends at a flush past MEMBER_BYTES
    index = RecordingIndex.open(writer.close())
    members = len(index._source.blocks) // 4  # type: ignore[union-attr]  # a gzip source
    assert members >= 5

    async def seek() -> None:
        rep = Replayer(Session(), index, speed=None, start_paused=True, history_s=5.0)
        await rep.seek((index.start + index.end) / 2)

    asyncio.run(seek())
    assert 1 <= index._source.decoded <= 2 < members  # type: ignore[union-attr]  # the window's members only
    forward = [index.raw(i) for i in range(len(index))]
    backward = [index.raw(i) for i in reversed(range(len(index)))]  # a walk back decodes members again
    assert backward[::-1] == forward and [index.event(i) for i in (0, len(index) // 2, len(index) - 1)] == [
        events[0], events[len(events) // 2], events[-1]]


def _append_line(path: Path, event: Event) -> None:
    line = (dump_line(event) + "\n").encode()
    with open(path, "ab") as f:
        f.write(gzip.compress(line) if path.name.endswith(".gz") else line)


@pytest.mark.parametrize("compress", [False, True])
def test_an_appended_recording_is_rescanned_and_reads_all(tmp_path: Path, compress: bool,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    events = _events()
    path = write_recording(tmp_path / "a.jsonl", events, hosts=["sim"], compress=compress)
    _append_line(path, Note(t=events[-1].t + 5, text="appended"))
    with caplog.at_level(logging.INFO, logger="kimitui.recording.index"):
        index = RecordingIndex.open(path)
    assert "stale" in index.index_status and "written to" in index.index_status
    _same_as_a_scan(index, path)
    assert index.event(len(index) - 1) == Note(t=events[-1].t + 5, text="appended")
    assert RecordingIndex.open(path).index_status.startswith("read from")  # the new index is the file's own


def test_a_truncated_recording_is_rescanned(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "t.jsonl", _events(), hosts=["sim"])
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 2 // 3])  # cut mid-line: the last line is reported, not read
    index = RecordingIndex.open(path)
    assert "stale" in index.index_status
    _same_as_a_scan(index, path)
    assert index.skipped and "truncated last line" in index.skipped[-1].reason


def test_a_replaced_recording_of_the_same_size_and_time_is_rescanned(tmp_path: Path) -> None:
    """Another recording in its place, even with the same size and mtime, is never read through the old index."""
    events = _events()
    path = write_recording(tmp_path / "x.jsonl", events, hosts=["sim"])
    before = path.stat()
    data = bytearray(path.read_bytes())
    at = data.index(b'"text":"the end"')
    data[at:at + 16] = b'"text":"THE END"'
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    index = RecordingIndex.open(path)
    assert "stale" in index.index_status
    assert index.event(len(index) - 1) == Note(t=events[-1].t, text="THE END")
    _same_as_a_scan(index, path)


@pytest.mark.parametrize("damage", ["flip", "cut", "garbage", "empty"])
def test_a_damaged_index_is_rebuilt_and_named(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    path = write_recording(tmp_path / "d.jsonl.gz", _events(), hosts=["sim"])
    idx_file = index_path(path)
    data = bytearray(idx_file.read_bytes())
    if damage == "flip":
        data[len(data) - 20] ^= 0x10
    elif damage == "cut":
        del data[len(data) // 2:]
    elif damage == "garbage":
        data = bytearray(b"not an index at all\n" * 10)
    else:
        data = bytearray()
    idx_file.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kimitui.recording.index"):
        index = RecordingIndex.open(path)
    assert index.index_status.startswith(f"built ({idx_file}: ")  # says which file and why
    assert ReplayController(index).index_status == index.index_status  # what a notice can show
    assert any(str(idx_file) in r.getMessage() for r in caplog.records)
    _same_as_a_scan(index, path)
    assert RecordingIndex.open(path).index_status.startswith("read from")  # rewritten whole


def test_an_index_that_cannot_be_written_is_kept_in_memory(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "m.jsonl", _events(), hosts=["sim"], )
    idx_file = index_path(path)
    idx_file.unlink()
    idx_file.mkdir()  # something in its place that is no file: neither readable nor replaceable
    index = RecordingIndex.open(path)
    assert "kept in memory: cannot write" in index.index_status
    assert idx_file.is_dir()
    _same_as_a_scan(index, path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_works_from_memory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = write_recording(folder / "r.jsonl", _events(), hosts=["sim"])
    index_path(path).unlink()
    folder.chmod(0o500)
    try:
        index = RecordingIndex.open(path)
        assert "kept in memory" in index.index_status
        _same_as_a_scan(index, path)
        assert not index_path(path).exists()
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize("name", ["live.jsonl", "live.jsonl.gz"])
def test_a_recording_still_being_written_is_indexed_as_it_stands(tmp_path: Path, name: str) -> None:
    events = _events()
    writer = RecordingWriter(tmp_path / name, hosts=["sim"], max_buffer=1 << 30, progress_interval=0.0)
    half = len(events) // 2
    for ev in events[:half]:
        writer(ev)
    writer.flush()
    early = RecordingIndex.open(writer.path)  # no index yet: scanned, what is flushed so far
    assert early.index_status.startswith("built (no index yet)")
    assert list(early.events()) == events[:half]
    for ev in events[half:]:
        writer(ev)
    writer.flush()
    later = RecordingIndex.open(writer.path)
    assert "stale" in later.index_status and list(later.events()) == events
    writer.close()  # plain: the file as the reader indexed it (kept); gzip: the stream ended (indexed anew)
    assert writer.index_status == (f"read from .{name}.idx" if name.endswith(".jsonl") else
                                   f"built (.{name}.idx: stale: the recording changed since it was indexed); "
                                   f"written to .{name}.idx")
    final = RecordingIndex.open(writer.path)
    assert final.index_status.startswith("read from") and list(final.events()) == events


def test_every_kind_a_seek_always_delivers_is_kept_in_the_index() -> None:
    """A seek reads the always-delivered events from the index's rare lines: every kind the replayer
    counts as high-rate may be bulk, no other."""
    assert BULK_KINDS <= HIGH_RATE_KINDS
