"""Beside the capacity answer (issue 34): the knee of the measured curve, and the most efficient point within the
SLO (``kimitui capacity --objective tokens_per_kj|cost_per_mtok``); on hand-built curves, then on the simulated host
with its GPUs streamed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from pathlib import Path

import httpx
import pytest

from kimitui.analysis.energy import LevelEnergy, WindowPower
from kimitui.capacity.answer import CurvePoint, answer_from_points
from kimitui.capacity.efficiency import PointEnergy, knee_of, most_efficient, point_energy
from kimitui.capacity.slo import parse_slo
from kimitui.analysis.cost import CostRates
from tests.support.net import free_port
from tests.test_capacity_cli import WORKLOAD, capacity

SLO = parse_slo("decode_p50>=20")


def point(x: float, tok_s: float, tpot: float, holds: bool = True) -> CurvePoint:
    check = SLO.check([], [])
    return CurvePoint(x=x, holds=holds, confidence=1.0, check=check, agg_tok_s=tok_s, goodput=None, measurements=1,
                      tpot_p50_s=tpot, ttft_p99_s=None)


CURVE = [point(1, 100, 0.02), point(2, 200, 0.02), point(4, 400, 0.021), point(8, 410, 0.04, holds=False)]


def test_the_knee_of_the_curve_the_search_measured() -> None:
    answer = answer_from_points(SLO, CURVE, rate=False, measured=4)
    knee = knee_of(answer)
    # tests/test_knee.py works this curve by hand: g = 2 x 0.5125^u - 1 crosses 10 % at u = ln 0.55 / ln 0.5125
    u = math.log(0.55) / math.log(0.5125)
    assert knee is not None and knee.status == "knee" and knee.concurrency == pytest.approx(2 ** (1 + u), rel=1e-6)
    assert knee_of(answer_from_points(SLO, CURVE, rate=True, measured=4)) is None  # the rate axis has no C


def energy(j: float | None, tok_s: float = 400.0) -> LevelEnergy:
    w = WindowPower(0.0, 10.0, 8, mean_w=j * tok_s if j is not None else None,
                    energy_j=j * tok_s * 10 if j is not None else None, reason="" if j is not None else "no samples")
    return LevelEnergy("s", 1, 0, w, None, output_tokens=int(tok_s * 10), agg_tok_s=tok_s)


def test_the_most_tokens_per_kj_within_the_slo_never_a_point_outside_it() -> None:
    answer = answer_from_points(SLO, CURVE, rate=False, measured=4)
    points = {1.0: point_energy(1, [energy(8.0, 100)], None), 2.0: point_energy(2, [energy(4.0, 200)], None),
              4.0: point_energy(4, [energy(2.5, 400)], None), 8.0: point_energy(8, [energy(1.0, 410)], None)}
    best = most_efficient(answer, points, "tokens_per_kj")
    assert best.x == 4.0  # C=8 draws even less per token, but the SLO fails there
    assert best.line(answer) == "most tokens per kJ within the SLO: C=4, 400 tokens per kJ (2.5 J/token)"
    assert best.to_json()["tokens_per_kj"] == pytest.approx(400.0)


def test_cost_needs_prices_and_says_so_without_them() -> None:
    answer = answer_from_points(SLO, CURVE, rate=False, measured=4)
    rates = CostRates(kwh=0.18, currency="USD")
    priced = {x: point_energy(x, [energy(j)], rates) for x, j in ((1.0, 8.0), (2.0, 4.0), (4.0, 2.5))}
    best = most_efficient(answer, priced, "cost_per_mtok")
    assert best.x == 4.0 and best.figures is not None and best.figures.cost_per_mtok == pytest.approx(0.125)
    bare = {x: point_energy(x, [energy(j)], None) for x, j in ((1.0, 8.0), (2.0, 4.0), (4.0, 2.5))}
    assert most_efficient(answer, bare, "cost_per_mtok").line(answer) == (
        "lowest cost per million tokens within the SLO: not known (no point within the SLO has a cost ([cost] "
        "prices, and GPU samples for kwh))")
    none = {x: PointEnergy(x, None, None, None, "no GPU samples (reused from a recording, or no --host)")
            for x in (1.0, 2.0, 4.0)}
    assert "no GPU samples" in most_efficient(answer, none, "tokens_per_kj").reason


def test_host_sim_streams_the_gpus_and_says_the_knee_and_the_most_efficient_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kimitui.host.local import LocalHost
    from kimitui.launcher.process import ProcessLauncher
    from kimitui.profiles import load_profile
    from tests.support.launcher_env import write_profile

    monkeypatch.setenv("KIMITUI_SIM_STATE", str(tmp_path / "gpus.json"))
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("KIMITUI_CONFIG", str(tmp_path / "config.toml"))
    port = free_port()
    profile = load_profile(str(write_profile(tmp_path, "cap-tuned", "ep8-tuned", port=port, time_scale=5.0,
                                             startup_s=0.5)))

    async def launch(stop: bool) -> None:
        async with LocalHost("sim") as host:
            launcher = ProcessLauncher(host, simulated=True)
            if not stop:
                await launcher.start(profile)
                return
            for rec in await launcher.records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2.0)

    asyncio.run(launch(stop=False))
    try:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                    break
            time.sleep(0.2)
        rc, out, err = capacity("--host", "sim", "--slo", "decode_p50>=20", *WORKLOAD, "--max", "8", "--json",
                                "--no-progress", "--objective", "tokens_per_kj")
        assert rc == 0, err
        got = json.loads(out)
        assert got["knee"] is not None and got["knee"]["line"]
        best = got["efficiency"]
        assert best["objective"] == "tokens_per_kj" and best["x"] is not None, best
        assert best["tokens_per_kj"] > 0 and best["j_per_token"] == pytest.approx(1000 / best["tokens_per_kj"])
        assert any(p["x"] == best["x"] and p["holds"] for p in got["probes"])
    finally:
        asyncio.run(launch(stop=True))
