"""``kimitui replay --info`` counts what ``report`` reads: a corrupt line whose prefix looks whole
is named (file line and why) and not counted, as ``report`` names it."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest

from kimitui.recording import write_recording
from tests.support.recordings import synthetic_sweep


@pytest.mark.parametrize("compress", [False, True])
def test_info_names_the_corrupt_line_report_names(tmp_path: Path, compress: bool, capsys) -> None:
    from kimitui.cli import main

    events = synthetic_sweep(levels=[1, 4])
    path = write_recording(tmp_path / "sweep.jsonl", events, compress=False)
    lines = path.read_bytes().split(b"\n")
    i = [n for n, raw in enumerate(lines) if raw.startswith(b'{"kind":"request_result"')][3]
    lines[i] = lines[i][: len(lines[i]) // 2]  # its prefix (kind, t, host) intact, the rest cut off
    data = b"\n".join(lines)
    if compress:
        path.unlink()
        path = tmp_path / "sweep.jsonl.gz"
        data = gzip.compress(data)
    path.write_bytes(data)

    assert main(["replay", str(path), "--info"]) == 0
    info = capsys.readouterr().out
    assert re.search(rf"^events\s+{len(events) - 1}$", info, re.M), info
    wanted = Counter(e.kind for e in events)
    wanted["request_result"] -= 1
    assert re.search(rf"^\s+request_result\s+{wanted['request_result']}$", info, re.M), info
    assert f"skipped    line {i + 1}: " in info, info

    assert main(["report", str(path), "--format", "json"]) == 0
    assert f"line {i + 1} skipped" in capsys.readouterr().err  # the same line, as report says it


def test_info_of_a_whole_recording_counts_every_event(tmp_path: Path, capsys) -> None:
    from kimitui.cli import main

    events = synthetic_sweep(levels=[1])
    path = write_recording(tmp_path / "whole.jsonl", events, compress=True)
    assert main(["replay", str(path), "--info"]) == 0
    info = capsys.readouterr().out
    assert re.search(rf"^events\s+{len(events)}$", info, re.M) and "skipped" not in info, info
