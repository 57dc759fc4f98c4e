"""Damaged recordings: a flipped bit in a ``.jsonl.gz``, a malformed ``t`` or host, read by every reader.

Real files only: a recording is written, damaged on disk the way a disk or a copy damages it,
and read back by ``read_recording``, ``RecordingIndex`` and ``kimitui report``.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimitui.events import Note
from kimitui.recording import RecordingError, RecordingIndex, read_recording, write_recording
from tests.support.recordings import busy_minute, synthetic_sweep


def _gzipped_once(tmp_path: Path, name: str, events: list) -> Path:
    """A recording compressed in one go at close, as every recording before format 2 was."""
    plain = write_recording(tmp_path / f"{name}.jsonl", events, compress=False)
    gz = tmp_path / f"{name}.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=6, mtime=0))
    plain.unlink()
    return gz


def _lines_before(data: bytes, byte: int) -> int:
    """How many whole lines the bytes before ``byte`` decode to (they cannot depend on what follows)."""
    out = bytearray()
    pos = 0
    while pos < byte:
        d = zlib.decompressobj(wbits=31)
        try:
            out += d.decompress(data[pos:byte])
        except zlib.error:
            break
        if not d.eof:
            break
        pos = byte - len(d.unused_data)
    return out.count(b"\n")


@pytest.fixture(scope="module")
def once_gz(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, bytes]:
    tmp = tmp_path_factory.mktemp("flip")
    events = busy_minute(seconds=20) + synthetic_sweep(levels=[1, 4])
    path = _gzipped_once(tmp, "once", events)
    return path, events, path.read_bytes()


def _check_flip(path: Path, events: list, data: bytes, bit: int, out: Path) -> tuple[int, int, bool]:
    """Flip ``bit``, read: every event before it must be there.

    Returns (events before it, events read, whether reading resumed after the damage)."""
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    out.write_bytes(bytes(damaged))
    whole = _lines_before(data, bit // 8)  # line 1 is the header
    try:
        rec = read_recording(out)
        index = RecordingIndex.open(out)
    except RecordingError as exc:  # only when the header line itself was hit
        assert whole == 0, f"bit {bit}: {exc}"
        assert str(out) in str(exc) and "line 1" in str(exc)
        return 0, 0, False
    n = max(0, whole - 1)
    assert rec.events[:n] == events[:n], f"bit {bit}: an event before the damage was lost"
    assert list(index.events())[:n] == events[:n]
    if rec.events != events:
        assert rec.skipped, f"bit {bit}: events differ but nothing says where reading stopped"
    resumed = any("reading resumed at byte" in k.reason for k in rec.skipped)
    if resumed:  # what came after the damaged member is back too, to the end
        assert rec.events[-1] == events[-1]
    return n, len(rec.events), resumed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frac=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_any_flipped_bit_keeps_every_event_before_it(once_gz: tuple[Path, list, bytes], tmp_path: Path,
                                                     frac: float) -> None:
    path, events, data = once_gz
    _check_flip(path, events, data, int(frac * len(data) * 8), tmp_path / "flipped.jsonl.gz")


def test_a_flip_in_the_middle_says_where_reading_stopped(once_gz: tuple[Path, list, bytes], tmp_path: Path) -> None:
    path, events, data = once_gz
    byte = len(data) * 2 // 3
    damaged = bytearray(data)
    damaged[byte] ^= 0x10
    out = tmp_path / "mid.jsonl.gz"
    out.write_bytes(bytes(damaged))
    rec = read_recording(out)
    n = _lines_before(data, byte) - 1
    assert n > len(events) // 2
    assert len(rec.events) >= n and rec.events[:n] == events[:n]
    notes = [s for s in rec.skipped if "gzip data damaged at byte" in s.reason]
    assert len(notes) == 1, rec.skipped
    note = notes[0]
    assert note.line_no >= n + 1 and f"of {len(data)}" in note.reason
    assert f"{note.line_no - 1} lines read before it" in note.reason
    index = RecordingIndex.open(out)
    assert [s.reason for s in index.skipped if "damaged" in s.reason] == [note.reason]


# --------------------------------------------------------------------------- malformed t and host


def _with_bad_lines(tmp_path: Path, compress: bool) -> tuple[Path, list]:
    events = [Note(t=1796132100.0 + i, text=str(i)) for i in range(8)]
    path = write_recording(tmp_path / "bad.jsonl", events, compress=False)
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"t":1796132102.0', b'"t":1796132103.00450003.0250368')  # event 2
    lines[5] = lines[5].replace(b'"host":"sim"', b'"host":"s\xffm"')  # event 4: a stray byte
    lines[7] = lines[7].replace(b'"host":"sim"', b'"host":"s\x01m"')  # event 6: a control byte
    data = b"\n".join(lines)
    if compress:
        path.unlink()
        path = tmp_path / "bad.jsonl.gz"
        data = gzip.compress(data)
    path.write_bytes(data)
    return path, [e for i, e in enumerate(events) if i not in (2, 4, 6)]


@pytest.mark.parametrize("compress", [False, True])
def test_index_skips_and_reports_what_the_plain_reader_skips(tmp_path: Path, compress: bool) -> None:
    path, kept = _with_bad_lines(tmp_path, compress)
    rec = read_recording(path)
    assert rec.events == kept
    assert [s.line_no for s in rec.skipped] == [4, 6, 8]
    index = RecordingIndex.open(path)  # raised "could not convert string to float" before
    assert list(index.events()) == kept
    assert [(s.line_no, s.reason) for s in sorted(index.skipped, key=lambda s: s.line_no)] == \
        [(s.line_no, s.reason) for s in rec.skipped]


def test_report_names_file_and_line_of_a_malformed_t(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kimitui.cli import main

    events = synthetic_sweep(levels=[1, 4])
    path = write_recording(tmp_path / "sweep.jsonl", events, compress=False)
    lines = path.read_bytes().split(b"\n")
    i = next(i for i, raw in enumerate(lines) if raw.startswith(b'{"kind":"request_result"'))
    t = lines[i].split(b'"t":')[1].split(b",")[0]
    lines[i] = lines[i].replace(b'"t":' + t, b'"t":' + t + b".0250368", 1)
    path.write_bytes(b"\n".join(lines))
    assert main(["report", str(path), "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "could not convert" not in err
    assert f"{path}: line {i + 1} skipped" in err


def test_flips_all_over_a_file_written_while_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """400 flips spread over a multi-member file from the writer: nothing before a flip is lost, nothing raises."""
    from kimitui.recording import RecordingWriter
    from kimitui.recording import writer as writer_mod

    monkeypatch.setattr(writer_mod, "MEMBER_BYTES", 30_000)
    events = busy_minute(seconds=20) + synthetic_sweep(levels=[1, 4])
    w = RecordingWriter(tmp_path / "w.jsonl.gz", hosts=["sim"], progress_interval=0.0)
    for i, ev in enumerate(events):
        w(ev)
        if i % 7 == 0:
            w.flush()
    path = w.close()
    data = path.read_bytes()
    expected = read_recording(path).events  # what the file holds (chunk offsets at 0.1 ms)
    assert len(expected) == len(events)
    resumed = 0
    for k in range(400):
        bit = (k * len(data) * 8) // 400 + k % 8
        resumed += _check_flip(path, expected, data, bit, tmp_path / "f.jsonl.gz")[2]
    assert resumed > 200  # most flips cost only the rest of their member (all but those in the last)
