"""Causes in ``kimitui report`` (issue 18): the seeds' C=1 straggler is "EPLB rebalance" in md, json and csv, its
level's loss is accounted for, ``--vs`` says what explains a regression, and a straggler nothing explains is
"unknown" everywhere.  The recordings are written from events alone, as a recording made before causes
existed: the attribution comes from the events they always held.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from kimitui.events import LogLine
from kimitui.recording import write_recording
from kimitui.report import summarize
from kimitui.report.compare import compare
from kimitui.report.render import render_csv, render_json, render_md
from tests.support.causecase import back_to_back, eplb_lines, level_of
from tests.support.gapcase import gap_case_events


def _write(tmp: Path, name: str, events: list) -> Path:
    return write_recording(tmp / name, sorted(events, key=lambda e: e.t))


def test_the_seeds_straggler_in_every_format(tmp_path: Path) -> None:
    path = _write(tmp_path, "story.jsonl", gap_case_events())
    s = summarize(path)
    md = render_md([s])
    assert "**cause: EPLB rebalance, 35.6 s, covers 99 % of the 35.6 s gap" in md
    assert "(high confidence)" in md and "rebalance end time=35.6s" in md
    assert "Where the throughput went" in md and "of the loss is one EPLB rebalance" in md
    level = json.loads(render_json([s]))["recordings"][0]["sweeps"][0]["levels"][0]
    (strag,) = level["stragglers"]
    assert (strag["cause"], strag["confidence"]) == ("eplb", "high") and strag["coverage"] > 0.95
    assert strag["headline"].startswith("EPLB rebalance, 35.6 s") and strag["shares"][0]["cause"] == "eplb"
    assert level["loss"]["main_cause"] == "eplb" and level["loss"]["by_cause"]["eplb"] > 35
    row = next(csv.DictReader(io.StringIO(render_csv([s]))))
    assert row["loss_main_cause"] == "eplb" and row["straggler_causes"] == "eplb:1"
    assert float(row["expected_tok_s"]) > float(row["agg_tok_s"])


def test_a_straggler_nothing_explains_is_unknown_everywhere(tmp_path: Path) -> None:
    events = [e for e in gap_case_events() if not (isinstance(e, LogLine) and "rebalance" in e.raw)]
    s = summarize(_write(tmp_path, "bare.jsonl", events))
    md = render_md([s])
    assert "**cause: Unknown: nothing kimitui saw covers the 35.6 s gap" in md
    (strag,) = json.loads(render_json([s]))["recordings"][0]["sweeps"][0]["levels"][0]["stragglers"]
    assert (strag["cause"], strag["confidence"]) == ("unknown", "none")
    assert next(csv.DictReader(io.StringIO(render_csv([s]))))["straggler_causes"] == "unknown:1"


def test_vs_says_what_explains_a_regression(tmp_path: Path) -> None:
    """B stalls in 6 of its 12 requests, each an EPLB rebalance of 5 s: beyond noise, and explained."""
    a = _write(tmp_path, "a.jsonl", level_of(back_to_back(12, {})))
    stalled = back_to_back(12, dict.fromkeys(range(0, 12, 2), 5.0))
    rebalances = [line for r in stalled if (r.max_gap_s or 0) > 1 for line in eplb_lines(r.sent + 2.0, 5.0)]
    b = _write(tmp_path, "b.jsonl", [*level_of(stalled), *rebalances])
    cmp = compare(a, b)
    assert cmp.verdict == "regressed", cmp.headline()
    assert cmp.headline().startswith("regression, explained by 6 EPLB rebalances, 30 s in all")
    lines = cmp.summary_lines()
    assert lines[0].endswith("explained by 6 EPLB rebalances, 30 s in all")
    assert any(line.startswith("B at C=1: aggregate") and "of the loss is 6 EPLB rebalances" in line for line in lines)
    assert "explained by 6 EPLB rebalances" in render_md([summarize(a), summarize(b)], cmp)
