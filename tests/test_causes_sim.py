"""Attribution on the simulated host, end to end (issue 18): kimitui headless (the live controller, the real
agent on the fake NVML, the real load process, the log follower) sweeps a server whose profile runs every
episode fault in turn (``[sim] fault = "mixed"``) with EPLB on; every straggler the simulator's truth
explains must get that cause, and none may be confidently wrong.  bench/attribution_accuracy.py measures
the same on 200+ stragglers; this is its short form for every CI run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kimitui.analysis.causes.sweep_causes import sweep_causes
from kimitui.events import SweepResult
from kimitui.live import LiveController
from kimitui.recording import read_recording
from tests.support.truthscore import read_truth, right_answer, truth_of

pytestmark = pytest.mark.timeout(400)


async def _next(sub, ok, timeout: float):
    async with asyncio.timeout(timeout):
        while True:
            ev = await sub.get()
            if ok(ev):
                return ev


async def test_every_cause_the_simulator_makes_is_named(sim_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = sim_home / "truth.jsonl"
    monkeypatch.setenv("KIMITUI_SIM_TRUTH", str(truth))
    (sim_home / "state" / "kimitui").mkdir(parents=True, exist_ok=True)
    local = sim_home / "cwd" / "profiles" / "ep8-eplb.toml"
    local.write_text(local.read_text().replace("time_scale = 40.0", "time_scale = 5.0\nstartup_s = 10.0\n"
                                               'fault = "mixed"\n[sim.tuning]\nepisode_every_s = 21.0\n'
                                               "episode_s = 10.0\nepisode_after_s = 12.0\nepisode_slowdown = 4.0"))
    rec = sim_home / "run.jsonl"
    ctl = LiveController(record_path=str(rec), default_profile="ep8-eplb")
    sub = ctl.session.subscribe("test", kinds=["profile_state", "sweep_result"])
    await ctl.start()
    try:
        await _next(sub, lambda e: getattr(e, "state", None) == "serving", 120)
        spec = ctl.default_sweep_spec().model_copy(update={
            "levels": [4, 8], "requests_per_level": 48, "duration_s": None, "max_tokens": 256, "warmup_requests": 0,
            "stop_on_oversaturation": False, "straggler_gap_s": 0.8, "mode": "sustained", "repeats": 1})
        await ctl.start_sweep(spec)
        await _next(sub, lambda e: isinstance(e, SweepResult), 300)
    finally:
        await ctl.shutdown()
    events = list(read_recording(ctl.last_recording_path or rec).events)
    records = read_truth(truth)
    causes = sweep_causes(events)
    scored, wrong, confidently_wrong, seen = 0, [], [], set()
    for a in causes.attributions.values():
        true = truth_of(a, records)
        if true is None:
            continue
        scored += 1
        seen.add(true)
        if a.cause != right_answer(true):
            wrong.append((a.request_id, a.cause, a.confidence, true))
            if a.confidence == "high":
                confidently_wrong.append(wrong[-1])
    summary = json.dumps({"scored": scored, "causes": sorted(seen), "wrong": wrong[:5]})
    print(summary)
    assert scored >= 15 and len(seen) >= 3, summary
    assert not confidently_wrong, summary
    assert len(wrong) <= 0.05 * scored, summary
