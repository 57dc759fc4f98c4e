"""Issue 32's smaller items (H4): what an operator misread at 200x55, 120x40 and 80x24.

Each test names what was seen; each failed before its fix."""

from __future__ import annotations

import concurrent.futures
import json
import re
from pathlib import Path

import httpx

from kimitui.sim.truth import TRUTH_ENV
from tests.support.simserver import start_sim

SIZES = [(200, 55), (120, 40), (80, 24)]


# ----------------------------------------------------------------------------- the simulator's EPLB line

def test_the_simulated_rebalance_end_line_says_the_stall_on_the_simulated_clock(tmp_path: Path) -> None:
    """Seen at time scale 20: ``rebalance end time=0.092s`` where the cause said 1.8 s.  A real server measures
    the stall on its own clock; the simulator's clock is the simulated one, so the line says the stall the
    cause says (the truth file's wall seconds times the scale)."""
    prof = tmp_path / "eplb-fast.toml"
    prof.write_text('name = "eplb-fast"\nextends = "ep8-eplb"\neplb_rebalance_num_iterations = 300\n')
    truth = tmp_path / "truth.jsonl"
    scale = 50.0
    body = {"model": "/root/models/Kimi-K2.6", "messages": [{"role": "user", "content": "balance"}],
            "max_tokens": 900, "ignore_eos": True}
    with start_sim(str(prof), time_scale=scale, seed=2, env={TRUTH_ENV: str(truth)}) as sim:
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            for f in [ex.submit(httpx.post, sim.url + "/v1/chat/completions", json=body, timeout=120)
                      for _ in range(4)]:
                assert f.result().status_code == 200
        lines = sim.lines()
    logged = [float(m.group(1)) for line in lines if "TP0" in line
              for m in [re.search(r"rebalance end time=([\d.]+)s", line)] if m]
    stalls = [(r["end"] - r["start"]) * scale for r in map(json.loads, truth.read_text().splitlines())
              if r["cause"] == "eplb"]
    assert logged and len(logged) == len(stalls), (logged, stalls)
    for said, stall in zip(logged, stalls):
        assert abs(said - stall) <= max(0.5, 0.25 * stall), (logged, stalls)
