"""Round trips through REAL recordings made on the simulated host.

The real simulator (``kimitui sim serve``) runs ep8-tuned and ep8-v2; the real
SweepRunner (its load process, aiohttp) sweeps them while a RecordingWriter
records the session.  Then: the verdict, same-profile runs, replay, a
truncated file, the report command and ``sweep --like``'s spec.

Burst levels 8 and 256, 24 tokens, time-scale 1: C=256 is where ep8-v2's EPLB
cost shows (the seeds' peak 1538 -> 862).  Real time, because a faster clock
starves the simulator of CPU on this shared 2-core host (at time-scale 2 under
load ~9 the measured decode ratio shrank from the model's -43 % to -22 %).
The three servers start at once; the sweeps run one after another.
"""

from __future__ import annotations

import asyncio
import csv
import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kimitui.loadgen.runner import SweepRunner
from kimitui.cli import main
from kimitui.events import LevelResult, Marker, ServerInfo, SweepSpec
from kimitui.recording import RecordingIndex, RecordingWriter, read_recording, spec_from_recording
from kimitui.replay import Replayer
from kimitui.report import compare, summarize
from kimitui.session import Session
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.settings import load_settings
from tests.support.simserver import SimServerProcess, start_sim

pytestmark = pytest.mark.timeout(180)

LEVELS = [8, 256]
MAX_TOKENS = 24
TIME_SCALE = 1.0


@dataclass
class Recorded:
    profile: str
    path: Path
    spec: SweepSpec
    live_levels: list[LevelResult]


def fast_profile(tmp: Path, name: str) -> Path:
    """The named profile with a half-second simulated start-up (a test-speed knob of the simulator only)."""
    path = tmp / f"fast-{name}.toml"
    path.write_text(f'name = "fast-{name}"\nextends = "{name}"\n[sim]\nstartup_s = 0.5\n')
    return path


async def record(sim: SimServerProcess, tmp: Path, profile: str, name: str) -> Recorded:
    session = Session(host="sim")
    writer = RecordingWriter(tmp / f"{name}.jsonl.gz", hosts=["sim"], meta={"profile": profile}).start()
    session.add_sink(writer)
    live: list[LevelResult] = []
    session.add_sink(lambda ev: live.append(ev) if isinstance(ev, LevelResult) else None)
    async with httpx.AsyncClient() as client:  # what the metrics poller publishes
        info = (await client.get(sim.url + "/server_info")).json()
    session.publish(ServerInfo(url=sim.url, version=info.get("version"), args=info))
    session.publish(Marker(label=f"sweep {profile}"))
    spec = SweepSpec(url=sim.url, model=sim.model, levels=LEVELS, mode="burst", max_tokens=MAX_TOKENS,
                     stop_on_oversaturation=False)
    runner = SweepRunner(session, spec, profile=profile)
    await runner.start()
    result = await asyncio.wait_for(runner.wait(), 120)
    assert result.outcome == "completed", result.reason
    path = await writer.aclose()
    return Recorded(profile, path, spec, live)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    tmp = tmp_path_factory.mktemp("simrec")
    plan = {"tuned": ("ep8-tuned", 1), "v2": ("ep8-v2", 1), "tuned2": ("ep8-tuned", 2)}

    async def record_all() -> dict[str, Recorded]:
        # start the three servers at once (an idle simulator costs ~0.5 % of a core), sweep one at a time
        sims = {k: start_sim(str(fast_profile(tmp, prof)), time_scale=TIME_SCALE, seed=seed)
                for k, (prof, seed) in plan.items()}
        await asyncio.gather(*(sim.__aenter__() for sim in sims.values()))
        try:
            return {k: await record(sims[k], tmp, plan[k][0], k) for k in plan}
        finally:
            await asyncio.gather(*(sim.__aexit__(None, None, None) for sim in sims.values()))

    return asyncio.run(record_all())


def model_decode_ratio(batch: int) -> float:
    """What the simulator's own performance model says ep8-v2/ep8-tuned decode speed is at ``batch``."""
    tuned, v2 = PerfModel(load_settings("ep8-tuned")), PerfModel(load_settings("ep8-v2"))
    kv = batch * 60
    return tuned.decode_step_s(batch, kv) / v2.decode_step_s(batch, kv)


def test_verdict_ep8_tuned_vs_ep8_v2_is_a_confounded_regression(runs: dict[str, Recorded]) -> None:
    cmp = compare(runs["tuned"].path, runs["v2"].path)
    assert set(cmp.knob_diff or {}) == {"enable_eplb", "num_continuous_decode_steps"}
    if cmp.verdict == "unsure" and cmp.client_line():
        # a machine so busy the in-process load client fell behind (load ~10 on 2 cores): those levels are
        # not judged, and "unsure, the client could not keep up" is then the one right answer
        assert "the client could not keep up" in cmp.client_line() and not cmp.improvements, cmp.summary_lines()
        return
    assert cmp.verdict == "regressed", cmp.summary_lines()
    dec = next(f for f in cmp.level(256).figures if f.figure == "decode_tok_s_p50")  # type: ignore[union-attr]
    expected = (model_decode_ratio(256) - 1) * 100  # about -43 %
    if dec.note.startswith("distorted"):
        # the load client fell behind at C=256 (both cores busy beside the suite): its chunk stamps are late,
        # so the figure they make is not judged, whatever its ratio: "unsure", and why
        assert dec.verdict == "unsure" and dec.why, (dec, cmp.client_line())
    else:
        assert dec.verdict == "regressed", (dec.verdict, dec.why, dec.note)
        assert dec.change_pct == pytest.approx(expected, abs=7), (
            f"decode p50 at C=256 {dec.change_pct:.1f} % vs model {expected:.1f} %")
    assert cmp.peak is not None and cmp.peak.verdict == "regressed"
    assert -50 < cmp.peak.change_pct < -25  # type: ignore[operator]
    assert cmp.confounded and cmp.summary_lines()[-1].startswith("confounded: 2 knobs changed")
    assert cmp.summary_lines()[0] == f"worse: ep8-tuned ({cmp.a.sweep_id}) vs ep8-v2 ({cmp.b.sweep_id})"


# This host is shared (2 cores, several test suites at once): a simulated server that
# loses the CPU for a moment is slower for real, so same-profile runs here spread by up
# to ~10 % in short levels — more than on a GPU host.  Bootstrap noise cannot see that;
# the A/A check therefore asks for a 15 % effect (the A/B check above uses the default 5 %).
AA_MIN_EFFECT = 0.15


def test_same_profile_runs_are_never_better_or_worse(runs: dict[str, Recorded]) -> None:
    """A/A: nothing better or worse; *same* where the interval fits the margin, else *unsure* with a reason."""
    cmp = compare(runs["tuned"].path, runs["tuned2"].path, min_effect=AA_MIN_EFFECT)
    assert cmp.verdict in ("same", "unsure"), cmp.summary_lines()
    assert not cmp.regressions and not cmp.improvements, cmp.summary_lines()
    assert all(f.why and f.settle for f in cmp.rows() if f.primary and f.verdict == "unsure"), cmp.summary_lines()
    assert cmp.knob_diff == {}
    assert cmp.summary_lines()[0].startswith(cmp.verdict)


def test_replay_shows_the_same_level_rows_as_live(runs: dict[str, Recorded]) -> None:
    rec = runs["v2"]
    assert [lv.concurrency for lv in rec.live_levels] == LEVELS

    async def replay() -> list[LevelResult]:
        session = Session(host="sim")
        sub = session.subscribe("ui", kinds=["level_result"])
        rep = Replayer(session, RecordingIndex.open(rec.path), speed=None)
        await rep.start()
        await asyncio.wait_for(rep.wait(), 10)
        await rep.stop()
        return [ev for ev in sub.drain() if isinstance(ev, LevelResult)]

    assert asyncio.run(replay()) == rec.live_levels
    # and the report's rows are those rows
    (run,) = summarize(rec.path).sweeps
    assert [run.levels[c].agg_tok_s for c in LEVELS] == [lv.agg_tok_s for lv in rec.live_levels]


def test_truncated_real_recording_opens_and_reports(runs: dict[str, Recorded], tmp_path: Path) -> None:
    data = gzip.decompress(runs["tuned"].path.read_bytes())
    lines = data.split(b"\n")
    cut_at = next(i for i, line in enumerate(lines) if b'"kind":"level_result"' in line) + 3
    truncated = tmp_path / "crashed.jsonl"
    truncated.write_bytes(b"\n".join(lines[:cut_at]) + b"\n" + lines[cut_at][: len(lines[cut_at]) // 2])
    rec = read_recording(truncated)
    assert len(rec.events) == cut_at - 1
    assert [s.line_no for s in rec.skipped] == [cut_at + 1] and "truncated" in rec.skipped[0].reason
    (run,) = summarize(truncated).sweeps
    assert sorted(run.levels) == [8] and run.outcome is None
    assert main(["report", str(truncated)]) == 0


def test_report_command_on_real_recordings(runs: dict[str, Recorded], capsys: pytest.CaptureFixture[str]) -> None:
    a, b, a2 = (str(runs[k].path) for k in ("tuned", "v2", "tuned2"))
    assert main(["report", a, "--vs", b, "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "## Verdict: Worse" in out and "confounded: 2 knobs changed" in out
    assert main(["report", a, "--vs", a2, "--fail-on-regression", "--format", "csv",
                 "--min-effect", str(AA_MIN_EFFECT)]) == 0
    overall = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))[-1]
    assert overall["figure"] == "overall" and overall["verdict"] in ("same", "unsure")
    assert overall["note"] == f"compared at C={', '.join(map(str, LEVELS))}"


def test_spec_for_sweep_like(runs: dict[str, Recorded]) -> None:
    assert spec_from_recording(runs["v2"].path) == runs["v2"].spec

