"""Energy, cost and the knee in reports and verdicts (issue 34): recordings built by hand, every figure worked out.

Each level runs C requests from ``start + 0.5`` for ``D`` seconds; the GPUs (8, 4 Hz) draw a flat ``P`` each from the
level's start to its result, 100 W each otherwise. So a level's aggregate window is exactly ``D`` seconds at
``8 P`` watts and its J per token is ``8 P D / (C x tokens)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimitui.analysis.cost import CostRates
from kimitui.cli import main
from kimitui.events import (
    Event,
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    Percentiles,
    RequestResult,
    ServerInfo,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.recording import Recording, RecordingHeader, write_recording
from kimitui.report import compare, summarize
from kimitui.report.render import render_json, render_md, render_text

T0 = 1_000_000.0
TOKENS = 500
IDLE_W = 100.0


def sweep(profile: str, levels: dict[int, tuple[float, float, float]], *, gpus: bool = True, host: str = "sim",
          sweep_id: str = "s1", t0: float = T0, jitter: float = 0.0) -> list[Event]:
    """``levels``: C -> (seconds D, watts per GPU P, TPOT p50 s)."""
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=sorted(levels), max_tokens=TOKENS,
                     requests_per_level=max(levels))
    evs: list[Event] = [ServerInfo(t=t0 - 20, host=host, args={"tp_size": 8, "enable_eplb": profile.endswith("eplb")}),
                        SweepStarted(t=t0, host=host, sweep_id=sweep_id, spec=spec, profile=profile)]
    busy: list[tuple[float, float, float]] = []
    t = t0 + 2.0
    for c, (d, watts, tpot) in sorted(levels.items()):
        evs.append(LevelStarted(t=t, host=host, sweep_id=sweep_id, concurrency=c))
        sent = t + 0.5
        for r in range(c):
            e2e = d * (1 - jitter * (r % 3) / 10)  # the longest request ends at sent + d
            evs.append(RequestResult(t=sent + e2e, host=host, sweep_id=sweep_id, request_id=f"{sweep_id}-{c}-{r}",
                                     concurrency=c, ok=True, intended_send=sent, sent=sent, e2e_s=e2e, ttft_s=0.1,
                                     completion_tokens=TOKENS, decode_tok_s=TOKENS / e2e, tpot_s=tpot))
        end = sent + d
        evs.append(LevelResult(t=end + 0.5, host=host, sweep_id=sweep_id, concurrency=c, requests=c, ok=c,
                               output_tokens=c * TOKENS, wall_s=d, agg_tok_s=c * TOKENS / d,
                               tpot=Percentiles(p50=tpot), ttft=Percentiles(p99=0.1 * c ** 0.5),
                               decode_tok_s=Percentiles(p50=TOKENS / d)))
        busy.append((t, end + 0.5, watts))
        t = end + 3.0
    evs.append(SweepResult(t=t, host=host, sweep_id=sweep_id, levels=sorted(levels)))
    if gpus:
        for i in range(int((t + 5 - (t0 - 15)) * 4)):
            ts = t0 - 15 + i * 0.25
            watts = next((w for a, b, w in busy if a <= ts <= b), IDLE_W)
            evs.append(GpuSample(t=ts, host=host, gpus=[GpuReading(index=g, power_w=watts) for g in range(8)]))
    return sorted(evs, key=lambda e: e.t)


LEVELS = {1: (10.0, 200.0, 0.020), 8: (10.0, 300.0, 0.022), 64: (20.0, 500.0, 0.030)}


def rec(events: list[Event]) -> Recording:
    return Recording(RecordingHeader(hosts=["sim"]), events)


def test_a_reports_levels_carry_joules_per_token_tokens_per_kw_and_the_idle_power() -> None:
    (run,) = summarize(rec(sweep("ep8-tuned", LEVELS))).sweeps
    for c, (d, watts, _) in LEVELS.items():
        row = run.levels[c]
        assert row.mean_w == pytest.approx(8 * watts)
        assert row.j_per_token == pytest.approx(8 * watts * d / (c * TOKENS))
        assert row.tokens_per_kj == pytest.approx(c * TOKENS / d / (8 * watts / 1000))
        assert row.marginal_j_per_token == pytest.approx((8 * watts - 8 * IDLE_W) / (c * TOKENS / d))
    assert run.idle is not None and run.idle.mean_w == pytest.approx(8 * IDLE_W) and run.idle.gpus == 8
    # C=64: 8 x 500 W x 20 s = 80 kJ for 32,000 tokens
    assert run.levels[64].j_per_token == pytest.approx(2.5)


def test_the_report_shows_them_in_the_table_json_and_text() -> None:
    s = summarize(rec(sweep("ep8-tuned", LEVELS)))
    md = render_md([s])
    assert "| J/token | tok/s/kW |" in md
    assert "idle power before the sweep: 800 W over 8 GPUs (10 s)" in md
    level = json.loads(render_json([s]))["recordings"][0]["sweeps"][0]["levels"][2]
    assert level["energy"]["j_per_token"] == pytest.approx(2.5)
    assert level["energy"]["tok_s_per_kw"] == pytest.approx(400.0)
    assert level["energy"]["mean_w"] == pytest.approx(4000.0) and level["energy"]["coverage"] == pytest.approx(1.0)
    assert level["cost"] is None  # no [cost] configured
    assert "J/token" in render_text([s])


def test_cost_per_million_tokens_at_the_configured_prices() -> None:
    s = summarize(rec(sweep("ep8-tuned", LEVELS)))
    (run,) = s.sweeps
    run.set_cost(CostRates(gpu_hour=2.10, kwh=0.18, currency="USD"))
    row = run.levels[64]
    # 8 GPUs x 2.10 / (1600 tok/s x 3600) x 1e6 = 2.9167; 2.5 J/token x 1e6 / 3.6e6 x 0.18 = 0.125
    assert row.cost is not None
    assert row.cost.gpu_per_mtok == pytest.approx(16.8 / (1600 * 3600) * 1e6)
    assert row.cost.energy_per_mtok == pytest.approx(0.125)
    assert row.cost_per_mtok == pytest.approx(16.8 / (1600 * 3600) * 1e6 + 0.125)
    md = render_md([s])
    assert "| cost/Mtok |" in md and "3.04 USD" in md
    assert "cost per million output tokens at 2.1 USD per GPU-hour + 0.18 USD per kWh" in md


def test_without_gpu_samples_a_report_says_energy_was_not_measured() -> None:
    s = summarize(rec(sweep("ep8-tuned", LEVELS, gpus=False)))
    (run,) = s.sweeps
    assert run.levels[8].j_per_token is None
    assert "no GPU samples" in run.levels[8].energy_reason
    md = render_md([s])
    assert "J/token" not in md and "energy: not measured (no GPU samples from this host" in md
    assert json.loads(render_json([s]))["recordings"][0]["sweeps"][0]["levels"][0]["energy"]["j_per_token"] is None


def test_the_knee_is_in_the_report_and_its_json() -> None:
    levels = {1: (10.0, 200.0, 0.020), 2: (10.0, 200.0, 0.020), 4: (10.0, 200.0, 0.021),
              8: (19.0, 300.0, 0.040), 16: (37.0, 300.0, 0.08)}
    s = summarize(rec(sweep("ep8-tuned", levels)))
    knee = s.sweeps[0].knee
    assert knee.status == "knee" and knee.concurrency is not None and 2 < knee.concurrency < 4  # 8 buys +5 % on 4
    assert knee.line() in render_md([s])
    data = json.loads(render_json([s]))["recordings"][0]["sweeps"][0]["knee"]
    assert data["status"] == "knee" and data["line"].startswith("knee at C≈")


def test_a_comparison_judges_joules_per_token_and_cost_beyond_noise() -> None:
    # B: the same throughput, 20 % more power at every level: J/token +20 %, worse beyond the ±8 % interval
    more = {c: (d, w * 1.2, tpot) for c, (d, w, tpot) in LEVELS.items()}
    a = summarize(rec(sweep("ep8-tuned", LEVELS, jitter=0.2))).sweeps[0]
    b = summarize(rec(sweep("ep8-eplb", more, jitter=0.2))).sweeps[0]
    for run in (a, b):
        run.set_cost(CostRates(kwh=0.18))
    cmp = compare(a, b)
    j64 = next(f for f in cmp.level(64).figures if f.figure == "j_per_token")  # type: ignore[union-attr]
    assert j64.change_pct == pytest.approx(20.0) and j64.verdict == "regressed" and not j64.primary
    assert not j64.higher_is_better
    cost = next(f for f in cmp.level(8).figures if f.figure == "cost_per_mtok")  # type: ignore[union-attr]
    assert cost.change_pct == pytest.approx(20.0) and cost.verdict == "regressed"
    # C=1 ran one request a side: its noise cannot be measured, so unsure there
    assert ("energy per token (J/token), B vs A: C=1 +20 % (unsure), C=8 +20 % (worse), C=64 +20 % (worse)"
            in cmp.summary_lines())
    assert cmp.verdict != "regressed"  # energy does not decide the overall verdict: the throughput is the same


def test_a_side_without_power_leaves_the_energy_figure_unjudged_and_says_why() -> None:
    a = summarize(rec(sweep("ep8-tuned", LEVELS))).sweeps[0]
    b = summarize(rec(sweep("ep8-eplb", LEVELS, gpus=False))).sweeps[0]
    j = next(f for f in compare(a, b).level(8).figures if f.figure == "j_per_token")  # type: ignore[union-attr]
    assert j.verdict == "n/a" and j.note.startswith("not judged: B: no GPU samples")


def test_old_recordings_compare_without_energy_rows() -> None:
    a = summarize(rec(sweep("ep8-tuned", LEVELS, gpus=False))).sweeps[0]
    b = summarize(rec(sweep("ep8-eplb", LEVELS, gpus=False))).sweeps[0]
    assert all(f.figure not in ("j_per_token", "cost_per_mtok") for f in compare(a, b).rows())


def test_kimitui_report_prices_levels_from_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.jsonl.gz"
    write_recording(path, sweep("ep8-tuned", LEVELS), hosts=["sim"])
    config = tmp_path / "config.toml"
    config.write_text('[cost]\ngpu_hour = 2.10\ncurrency = "EUR"\n')
    assert main(["--config", str(config), "report", str(path), "--format", "json"]) == 0
    level = json.loads(capsys.readouterr().out)["recordings"][0]["sweeps"][0]["levels"][2]
    assert level["cost"]["per_mtok"] == pytest.approx(16.8 / (1600 * 3600) * 1e6)
    assert level["cost"]["currency"] == "EUR"
    config.write_text("[cost]\ngpu_hour = -2\n")
    assert main(["--config", str(config), "report", str(path)]) == 2
    assert f"{config}:2: cost.gpu_hour: Input should be greater than 0" in capsys.readouterr().err


def test_kimitui_sweeps_json_and_tables_carry_the_energy_of_each_level(capsys: pytest.CaptureFixture[str]) -> None:
    from kimitui.analysis.energy import fold
    from kimitui.commands.sweep import print_tables, summary

    events = sweep("ep8-tuned", LEVELS)
    folder = fold(events)
    levels = [e for e in events if isinstance(e, LevelResult)]
    result = next(e for e in events if isinstance(e, SweepResult))
    spec = next(e for e in events if isinstance(e, SweepStarted)).spec
    out = summary(spec, result, levels, None, folder, CostRates(kwh=0.18, currency="USD"))
    assert out["levels"][2]["energy"]["j_per_token"] == pytest.approx(2.5)
    assert out["levels"][2]["cost"]["per_mtok"] == pytest.approx(0.125)
    assert out["idle_power"]["mean_w"] == pytest.approx(800.0)
    assert out["knee"]["status"] in ("knee", "none", "unsure") and out["knee"]["line"]
    json.dumps(out)  # JSON-safe
    print_tables(levels, result, None, folder, CostRates(kwh=0.18, currency="USD"))
    text = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert "energy: 4,000 W mean (4,000 peak) over 8 GPUs, 2.5 J/token, 400 tok/s per kW; cost 0.12 USD/Mtok" in text
    assert "idle power before the sweep: 800 W over 8 GPUs (10 s)" in text
    print_tables(levels, result, None, None, None)
    assert "energy: not measured (no GPU samples cover this level)" in " ".join(capsys.readouterr().out.split())


def test_a_comparisons_tables_give_joules_per_token_their_decimals() -> None:
    from kimitui.report.render import comparison_text

    more = {c: (d, w * 1.2, tpot) for c, (d, w, tpot) in LEVELS.items()}
    a = summarize(rec(sweep("ep8-tuned", LEVELS, jitter=0.2))).sweeps[0]
    b = summarize(rec(sweep("ep8-eplb", more, jitter=0.2))).sweeps[0]
    row = next(line for line in comparison_text(compare(a, b)) if " 64  J/token" in line)
    assert "2.500" in row and "3.000" in row  # not "2" and "3"
