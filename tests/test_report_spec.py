"""``kimitui report`` with speculative decoding and EPLB: accept length and rate per level, the collapse lines,
the speed-up of B over A per C, EPLB rebalances per level, and the verdict's sentences, in md, text, json and csv.

Synthetic recordings are the seeds' sweeps (tests/support/recordings.py) as a drafter would have run them: each
request carries the figures SGLang 0.5.23 puts in ``sglext.spec_tokens_details`` (managers/tokenizer_manager.py
``TokenizerManager._calculate_spec_decoding_metrics``: accept length = completion tokens / verify passes, bonus
token included; accept rate = correct drafts / (verify passes x (draft tokens - 1))) and each level the figures
the real ``kimitui.analysis.level_stats.spec_figures`` makes of them.  EPLB lines are 0.5.23's own
(eplb/eplb_manager.py ``EPLBManager.rebalance`` and ``_check_rebalance_needed``), printed by every rank, parsed by
the real ``kimitui.sglang.log.to_event``.  The last test runs real short sweeps on the simulated host.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from kimitui.analysis.level_stats import spec_figures
from kimitui.cli import main
from kimitui.events import (
    Event, LevelResult, LevelStarted, LogLine, Percentiles, RequestResult, ServerInfo, SpecTokens, SweepSpec,
)
from kimitui.host.local import LocalHost
from kimitui.launcher.drift import fetch_server_info
from kimitui.live.sweeps import with_server_caps
from kimitui.loadgen.runner import SweepRunner
from kimitui.recording import RecordingWriter, write_recording
from kimitui.report import compare, summarize
from kimitui.report.render import LEVEL_COLUMNS, render_csv, render_json, render_md, render_text
from kimitui.session import Session
from kimitui.sglang.log import to_event
from kimitui.telemetry.logs import LogFollower
from tests.support.recordings import synthetic_sweep
from tests.support.simserver import SimServerProcess, start_sim

LEVELS = [1, 8, 32, 64]
TUNED = {"ep_size": 8, "enable_eplb": False}
DFLASH = {**TUNED, "speculative_algorithm": "DFLASH", "speculative_dflash_block_size": 16}
EPLB = {**TUNED, "enable_eplb": True}
BLOCK = 16
ACCEPT = {1: 6.4, 8: 4.0, 32: 3.2, 64: 2.0}
"""Accept length per C (512 tokens / these = whole verify passes).  Gains 5.4, 3.0, 2.2, 1.0: under half of
C=1's from C=32 on (kimitui.analysis.spec's collapse rule)."""
SPEED = {1: 2.1, 8: 1.8, 32: 1.3, 64: 1.0}
"""Per-request decode and aggregate, drafter / baseline: B's peak stays at C=64 (1.0 x 1600 > 1.3 x 1156)."""


def plain(tmp: Path, name: str = "tuned", *, seed: int = 1, **kw: Any) -> Path:
    events = synthetic_sweep(seed=seed, requests_per_level=20, levels=LEVELS, knobs=TUNED, **kw)
    return write_recording(tmp / f"{name}.jsonl", events, hosts=["sim"])


def _scaled(p: Percentiles, f: float) -> Percentiles:
    return Percentiles(**{q: None if v is None else v * f for q, v in p.model_dump().items()})


def drafted(events: list[Event], accept: dict[int, float] = ACCEPT, speed: dict[int, float] = SPEED) -> list[Event]:
    """The sweep as a drafter ran it: decode rates x ``speed[C]``, each completed request's sglext figures, each
    level's from its requests (the real ``spec_figures``)."""
    out: list[Event] = []
    level: list[RequestResult] = []
    for ev in events:
        if isinstance(ev, LevelStarted):
            level = []
        elif isinstance(ev, RequestResult) and ev.ok:
            f, verify = speed[ev.concurrency], round(ev.completion_tokens / accept[ev.concurrency])
            correct = ev.completion_tokens - verify  # every pass but its bonus token was an accepted draft
            ev = ev.model_copy(update={
                "decode_tok_s": (ev.decode_tok_s or 0) * f, "tpot_s": (ev.tpot_s or 0) / f,
                "spec": SpecTokens(accept_length=ev.completion_tokens / verify, verify_ct=verify,
                                   correct_drafts=correct, proposed_drafts=verify * (BLOCK - 1),
                                   accept_rate=correct / (verify * (BLOCK - 1)))})
            level.append(ev)
        elif isinstance(ev, LevelResult):
            f = speed[ev.concurrency]
            ev = ev.model_copy(update={"agg_tok_s": (ev.agg_tok_s or 0) * f, "steady_tok_s": (ev.steady_tok_s or 0) * f,
                                       "decode_tok_s": _scaled(ev.decode_tok_s, f), "tpot": _scaled(ev.tpot, 1 / f),
                                       **spec_figures(level)})
        out.append(ev)
    return out


def dflash(tmp: Path, name: str = "dflash", **kw: Any) -> Path:
    events = synthetic_sweep(seed=1, requests_per_level=20, levels=LEVELS, knobs=DFLASH, profile="ep8-dflash", **kw)
    return write_recording(tmp / f"{name}.jsonl", drafted(events), hosts=["sim"])


# --------------------------------------------------------------------------- speculative decoding


def test_an_old_recording_reports_as_before(tmp_path: Path) -> None:
    """No speculative figures, no EPLB lines: no new column, no speed-up table, no new verdict line."""
    a, b = plain(tmp_path, "a"), plain(tmp_path, "b", seed=2)
    md = render_md([summarize(a), summarize(b)], compare(a, b))
    assert "accept len" not in md and "EPLB" not in md and "Speed-up" not in md and "speculative" not in md
    text = render_text([summarize(a)], compare(a, b))
    assert "accept len" not in text and "speed-up" not in text
    rows = list(csv.DictReader(io.StringIO(render_csv([summarize(a)]))))
    assert all(r["accept_len"] == r["spec_collapsed"] == r["eplb_rebalances"] == "" for r in rows)
    figures = {r["figure"] for r in csv.DictReader(io.StringIO(render_csv([summarize(a)], compare(a, b))))}
    assert not {"accept_len", "speedup_decode_p50", "speedup_agg_tok_s"} & figures


def test_level_table_shows_accept_length_rate_and_a_collapse_line_per_collapsed_level(tmp_path: Path) -> None:
    """Accept length is SGLang's level figure (0.5.23 managers/scheduler_components/metrics_reporter.py
    report_decode_stats: accepted tokens / verify passes); the collapse rule and its words are
    kimitui/analysis/spec.py's (collapses, Collapse.message)."""
    path = dflash(tmp_path)
    md = render_md([summarize(path)])
    header = next(line for line in md.splitlines() if line.startswith("| C |"))
    assert header.endswith("| stragglers | accept len | accept rate |")
    row = {line.split("|")[1].strip(): line for line in md.splitlines() if re.match(r"\| \d+ \|", line)}
    assert row["1"].endswith("| 6.40 | 36% |") and row["8"].endswith("| 4.00 | 20% |")
    assert row["32"].endswith("| 3.20 ▼ collapsed | 15% |") and row["64"].endswith("| 2.00 ▼ collapsed | 7% |")
    assert "- speculation collapsed at C=32: accept length 3.20 vs 6.40 at C=1 (41% of its gain kept)" in md
    assert "- speculation collapsed at C=64: accept length 2.00 vs 6.40 at C=1 (19% of its gain kept)" in md
    assert "collapsed at C=8" not in md
    text = render_text([summarize(path)])
    assert "accept len  accept rate" in text and "3.20 ▼ collapsed" in text
    assert "  speculation collapsed at C=32: accept length 3.20" in text


def test_json_and_csv_carry_the_figures_with_their_units(tmp_path: Path) -> None:
    """Accept rate is 0.5.23 managers/tokenizer_manager.py TokenizerManager._calculate_spec_decoding_metrics's
    (correct drafts / proposed drafts, no bonus token), a fraction; accept length in tokens per verify pass."""
    path = dflash(tmp_path)
    data = json.loads(render_json([summarize(path)]))
    levels = {lv["concurrency"]: lv for lv in data["recordings"][0]["sweeps"][0]["levels"]}
    assert levels[1]["spec"] == {"accept_len": pytest.approx(6.4), "accept_len_p50": pytest.approx(6.4),
                                 "accept_rate_p50": pytest.approx(5.4 / 15), "requests": 20, "collapsed": False}
    assert levels[32]["spec"]["collapsed"] and levels[64]["spec"]["accept_len"] == pytest.approx(2.0)
    assert all(lv["eplb"] is None for lv in levels.values())
    rows = {r["concurrency"]: r for r in csv.DictReader(io.StringIO(render_csv([summarize(path)])))}
    assert list(rows["1"])[-12:-7] == list(LEVEL_COLUMNS[-12:-7]) == ["accept_len", "accept_rate_p50", "spec_collapsed",
                                                                    "eplb_rebalances", "eplb_stall_s"]
    assert (rows["1"]["accept_len"], rows["1"]["accept_rate_p50"], rows["1"]["spec_collapsed"]) == ("6.4", "0.36", "no")
    assert rows["32"]["spec_collapsed"] == "yes" and rows["64"]["eplb_rebalances"] == ""


def test_vs_gives_the_speedup_of_b_over_a_per_c(tmp_path: Path) -> None:
    """Ratios are B/A as everywhere in --vs (docs/report-json.md); the speed-up definitions are
    kimitui/analysis/spec.py speedups (per-user decode p50 and aggregate, at the same C)."""
    a, b = plain(tmp_path), dflash(tmp_path)
    cmp = compare(a, b)
    data = json.loads(render_json([summarize(a), summarize(b)], cmp))["comparison"]
    ups = {u["concurrency"]: u for u in data["speedups"]}
    assert sorted(ups) == LEVELS
    for c in LEVELS:
        assert ups[c]["decode_p50"] == pytest.approx(SPEED[c]) and ups[c]["agg_tok_s"] == pytest.approx(SPEED[c])
    md = render_md([summarize(a), summarize(b)], cmp)
    assert "| C | decode p50 | aggregate | accept len A | accept len B |" in md
    assert "| 1 | ×2.10 | ×2.10 | — | 6.40 |" in md and "| 32 | ×1.30 | ×1.30 | — | 3.20 ▼ |" in md
    rows = [r for r in csv.DictReader(io.StringIO(render_csv([summarize(a), summarize(b)], cmp)))
            if r["concurrency"] == "8"]
    by_fig = {r["figure"]: r for r in rows}
    assert by_fig["speedup_decode_p50"]["ratio"] == "1.8" and by_fig["speedup_agg_tok_s"]["ratio"] == "1.8"
    assert (by_fig["accept_len"]["a"], by_fig["accept_len"]["b"]) == ("", "4")
    text = render_text([summarize(a), summarize(b)], cmp)
    assert "speed-up, B over A:" in text and re.search(r"\n\s+64\s+×1\.00\s+×1\.00\s+—\s+2\.00\n", text)


def test_the_verdict_names_the_drafter_its_speedup_at_c1_and_at_the_peak_and_the_collapse(tmp_path: Path) -> None:
    cmp = compare(plain(tmp_path), dflash(tmp_path))
    lines = cmp.summary_lines()
    assert lines[0].startswith("better: ep8-tuned") and lines[1] == "compared at C=1, 8, 32, 64"
    assert lines[2] == ("speculative decoding (B): DFLASH ×2.10 per-user decode at C=1, ×1.00 at C=64 (B's peak; "
                        "aggregate ×1.00); acceptance collapsed from C=32")
    assert lines[-1].startswith("one knob family changed: ")  # the drafter's knobs are one change
    md = render_md([], cmp)
    assert f"- {lines[2]}" in md


def test_the_verdict_when_the_reference_is_the_drafter_says_the_ratios_are_b_over_a(tmp_path: Path) -> None:
    cmp = compare(dflash(tmp_path), plain(tmp_path))
    line = next(x for x in cmp.summary_lines() if x.startswith("speculative"))
    assert line.startswith("speculative decoding (A): DFLASH B/A ×0.48 per-user decode at C=1, ×1.00 at C=64")
    assert line.endswith("acceptance collapsed from C=32")


def test_the_verdict_when_both_sides_draft_names_each(tmp_path: Path) -> None:
    cmp = compare(dflash(tmp_path, "a"), dflash(tmp_path, "b"))
    line = next(x for x in cmp.summary_lines() if x.startswith("speculative"))
    assert line == ("speculative decoding (A: DFLASH, B): DFLASH ×1.00 per-user decode at C=1, ×1.00 at C=64 "
                    "(B's peak; aggregate ×1.00); acceptance collapsed from C=32 (A), C=32 (B)")


# --------------------------------------------------------------------------- EPLB


def spaced(events: list[Event], gap_s: float = 120.0, lead_s: float = 60.0) -> list[Event]:
    """Each level ``gap_s`` later than the synthetic sweep has it and starting ``lead_s`` before its first request
    (the synthetic levels last under a second; a rebalance lasts seconds)."""
    out: list[Event] = []
    shift = 0.0
    for ev in events:
        if isinstance(ev, LevelStarted):
            shift += gap_s
        update: dict[str, Any] = {"t": ev.t + shift - (lead_s if isinstance(ev, LevelStarted) else 0.0)}
        if isinstance(ev, RequestResult):
            update.update(sent=ev.sent + shift, intended_send=ev.intended_send + shift,
                          max_gap_at=None if ev.max_gap_at is None else ev.max_gap_at + shift)
        out.append(ev.model_copy(update=update))
    return out


def eplb_lines(t: float, message: str, ranks: int = 8) -> list[LogLine]:
    """One 0.5.23 EPLBManager line as every TP rank prints it (``[time TPn EPn] message``), a few ms apart."""
    return [to_event(f"[2026-12-05 10:00:00 TP{r} EP{r}] {message}", host="sim", source="server.log", t=t + r * 0.002)
            for r in range(ranks)]


def rebalance(t: float, took: float) -> list[LogLine]:
    return [*eplb_lines(t, "[EPLBManager] rebalance start"),
            *eplb_lines(t + took, f"[EPLBManager] rebalance end time={took:.3f}s")]


def results(events: list[Event]) -> dict[int, float]:
    return {ev.concurrency: ev.t for ev in events if isinstance(ev, LevelResult)}


def eplb_recording(tmp: Path, name: str = "eplb", *, keep_level_started: bool = True) -> Path:
    """ep8-eplb: a rebalance of 9.31 s in C=8, two (8.4 s, then 24.6 s) in C=32, a skipped one in C=64; each
    starts within the last 17 s before its level's result, so inside the level whether its window starts at
    level_started or at the result less its wall time."""
    events = spaced(synthetic_sweep(seed=1, requests_per_level=20, levels=LEVELS, knobs=EPLB, profile="ep8-eplb",
                                    peak_scale=0.8))
    end = results(events)
    logs = [*rebalance(end[8] - 3, 9.31), *rebalance(end[32] - 17, 8.4), *rebalance(end[32] - 6, 24.6)]
    logs += eplb_lines(end[64] - 5, "[EPLBManager] rebalance start")
    logs += eplb_lines(end[64] - 4.9, "[EPLBManager] Skipped ep rebalancing: current GPU utilization 0.93 > "
                                      "minimum rebalance threshold 0.90")
    if not keep_level_started:
        events = [ev for ev in events if not isinstance(ev, LevelStarted)]
    return write_recording(tmp / f"{name}.jsonl", sorted([*events, *logs], key=lambda e: e.t), hosts=["sim"])


def test_parsed_lines_are_eplb_lines() -> None:
    """0.5.23 eplb/eplb_manager.py EPLBManager.rebalance: 'rebalance end time=X.XXXs'."""
    (end,) = eplb_lines(0.0, "[EPLBManager] rebalance end time=9.310s", ranks=1)
    assert end.line_kind == "eplb" and end.fields.get("phase") == "end" and end.fields.get("duration_s") == 9.31


def test_rebalances_are_counted_per_level_with_their_stall(tmp_path: Path) -> None:
    """Every rank's copy of 0.5.23 eplb/eplb_manager.py EPLBManager.rebalance's lines merged, a skip
    (_check_rebalance_needed) not counted (kimitui/analysis/eplb.py RebalanceTracker, level_rebalances); the
    stall is SGLang's own time= figure."""
    path = eplb_recording(tmp_path)
    md = render_md([summarize(path)])
    header = next(line for line in md.splitlines() if line.startswith("| C |"))
    assert header.endswith("| stragglers | EPLB |") and "accept len" not in header
    cells = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in md.splitlines()
             if re.match(r"\| \d+ \|", line)}
    assert cells == {"1": "—", "8": "1 (9 s)", "32": "2 (33 s)", "64": "—"}
    (sweep,) = json.loads(render_json([summarize(path)]))["recordings"][0]["sweeps"]
    levels = {lv["concurrency"]: lv for lv in sweep["levels"]}
    assert levels[8]["eplb"] == {"rebalances": 1, "stall_s": pytest.approx(9.31)}
    assert levels[32]["eplb"] == {"rebalances": 2, "stall_s": pytest.approx(33.0)}
    assert levels[1]["eplb"] is None and levels[64]["eplb"] is None and levels[8]["spec"] is None
    rows = {r["concurrency"]: r for r in csv.DictReader(io.StringIO(render_csv([summarize(path)])))}
    assert (rows["32"]["eplb_rebalances"], rows["32"]["eplb_stall_s"]) == ("2", "33")
    assert (rows["64"]["eplb_rebalances"], rows["64"]["eplb_stall_s"]) == ("", "")
    assert "EPLB" in render_text([summarize(path)]) and "2 (33 s)" in render_text([summarize(path)])


def test_a_regression_with_rebalances_says_how_many_and_how_long(tmp_path: Path) -> None:
    cmp = compare(plain(tmp_path), eplb_recording(tmp_path))
    assert cmp.verdict == "regressed"
    lines = cmp.summary_lines()
    assert lines[2] == "3 EPLB rebalances, 42 s in all, in the measured levels (B: C=8 ×1, C=32 ×2)"
    assert not any(x.startswith("speculative") for x in lines)  # neither side drafts
    assert lines[-1] == "one knob changed: enable_eplb (False -> True)"
    data = json.loads(render_json([], cmp))["comparison"]
    assert lines[2] in data["summary"]


def test_an_older_recording_without_level_starts_counts_from_the_levels_wall_time(tmp_path: Path) -> None:
    """Without level_started (recordings before it), a level's window is its result's time less its wall time."""
    (run,) = summarize(eplb_recording(tmp_path, keep_level_started=False)).sweeps
    assert not run.level_starts
    counts = {c: (run.level_rebalances(row).count, round(run.level_rebalances(row).total_s, 2))
              for c, row in sorted(run.levels.items())}
    assert counts == {1: (0, 0.0), 8: (1, 9.31), 32: (2, 33.0), 64: (0, 0.0)}


def test_repeats_are_pooled_and_a_rebalance_over_two_windows_counts_once_in_all(tmp_path: Path) -> None:
    """Each repeat of a level has its own window (kimitui/loadgen/sweep.py runs every level, then repeats, so a
    level's repeats need not be contiguous); a rebalance over two windows of one level counts once there, one
    across two levels counts in each and once in the total."""
    events = spaced(synthetic_sweep(seed=1, requests_per_level=8, levels=[1, 8], knobs=EPLB, profile="ep8-eplb",
                                    repeats=2), gap_s=30.0, lead_s=0.0)
    end = {(ev.concurrency, ev.repeat): ev.t for ev in events if isinstance(ev, LevelResult)}
    start = {(ev.concurrency, ev.repeat): ev.t for ev in events if isinstance(ev, LevelStarted)}
    logs = [*rebalance(start[(1, 0)] + 0.01, 2.0),
            *rebalance(end[(1, 1)] - 0.05, 40.0),  # into the next level's window, 31 s later
            *rebalance(end[(8, 0)] - 0.05, 40.0)]  # into C=8's next repeat
    assert sorted(start, key=start.__getitem__) == [(1, 0), (1, 1), (8, 0), (8, 1)]
    path = write_recording(tmp_path / "rep.jsonl", sorted([*events, *logs], key=lambda e: e.t), hosts=["sim"])
    (run,) = summarize(path).sweeps
    assert (run.level_rebalances(run.levels[1]).count, run.level_rebalances(run.levels[1]).total_s) == (2, 42.0)
    assert (run.level_rebalances(run.levels[8]).count, run.level_rebalances(run.levels[8]).total_s) == (2, 80.0)
    cmp = compare(run, run)
    assert "3 EPLB rebalances, 82 s in all, in the measured levels (A: C=1 ×2, C=8 ×2)" in cmp.summary_lines()


# --------------------------------------------------------------------------- end to end on the simulated host

def fast_profile(tmp: Path, name: str, extends: str, sim_extra: str = "", top_extra: str = "") -> Path:
    """A seed profile with a half-second simulated start-up (and test-speed tuning of the simulator only)."""
    path = tmp / f"{name}.toml"
    path.write_text(f'name = "{name}"\nextends = "{extends}"\n{top_extra}[sim]\nstartup_s = 0.5\n{sim_extra}')
    return path


async def record(sim: SimServerProcess, path: Path, profile: str) -> tuple[Path, list[str]]:
    """A real sweep (SweepRunner, its load process) recorded with the server's info and its log as the cockpit
    follows it (LogFollower over the simulator's log file); returns the recording and the log's EPLB end lines."""
    session = Session(host="sim")
    writer = RecordingWriter(path, hosts=["sim"], meta={"profile": profile}).start()
    session.add_sink(writer)
    follower = LogFollower(LocalHost("sim"), session, path=str(sim.log_path))
    await follower.start()
    session.publish(ServerInfo(url=sim.url, args=await fetch_server_info(sim.url, timeout=5.0)))
    spec = await with_server_caps(SweepSpec(url=sim.url, model=sim.model, levels=[1, 8], mode="burst", max_tokens=96,
                                            requests_per_level=8, stop_on_oversaturation=False))
    runner = SweepRunner(session, spec, profile=profile)
    await runner.start()
    result = await asyncio.wait_for(runner.wait(), 150)
    assert result.outcome == "completed", result.reason
    await asyncio.sleep(1.0)  # the follower's last lines
    await follower.stop()
    return await writer.aclose(), [line for line in sim.lines() if "TP0" in line and "rebalance end" in line]


@pytest.mark.timeout(300)
def test_end_to_end_report_of_real_sweeps_on_the_simulated_host(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """ep8-tuned, then ep8-dflash (its ragged-verify budget shrunk to 16 tokens, kimitui/sim/spec_model.py, so
    acceptance collapses by C=8) and ep8-eplb (rebalancing every 150 passes): the report from the recordings."""
    profiles = {"tuned": fast_profile(tmp_path, "t-tuned", "ep8-tuned"),
                "dflash": fast_profile(tmp_path, "t-dflash", "ep8-dflash", "tuning = { spec_verify_budget = 16 }\n"),
                "eplb": fast_profile(tmp_path, "t-eplb", "ep8-eplb", top_extra="eplb_rebalance_num_iterations = 150\n")}

    async def run_all() -> dict[str, tuple[Path, list[str]]]:
        out = {}
        for key, prof in profiles.items():
            async with start_sim(str(prof), time_scale=4.0, seed=1) as sim:
                out[key] = await record(sim, tmp_path / f"{key}.jsonl.gz", key)
        return out

    recs = asyncio.run(run_all())
    tuned, dflash_, eplb = (str(recs[k][0]) for k in ("tuned", "dflash", "eplb"))

    assert main(["report", tuned, "--vs", dflash_, "--stragglers"]) == 0
    md = capsys.readouterr().out
    assert "| accept len | accept rate |" in md and "▼ collapsed" in md
    assert "- speculation collapsed at C=8: accept length" in md
    verdict = re.search(r"- speculative decoding \(B\): DFLASH ×(\d+\.\d+) per-user decode at C=1, "
                        r"×(\d+\.\d+) at C=8 "
                        r"\((?:B's peak; )?aggregate ×\d+\.\d+\); acceptance collapsed from C=8", md)
    assert verdict is not None, md
    assert float(verdict.group(1)) > 1.2 and float(verdict.group(2)) < float(verdict.group(1))  # pays less collapsed
    assert main(["report", tuned, "--vs", dflash_, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    spec_levels = {lv["concurrency"]: lv["spec"] for lv in data["recordings"][1]["sweeps"][0]["levels"]}
    assert spec_levels[1]["requests"] == 8 and spec_levels[1]["accept_len"] > 3 and spec_levels[8]["collapsed"]
    assert {u["concurrency"] for u in data["comparison"]["speedups"]} == {1, 8}

    assert main(["report", tuned, "--vs", eplb, "--format", "csv"]) == 0
    capsys.readouterr()
    assert main(["report", eplb, "--format", "json"]) == 0
    levels = json.loads(capsys.readouterr().out)["recordings"][0]["sweeps"][0]["levels"]
    ends = recs["eplb"][1]
    logged = sum(float(m.group(1)) for line in ends if (m := re.search(r"time=(\d+\.\d+)s", line)))
    assert ends, "ep8-eplb rebalanced at least once in the sweep"
    assert sum((lv["eplb"] or {}).get("rebalances", 0) for lv in levels) == len(ends)
    assert sum((lv["eplb"] or {}).get("stall_s", 0.0) for lv in levels) == pytest.approx(logged, abs=0.01)
    cmp = compare(tuned, eplb)
    assert any(re.fullmatch(rf"{len(ends)} EPLB rebalances?, \d+ s in all, in the measured levels \(B: .+\)", x)
               for x in cmp.summary_lines()), cmp.summary_lines()
