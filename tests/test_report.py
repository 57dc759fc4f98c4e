"""Reports and verdicts on synthetic recordings: summaries, A/B verdicts, refusal, formats, exit codes."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.events import LevelResult, RequestResult, SweepSpec
from kimitui.recording import Recording, RecordingHeader, write_recording
from kimitui.report import compare, summarize
from kimitui.report.charts import BOTH, line_chart
from kimitui.report.render import render_csv, render_json, render_md
from kimitui.report.verdict import judge
from tests.support.recordings import synthetic_sweep

EPLB = {"ep_size": 8, "enable_eplb": True}
TUNED = {"ep_size": 8, "enable_eplb": False}


def rec(events: list) -> Recording:
    return Recording(RecordingHeader(hosts=["sim"]), events)


def tuned(seed: int = 1, **kw) -> Recording:
    return rec(synthetic_sweep(seed=seed, requests_per_level=20, levels=[1, 8, 32, 64], knobs=TUNED, **kw))


def eplb(seed: int = 2, **kw) -> Recording:
    return rec(synthetic_sweep(seed=seed, requests_per_level=20, levels=[1, 8, 32, 64], peak_scale=0.56,
                               profile="ep8-eplb", knobs=EPLB, straggler_at=1, **kw))


def test_summary_groups_sweeps_levels_requests_and_knobs() -> None:
    s = summarize(tuned(failures={8: 2}))
    (run,) = s.sweeps
    assert run.profile == "ep8-tuned" and run.outcome == "completed"
    assert sorted(run.levels) == [1, 8, 32, 64]
    assert run.knobs == TUNED and run.knobs_source == "server_info"
    row8 = run.levels[8]
    assert row8.n_failed == 2 and row8.failures == {"timeout": 2} and len(row8.requests) == 22
    c, peak = run.peak  # type: ignore[misc]
    assert c == 64 and peak == pytest.approx(run.levels[64].agg_tok_s)


def test_regression_has_the_right_magnitude_and_names_the_knob() -> None:
    cmp = compare(tuned(), eplb())
    assert cmp.verdict == "regressed"
    assert cmp.peak is not None and cmp.peak.verdict == "regressed"
    assert cmp.peak.change_pct == pytest.approx(-44, abs=1.5)
    # the requests' bootstrap is tighter than the 3 % per-side run-to-run floor, so the floor sets it
    assert cmp.peak.noise_pct == pytest.approx(100 * math.sinh(1.96 * math.sqrt(2) * 0.03), abs=0.01)
    assert cmp.peak.low < cmp.peak.ratio < cmp.peak.high < 1.0  # type: ignore[operator]
    dec1 = next(f for f in cmp.level(1).figures if f.figure == "decode_tok_s_p50")  # type: ignore[union-attr]
    assert dec1.verdict == "regressed" and dec1.change_pct == pytest.approx(-44, abs=3)
    ttft = next(f for f in cmp.level(8).figures if f.figure == "ttft_p50")  # type: ignore[union-attr]
    assert ttft.verdict == "unsure" and "settle it" in ttft.settle  # never "no change" on wide noise
    assert cmp.knob_diff == {"enable_eplb": (False, True)} and not cmp.confounded
    lines = cmp.summary_lines()
    assert lines[0].startswith("worse:")
    assert any("peak aggregate tok/s -44 %" in line for line in lines)
    assert "stragglers: 0 of 136 requests (A), 1 of 136 (B)" in lines
    assert lines[-1] == "one knob changed: enable_eplb (False -> True)"
    assert cmp.headline() == (f"worse; peak {cmp.peak.change_pct:+.0f} % (worse); C=1 p50 decode "
                              f"{dec1.change_pct:+.0f} % (worse); stragglers at C=1: 0 of 20 -> 1 of 20; "
                              "one knob changed: enable_eplb")


def test_improvement_is_the_mirror_image() -> None:
    cmp = compare(eplb(), tuned())
    assert cmp.verdict == "improved"
    assert cmp.peak.change_pct == pytest.approx(79, abs=3)  # type: ignore[union-attr]


def test_one_sweep_each_cannot_prove_same_at_5_percent_and_says_what_would() -> None:
    """The run-to-run floor (3 % a side) makes one sweep's 95 % interval ±8 %: wider than the 5 % that matters,
    so the honest answer is *unsure*, never "no change" — and the way to settle it is repeats, not requests."""
    cmp = compare(tuned(seed=1), tuned(seed=7))
    assert cmp.verdict == "unsure"
    agg = [f for f in cmp.rows() if f.figure == "agg_tok_s"]
    assert agg and all(f.verdict == "unsure" for f in agg)
    assert all("run-to-run noise alone" in f.why and "--repeats" in f.settle for f in agg)
    assert cmp.knob_diff == {} and cmp.summary_lines()[0].startswith("unsure")


def test_same_profile_runs_at_a_wider_margin_say_same() -> None:
    cmp = compare(tuned(seed=1), tuned(seed=7), min_effect=0.15)
    assert all(f.verdict == "same" for f in cmp.rows() if f.figure == "agg_tok_s")


def test_deterministic() -> None:
    a, b = tuned(), eplb()
    assert render_json([], compare(a, b)) == render_json([], compare(a, b))
    def c1_agg_noise(seed: int) -> float | None:  # B's C=1 straggler makes its bootstrap noise exceed the floor
        return next(f.noise_pct for f in compare(a, b, seed=seed).level(1).figures if f.figure == "agg_tok_s")  # type: ignore[union-attr]

    assert c1_agg_noise(1) != c1_agg_noise(2)


@pytest.mark.parametrize(("field", "value"), [("max_tokens", 256), ("ignore_eos", False), ("mode", "burst"),
                                              ("prompts", "random:128"), ("temperature", 0.7),
                                              ("extra_body", {"top_k": 1})])
def test_differing_workloads_are_refused(field: str, value: object) -> None:
    base = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[1, 8, 32, 64], max_tokens=512)
    other = base.model_copy(update={field: value})
    a = rec(synthetic_sweep(spec=base, levels=[1, 8, 32, 64], knobs=TUNED))
    b = rec(synthetic_sweep(spec=other, levels=other.levels, knobs=EPLB, peak_scale=0.5))
    cmp = compare(a, b)
    assert cmp.verdict == "not_comparable" and list(cmp.workload_diff) == [field]
    assert cmp.headline().startswith(f"not comparable: the workload differs: {field}")
    assert field in cmp.reasons[0] and not cmp.levels
    lines = cmp.summary_lines()
    assert lines[0].startswith("not comparable") and "enable_eplb" in lines[-1]


def test_latency_alone_does_not_decide_the_verdict() -> None:
    a = tuned()
    slow_ttft = []
    for e in tuned(seed=5).events:
        if isinstance(e, RequestResult) and e.ttft_s is not None:
            e = e.model_copy(update={"ttft_s": e.ttft_s * 3})
        elif isinstance(e, LevelResult):
            e = e.model_copy(update={"ttft": e.ttft.model_copy(update={"p50": 0.6})})
        slow_ttft.append(e)
    cmp = compare(a, rec(slow_ttft))
    ttft = next(f for f in cmp.level(8).figures if f.figure == "ttft_p50")  # type: ignore[union-attr]
    assert ttft.verdict == "regressed" and not ttft.primary and ttft.change_pct == pytest.approx(200, abs=1)
    assert cmp.verdict == "unsure" and not cmp.regressions


def test_two_knobs_changed_is_confounded() -> None:
    cmp = compare(tuned(), rec(synthetic_sweep(seed=3, requests_per_level=20, levels=[1, 8, 32, 64], peak_scale=0.56,
                                               profile="ep8-v2", knobs={**EPLB, "num_continuous_decode_steps": 16})))
    assert cmp.confounded and cmp.verdict == "regressed"
    assert cmp.knobs_text.startswith("confounded: 2 knobs changed") and "num_continuous_decode_steps" in cmp.knobs_text


def test_knobs_from_the_profile_switch_or_unknown() -> None:
    a = rec(synthetic_sweep(seed=1, levels=[1, 8], server_info=False))
    b = rec(synthetic_sweep(seed=2, levels=[1, 8], server_info=False, profile="ep8-eplb", from_profile="ep8-tuned",
                            switch_diff={"enable_eplb": [False, True]}))
    cmp = compare(a, b)
    assert cmp.knob_diff == {"enable_eplb": (False, True)} and "profile switch ep8-tuned -> ep8-eplb" in cmp.knob_note
    c = rec(synthetic_sweep(seed=2, levels=[1, 8], server_info=False, profile="other"))
    unknown = compare(a, c)
    assert unknown.knob_diff is None and unknown.knobs_text.startswith("knobs unknown")


def test_repeats_give_the_noise() -> None:
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[1, 8], repeats=3)
    a = rec(synthetic_sweep(seed=1, spec=spec, levels=[1, 8], repeats=3))
    b = rec(synthetic_sweep(seed=2, spec=spec, levels=[1, 8], repeats=3))
    cmp = compare(a, b)
    agg = next(f for f in cmp.level(8).figures if f.figure == "agg_tok_s")  # type: ignore[union-attr]
    assert agg.noise == "repeats" and agg.noise_pct is not None
    dec = next(f for f in cmp.level(8).figures if f.figure == "decode_tok_s_p50")  # type: ignore[union-attr]
    assert dec.noise == "bootstrap"
    assert cmp.verdict in ("same", "unsure") and not cmp.regressions and not cmp.improvements


def test_levels_present_on_one_side_only() -> None:
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[1, 8, 32, 64])
    a = rec(synthetic_sweep(spec=spec, levels=[1, 8, 32, 64]))
    b = rec(synthetic_sweep(spec=spec, levels=[1, 8, 32], seed=4))  # stopped early
    cmp = compare(a, b)
    assert [lv.concurrency for lv in cmp.levels] == [1, 8, 32] and cmp.only_in_a == [64]
    assert cmp.summary_lines()[1] == "compared at C=1, 8, 32; only in A: 64"


def test_judge_rules() -> None:
    assert judge(0.9, 0.85, 0.95, True) == "regressed"
    assert judge(0.9, 0.85, 0.95, False) == "improved"
    assert judge(0.97, 0.95, 0.99, True) == "same"  # beyond noise but the whole interval within 5 %
    assert judge(0.97, 0.93, 1.01, True) == "unsure"  # the interval reaches past -5 %: it cannot say "same"
    assert judge(0.8, 0.6, 1.05, True) == "unsure"  # big but within noise: the data cannot tell
    assert judge(0.5, 0.09, 1.82, True) == "unsure"  # the seeds' C=1 case: halved, ±82 %: never "no change"
    assert judge(1.0, 0.94, 1.06, True) == "unsure"  # an interval that reaches both ±5 % is never "same"
    assert judge(0.85, None, None, True) == "unsure" and judge(0.93, None, None, True) == "unsure"  # noise unknown
    assert judge(None, None, None, True) == "n/a"


def test_markdown_has_tables_curves_and_stragglers() -> None:
    a, b = tuned(), eplb()
    brief = render_md([summarize(a), summarize(b)], compare(a, b))
    assert "## Verdict: Worse" in brief and "| 64 | " in brief and "```text" in brief
    assert "Stragglers:" not in brief and "| C | figure |" not in brief  # behind --stragglers
    md = render_md([summarize(a), summarize(b)], compare(a, b), stragglers=True)
    assert "## Verdict: Worse" in md
    assert "| C | figure | A | B | change | noise (95 %) | verdict |" in md
    assert "| 64 | aggregate tok/s |" in md
    assert "| C | status | req | ok | failed | prompt tok | agg tok/s | steady tok/s |" in md
    assert "┤" in md and "●" in md and "○" in md and "```text" in md
    assert "Stragglers:" in md and "longest gap 9.8 s" in md
    assert "one knob changed: enable_eplb" in md


def test_json_is_stable_and_documented_keys() -> None:
    a, b = tuned(), eplb()
    data = json.loads(render_json([summarize(a), summarize(b)], compare(a, b)))
    assert data["schema"] == "kimitui-report" and data["version"] == 2
    sweep = data["recordings"][0]["sweeps"][0]
    assert set(sweep) == {"sweep_id", "profile", "host", "started", "outcome", "reason", "spec", "knobs",
                          "knobs_source", "peak", "idle_power", "knee", "levels"}
    level = sweep["levels"][0]
    assert set(level) == {"concurrency", "repeats", "requests", "ok", "failed", "failures", "agg_tok_s",
                          "steady_tok_s", "ttft", "tpot", "itl", "decode_tok_s", "e2e_tok_s", "stragglers", "stopped",
                          "status", "status_reason", "errors", "prompt_tokens", "client", "client_distorted", "spec", "eplb", "loss", "energy", "cost"}
    assert level["spec"] is None and level["eplb"] is None  # no drafter, no EPLB lines in this recording
    c = data["comparison"]
    assert c["verdict"] == "regressed" and c["knob_diff"] == {"enable_eplb": [False, True]}
    assert set(c["peak"]) == {"figure", "label", "concurrency", "a", "b", "ratio", "low", "high", "change_pct",
                              "noise_pct", "noise", "verdict", "higher_is_better", "primary", "note", "why", "settle",
                              "settle_requests"}
    assert c["summary"][0].startswith("worse")
    doc = (Path(__file__).parents[1] / "docs" / "report-json.md").read_text()
    for key in list(sweep) + list(level) + list(c) + list(c["peak"]) + list(c["levels"][0]):
        assert f"`{key}`" in doc, f"docs/report-json.md does not document {key!r}"


def test_csv_levels_and_comparison() -> None:
    a, b = tuned(), eplb()
    rows = list(csv.DictReader(io.StringIO(render_csv([summarize(a)]))))
    assert [r["concurrency"] for r in rows] == ["1", "8", "32", "64"]
    assert float(rows[-1]["agg_tok_s"]) == pytest.approx(summarize(a).sweeps[0].levels[64].agg_tok_s, rel=1e-5)
    rows = list(csv.DictReader(io.StringIO(render_csv([summarize(a), summarize(b)], compare(a, b)))))
    assert rows[0]["concurrency"] == "peak" and rows[0]["verdict"] == "regressed"
    assert rows[-1]["figure"] == "overall" and rows[-1]["verdict"] == "regressed"
    assert len(rows) == 1 + 4 * 4 + 1


def test_chart_draws_both_series_and_marks_overlaps() -> None:
    lines = line_chart({"a": [(1, 10.0), (8, 100.0)], "b": [(1, 10.0), (8, 50.0)]}, height=5)
    text = "\n".join(lines)
    assert BOTH in text and "●" in text and "○" not in lines[1]
    assert lines[1].endswith("●")  # a's top point on the top row
    assert "1" in lines[-2] and "8" in lines[-2]
    assert line_chart({"a": []}) == []


# --------------------------------------------------------------------------- the command


def _files(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    a = write_recording(tmp_path / "a.jsonl", tuned().events)
    b = write_recording(tmp_path / "b.jsonl", eplb().events)
    same = write_recording(tmp_path / "same.jsonl", tuned(seed=9).events)
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[1, 8, 32, 64], max_tokens=128)
    other = write_recording(tmp_path / "other.jsonl", synthetic_sweep(spec=spec, levels=[1, 8, 32, 64]))
    return a, b, same, other


def test_report_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, same, other = _files(tmp_path)
    assert main(["report", str(a), "--vs", str(b), "--fail-on-regression"]) == 1
    out, err = capsys.readouterr()
    assert "## Verdict: Worse" in out and "worse" in err
    assert main(["report", str(a), "--vs", str(b)]) == 0
    assert main(["report", str(a), "--vs", str(same), "--fail-on-regression"]) == 0
    capsys.readouterr()
    assert main(["report", str(a), "--vs", str(other), "--fail-on-regression", "--format", "json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["comparison"]["verdict"] == "not_comparable"
    assert data["comparison"]["workload_diff"] == {"max_tokens": [512, 128]}


def test_report_command_formats_and_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _, _ = _files(tmp_path)
    assert main(["report", str(a), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("source,sweep_id,profile,concurrency")
    out = tmp_path / "r.md"
    assert main(["report", str(a), "--vs", str(b), "-o", str(out)]) == 0
    assert out.read_text().startswith("# kimitui report")


def test_report_command_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    assert main(["report", str(bad)]) == 2
    assert f"{bad}: line 1" in capsys.readouterr().err
    empty = write_recording(tmp_path / "e.jsonl", [])
    a, _, _, _ = _files(tmp_path)
    assert main(["report", str(a), "--vs", str(empty)]) == 2
    assert "contains no sweep" in capsys.readouterr().err
    assert main(["report", str(a), "--sweep", "nope"]) == 2
    assert "no sweep 'nope'; it has s1 (ep8-tuned)" in capsys.readouterr().err
    assert main(["report", str(a), "--sweep", "ep8-tuned", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["recordings"][0]["sweeps"]) == 1


def test_report_two_sweeps_of_one_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tuned().events + [
        e.model_copy(update={"t": e.t + 10_000}) for e in
        synthetic_sweep(seed=2, requests_per_level=20, levels=[1, 8, 32, 64], peak_scale=0.56, profile="ep8-eplb",
                        knobs=EPLB, sweep_id="s2")]
    path = write_recording(tmp_path / "session.jsonl", one)
    assert main(["report", str(path), "--sweep", "ep8-tuned", "--vs-sweep", "ep8-eplb", "--fail-on-regression",
                 "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["comparison"]["a"]["sweep_id"] == "s1" and data["comparison"]["b"]["sweep_id"] == "s2"
    assert data["comparison"]["knob_diff"] == {"enable_eplb": [False, True]}
    assert main(["report", str(path), "--vs-sweep", "ep8-eplb"]) == 2
    assert "name the first with --sweep" in capsys.readouterr().err


def test_bootstrap_statistics_match_their_definitions() -> None:
    import random
    import statistics

    from kimitui.events import RequestResult as RR
    from kimitui.report.noise import request_statistic, resample_indices

    rng = random.Random(3)
    reqs = [RR(sweep_id="s", request_id=str(i), concurrency=1, ok=True, intended_send=0, sent=0,
               decode_tok_s=rng.uniform(5, 80), completion_tokens=rng.randint(10, 500), e2e_s=rng.uniform(1, 60))
            for i in range(12)]
    n, med = request_statistic("decode_tok_s_p50", reqs)  # type: ignore[misc]
    m, thr = request_statistic("agg_tok_s", reqs)  # type: ignore[misc]
    assert n == m == 12
    for _ in range(30):
        idx = resample_indices(rng, n)
        assert all(0 <= i < n for i in idx)
        by_rate = sorted(reqs, key=lambda r: r.decode_tok_s)  # the statistic indexes sorted values
        assert med(list(idx)) == statistics.median(by_rate[i].decode_tok_s for i in idx)
        assert thr(idx) == pytest.approx(sum(reqs[i].completion_tokens for i in idx) / sum(reqs[i].e2e_s for i in idx))


# --------------------------------------------------------------------------- the seeds' case, level status, client health

from tests.support.seedcase import eplb_events, tuned_events, write_seed_pair  # noqa: E402

FAILED_256 = {256: ("failed", "256/256 failed", None)}


def test_seed_case_with_different_level_lists_is_a_regression(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Tuned EP8 swept the seeds' eight levels, EPLB only 1, 8, 64, 256: compared on those four."""
    a, b = write_seed_pair(tmp_path)
    cmp = compare(a, b)
    assert cmp.verdict == "regressed" and cmp.workload_diff == {}
    assert cmp.compared == [1, 8, 64, 256] and cmp.only_in_a == [32, 96, 128, 192] and cmp.only_in_b == []
    assert cmp.peak is not None and cmp.peak.change_pct == pytest.approx(-44, abs=0.5)
    assert cmp.summary_lines()[1] == "compared at C=1, 8, 64, 256; only in A: 32, 96, 128, 192"
    assert cmp.headline().startswith("worse; peak -44 % (worse)")

    assert main(["report", str(a), "--vs", str(b), "--fail-on-regression"]) == 1
    out, err = capsys.readouterr()
    assert "## Verdict: Worse" in out and "- compared at C=1, 8, 64, 256; only in A: 32, 96, 128, 192" in out
    assert "| 256 | 1,538 | 862 | -44.0 % |" in out  # one row per level
    assert main(["report", str(a), "--vs", str(b), "--stragglers"]) == 0
    assert "| 256 | aggregate tok/s | 1,538 | 862 | -44.0 %" in capsys.readouterr().out  # every figure's row
    assert err.splitlines()[-2:] == ["kimitui report: worse: ep8-tuned (s1) vs ep8-eplb (s2)",
                                     "kimitui report: compared at C=1, 8, 64, 256; only in A: 32, 96, 128, 192"]
    assert main(["report", str(a), "--vs", str(b), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("worse: ep8-tuned (s1) vs ep8-eplb (s2)\n")
    assert "  compared at C=1, 8, 64, 256; only in A: 32, 96, 128, 192" in text
    assert "  peak aggregate tok/s -44 % (worse, ±8 %): 1538 tok/s at C=256 -> 862 tok/s at C=256" in text
    assert main(["report", str(a), "--vs", str(b), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["comparison"]
    assert data["verdict"] == "regressed" and data["compared"] == [1, 8, 64, 256]
    assert data["only_in_a"] == [32, 96, 128, 192] and data["workload_diff"] == {}
    assert data["peak_at"] == {"a": {"concurrency": 256, "agg_tok_s": 1538.0}, "b": {"concurrency": 256, "agg_tok_s": 862.0}}
    assert main(["report", str(a), "--vs", str(b), "--format", "csv"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(",overall,") and ",regressed," in last and "only in A: 32, 96, 128, 192" in last


def test_measurement_settings_are_noted_not_refused(tmp_path: Path) -> None:
    spec = tuned_events()[2].spec.model_copy(update={"levels": [1, 8, 64, 256], "requests_per_level": 64})  # type: ignore[attr-defined]
    cmp = compare(rec(tuned_events()), rec(eplb_events(spec=spec)))
    assert cmp.verdict == "regressed" and cmp.noted_diff == {"requests_per_level": (None, 64)}
    assert "measured differently (not refused): requests_per_level None vs 64" in cmp.summary_lines()


def test_a_failed_level_is_not_judged_and_never_the_peak(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_seed_pair(tmp_path, status=FAILED_256)
    cmp = compare(a, b)
    lv = cmp.level(256)
    assert lv is not None and not lv.judged and lv.status == ("ok", "failed")
    assert lv.not_judged == "B's C=256 failed (256/256 failed)"
    assert all(f.verdict == "n/a" and f.note == "not judged: B's C=256 failed (256/256 failed)" for f in lv.figures)
    assert "not judged: B's C=256 failed (256/256 failed)" in cmp.summary_lines()
    # the peak is judged on the levels both measured ok: C=64 here, and A's own peak is named as not compared
    assert cmp.peak_at == ((64, 1290.0), (64, 700.0)) and cmp.verdict == "regressed"
    assert "  A's own peak, 1538 tok/s at C=256, is at a level not compared" in cmp.summary_lines()
    assert main(["report", str(a), "--vs", str(b)]) == 0
    assert "| 256 | 1,538 | — | — | — | not judged |" in capsys.readouterr().out  # the brief report's row
    assert main(["report", str(a), "--vs", str(b), "--stragglers"]) == 0
    md = capsys.readouterr().out
    assert "| 256 | ✗ **failed** (1) | 256 | 0 | 256 |" in md
    assert "1. C=256 failed: 256/256 failed — not a peak, not drawn, not judged." in md
    assert "| 256 | aggregate tok/s | 1,538 | — | — | — | not judged |" in md
    assert "✗ not drawn: C=256 B failed" in md
    assert main(["report", str(a), "--vs", str(b), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "   256  aggregate tok/s       1,538     —        —             —  not judged" in text
    assert ["256", "failed", "256", "256", "—", "—", "—", "—", "—", "—", "0"] in [line.split() for line in text.splitlines()]
    assert "  C=256 failed: 256/256 failed (figures in parentheses: not a peak, not judged)" in text
    assert "  C=256 failures: http_status 256 (HTTP 503: server overloaded)" in text
    assert main(["report", str(b), "--format", "json"]) == 0
    (sweep,) = json.loads(capsys.readouterr().out)["recordings"][0]["sweeps"]
    level = sweep["levels"][-1]
    assert (level["status"], level["status_reason"]) == ("failed", "256/256 failed")


def test_an_aborted_level_with_a_high_figure_is_not_the_peak() -> None:
    run = summarize(rec(eplb_events(status={256: ("aborted", "128/256 requests aborted", 1900.0)}))).sweeps[0]
    assert run.levels[256].agg_tok_s == 1900.0 and run.levels[256].status == "aborted"
    assert run.peak == (64, 700.0)
    md = render_md([summarize(rec(eplb_events(status={256: ("aborted", "128/256 requests aborted", 1900.0)})))])
    assert "~~1,900~~" in md and "Peak (seed-comparable aggregate, ok levels only): **700 tok/s at C=64**" in md


def test_old_recordings_without_a_status_get_it_derived(tmp_path: Path) -> None:
    """A level whose every request failed, written before levels carried a status, is still failed."""
    path = write_recording(tmp_path / "old.jsonl", eplb_events(status=FAILED_256), compress=False)
    lines = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("kind") == "level_result":
            for key in ("status", "status_reason", "errors", "prompt_tokens", "client", "client_distorted"):
                obj.pop(key)
        lines.append(json.dumps(obj))
    path.write_text("\n".join(lines) + "\n")
    run = summarize(path).sweeps[0]
    assert (run.levels[256].status, run.levels[256].status_reason) == ("failed", "all 256 requests failed (http_status 256)")
    assert run.levels[64].status == "ok" and run.peak == (64, 700.0)
    assert run.levels[256].errors == {"http_status": "HTTP 503: server overloaded"}  # from the requests
    assert run.levels[64].prompt_tokens_p50 == 23.0  # from the requests' usage


def test_a_client_distorted_level_is_marked_and_the_verdict_says_so(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_seed_pair(tmp_path, distorted={64: "loop lag 730 ms"})
    cmp = compare(a, b)
    lines = cmp.summary_lines()
    client = [line for line in lines if "client" in line and "C=64" in line]
    assert client == ["⚠ client: C=64 not judged: the client could not keep up; the verdict rests on C=1, 8, 256"]
    assert "C=64 not judged (the client could not keep up)" in cmp.headline()
    figs = {f.figure: f for f in cmp.level(64).figures}  # type: ignore[union-attr]
    # distorted evidence decides nothing: every figure of the level is unsure, whatever its ratio
    assert all(f.verdict == "unsure" and f.note == "distorted by the client" for f in figs.values())
    assert "lower time scale" in figs["agg_tok_s"].settle
    assert cmp.level(64) not in [lv for lv in cmp.levels if any(f in cmp.regressions for f in lv.figures)]
    assert main(["report", str(a), "--vs", str(b), "--stragglers"]) == 0
    md = capsys.readouterr().out
    assert "| 64 | ok ⚠ client (1) |" in md and "1. C=64 latency figures distorted by the client: loop lag 730 ms." in md
    assert "| 64 | decode p50 | 20.2 | 11.0 | -45.7 % | ±8.3 % | unsure |" in md
    assert main(["report", str(b), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "   64  ok !client   64       0          23        700" in text
    assert "  C=64 latency figures distorted by the client: loop lag 730 ms" in text
    assert main(["report", str(b), "--format", "json"]) == 0
    level = json.loads(capsys.readouterr().out)["recordings"][0]["sweeps"][0]["levels"][2]
    assert level["client_distorted"] == "loop lag 730 ms" and level["client"]["loop_lag_max_ms"] == 730.0


def test_prompt_tokens_and_first_errors_are_in_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, b = write_seed_pair(tmp_path, status=FAILED_256)
    assert main(["report", str(b)]) == 0
    md = capsys.readouterr().out
    assert "| C | status | req | ok | failed | prompt tok | agg tok/s |" in md
    assert "| 1 | ok | 6 | 6 | 0 | 23 | 38 |" in md
    assert "- C=256: http_status 256 (HTTP 503: server overloaded)" in md
    assert main(["report", str(b), "--format", "json"]) == 0
    levels = json.loads(capsys.readouterr().out)["recordings"][0]["sweeps"][0]["levels"]
    assert levels[0]["prompt_tokens"]["p50"] == 23.0
    assert levels[-1]["errors"] == {"http_status": "HTTP 503: server overloaded"}
    assert main(["report", str(b), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["prompt_tokens_p50"] == "23" and rows[-1]["status"] == "failed"


def test_chart_flags_levels_that_are_not_drawn() -> None:
    lines = line_chart({"a": [(1, 10.0), (8, 100.0)]}, height=5, flagged={64: "failed"})
    assert "✗" in lines[-3] and lines[-1].endswith("✗ not drawn: C=64 failed") and "64" in lines[-2]


def test_a_level_with_one_bad_repeat_is_not_ok() -> None:
    """Pooled figures that include a failed repeat are not the server's: the level is not judged."""
    from kimitui.report.sweep_summary import LevelRow

    good = LevelResult(sweep_id="s", concurrency=8, requests=8, ok=8, agg_tok_s=400.0, status="ok")
    bad = good.model_copy(update={"repeat": 1, "ok": 0, "failed": 8, "status": "failed",
                                  "status_reason": "all 8 requests failed (timeout 8)"})
    row = LevelRow(8, repeats=[good, bad])
    assert not row.valid and row.status == "failed"
    assert row.status_reason == "repeat 1: failed (all 8 requests failed (timeout 8))"
    assert LevelRow(8, repeats=[good]).valid
