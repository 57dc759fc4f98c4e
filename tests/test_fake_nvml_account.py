"""The fake NVML keeps its own CPU seconds for bench/bench_agent.py (issue 33: the agent charged alone)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kimitui.sim.nvml import ACCOUNT_ENV_VAR
from tests.support.agentproc import frames, start_agent, write_busy_state


def test_the_fake_writes_its_own_cpu_seconds_and_the_agent_streams_as_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state, account = tmp_path / "gpus.json", tmp_path / "fake-cpu"
    write_busy_state(state)
    monkeypatch.setenv(ACCOUNT_ENV_VAR, str(account))
    proc = start_agent("--interval", "0.05", "--count", "20", "--no-stdin", state=state, stdin=False)
    try:
        got = frames(proc, until="bye", timeout=30.0)
    finally:
        proc.kill()
        proc.wait()
    ticks = [f for f in got if f["type"] == "tick"]
    assert len(ticks) == 20 and all(len(t["gpus"]) == 8 for t in ticks)
    assert ticks[-1]["gpus"][0]["util_pct"] == 90.0 and ticks[-1]["gpus"][3]["power_w"] == pytest.approx(413.0)
    assert ticks[-1]["gpus"][5]["throttle_reasons"] == ["sw_power_cap"]  # a slow group rides in every tick
    seconds = float(account.read_text())
    assert 0.0 < seconds < 5.0  # a second of ticks: milliseconds of the fake's own CPU, said in seconds


def test_without_the_variable_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ACCOUNT_ENV_VAR, raising=False)
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    proc = start_agent("--interval", "0.05", "--count", "3", "--no-stdin", state=state, stdin=False)
    try:
        got = frames(proc, until="bye", timeout=30.0)
    finally:
        proc.kill()
        proc.wait()
    assert [f["type"] for f in got].count("tick") == 3
    assert not any(p.name.startswith("fake-cpu") for p in tmp_path.iterdir())
