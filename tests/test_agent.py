"""The GPU agent as a real subprocess, over the fake NVML (pynvml's real wrappers run)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pynvml
import pytest

from kimitui.sim import nvml as fake_nvml
from kimitui.telemetry.agent import parse_smi_line, rank_from_title, reason_names
from tests.support.agentproc import ROOT, frames, run_agent, start_agent, write_busy_state

FAST = ("--interval", "0.05", "--pcie-interval", "0.05", "--procs-interval", "0.1")


def by_type(got: list[dict], kind: str) -> list[dict]:
    return [f for f in got if f["type"] == kind]


def test_streams_caps_then_ticks_with_the_simulators_values(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent(*FAST, "--count", "6", state=state, scenario="pcie_delay=0.005")
    assert got[0]["type"] == "caps" and got[-1]["type"] == "bye"
    caps = got[0]
    assert caps["backend"] == "fake" and caps["driver"] == "575.57.08" and len(caps["gpus"]) == 8
    g0 = caps["gpus"][0]
    assert g0["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert (g0["power_limit_w"], g0["pcie_max_gen"], g0["pcie_max_width"]) == (600.0, 5, 16)
    assert g0["memory_total_mib"] == pytest.approx(97887.0)
    assert "fan" not in g0["supported"]  # passively cooled: never a fake zero
    ticks = by_type(got, "tick")
    assert [t["seq"] for t in ticks] == list(range(6))
    last = {g["index"]: g for g in ticks[-1]["gpus"]}
    assert set(last) == set(range(8))
    assert last[3]["util_pct"] == 93.0 and last[3]["power_w"] == pytest.approx(413.0)
    assert last[3]["temp_c"] == 73.0 and last[3]["pstate"] == 1
    assert last[3]["mem_used_mib"] == pytest.approx(85_003.0, abs=1)
    assert last[5]["throttle_reasons"] == ["sw_power_cap"] and last[4]["throttle_reasons"] == []
    assert last[7]["pcie_tx_kbps"] == 8000.0 and last[7]["pcie_rx_kbps"] == 16000.0


def test_procs_carry_sglang_rank_and_per_process_util(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent(*FAST, "--count", "3", state=state, scenario="pcie_delay=0.001")
    procs = by_type(got, "procs")[0]["procs"]
    assert sorted(p["gpu_index"] for p in procs) == list(range(8))
    p3 = next(p for p in procs if p["gpu_index"] == 3)
    assert p3["pid"] == os.getpid() and p3["rank"] == "TP3_EP3"
    assert p3["used_mib"] == pytest.approx(85_003.0, abs=1) and p3["sm_util_pct"] == 93.0


def test_not_supported_fields_are_reported_in_caps_never_as_zero(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent(*FAST, "--count", "3", state=state,
                    scenario="not_supported=power_w@3,pcie,nvmlDeviceGetSupportedEventTypes;no_permission=temp_c@1;"
                             "pcie_delay=0.001")
    caps = got[0]
    assert caps["features"]["xid"] == "not_supported"
    assert caps["gpus"][3]["unsupported"]["power_w"] == "not_supported"
    assert "power_w" not in caps["gpus"][3]["supported"] and "power_w" in caps["gpus"][2]["supported"]
    assert caps["gpus"][1]["unsupported"]["temp_c"] == "no_permission"
    assert caps["gpus"][0]["unsupported"]["pcie_tx_kbps"] == "not_supported"
    for tick in by_type(got, "tick"):
        rows = {g["index"]: g for g in tick["gpus"]}
        assert "power_w" not in rows[3] and rows[2]["power_w"] > 0
        assert "temp_c" not in rows[1] and "pcie_tx_kbps" not in rows[0]
    assert not by_type(got, "error")  # probed once, not re-tried and re-reported every tick


def test_gpu_lost_mid_run_becomes_an_event_and_the_others_keep_streaming(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent(*FAST, "--count", "14", state=state, scenario="lost=2@0.3;pcie_delay=0.001")
    lost_at = next(i for i, f in enumerate(got) if f["type"] == "event")
    assert got[lost_at]["event"] == "lost" and got[lost_at]["index"] == 2
    before = [t for t in got[:lost_at] if t["type"] == "tick"]
    after = [t for t in got[lost_at:] if t["type"] == "tick"]
    assert before and {g["index"] for g in before[0]["gpus"]} == set(range(8))
    assert len(after) >= 3
    for tick in after[1:]:
        assert {g["index"] for g in tick["gpus"]} == set(range(8)) - {2}
    assert len(by_type(got, "event")) == 1  # reported once, not every tick


def test_old_driver_without_v2_memory_call_falls_back_to_v1(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent(*FAST, "--count", "2", state=state, scenario="old_driver;pcie_delay=0.001")
    caps = got[0]
    assert caps["driver"].startswith("470.")
    assert caps["features"]["memory_api"] == "memory_v1"
    assert caps["features"]["temp_api"] == "temperature"
    assert caps["features"]["throttle_api"] == "clocks_throttle_reasons"
    assert caps["features"]["proc_util_api"] == "process_utilization"
    row = by_type(got, "tick")[-1]["gpus"][0]
    assert row["mem_used_mib"] == pytest.approx(85_000.0 + 512, abs=1)  # v1 "used" includes the reservation
    assert row["temp_c"] == 70.0
    procs = by_type(got, "procs")[0]["procs"]
    assert procs[0]["sm_util_pct"] == 90.0


def test_driver_580_legacy_process_util_fails_but_util_is_still_reported(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    os.environ["KIMITUI_SIM_STATE"] = str(state)
    try:
        fake_nvml.install("driver580")
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetProcessUtilization(h, 0)
    finally:
        fake_nvml.uninstall()
        del os.environ["KIMITUI_SIM_STATE"]
    got = run_agent(*FAST, "--count", "2", state=state, scenario="driver580;pcie_delay=0.001")
    assert got[0]["driver"].startswith("580.")
    assert got[0]["features"]["proc_util_api"] == "processes_utilization_info"
    procs = by_type(got, "procs")[0]["procs"]
    assert {p["sm_util_pct"] for p in procs} == {90.0 + i for i in range(8)}


def test_xid_event_is_streamed(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent(*FAST, "--count", "12", state=state, scenario="xid=4:79@0.2;pcie_delay=0.001")
    xids = [f for f in by_type(got, "event") if f["event"] == "xid"]
    assert xids == [{**xids[0], "index": 4, "xid": 79}]
    assert got[0]["features"]["xid"] == "events"


def test_idle_host_without_state_reports_idle_gpus(tmp_path: Path) -> None:
    got = run_agent(*FAST, "--count", "2", state=tmp_path / "missing.json", scenario="pcie_delay=0.001")
    row = by_type(got, "tick")[-1]["gpus"][0]
    assert row["util_pct"] == 0.0 and row["mem_used_mib"] == 0.0
    assert by_type(got, "procs")[0]["procs"] == []


def _wait_exit(proc, timeout: float = 5.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_agent_exits_on_stdin_eof(tmp_path: Path) -> None:
    proc = start_agent(*FAST, scenario="pcie_delay=0.001", state=tmp_path / "s.json")
    got = frames(proc, until="tick")
    assert got[-1]["type"] == "tick"
    proc.stdin.close()
    assert _wait_exit(proc) == 0


def test_agent_exits_when_stdout_breaks(tmp_path: Path) -> None:
    proc = start_agent(*FAST, scenario="pcie_delay=0.001", state=tmp_path / "s.json")
    frames(proc, until="tick")
    proc.stdout.close()  # the reader is gone: the next write raises EPIPE
    assert _wait_exit(proc) == 4


def test_agent_exits_after_missed_heartbeats_and_stays_alive_while_pinged(tmp_path: Path) -> None:
    proc = start_agent(*FAST, "--heartbeat", "1.5", scenario="pcie_delay=0.001", state=tmp_path / "s.json")
    pinging = threading.Event()
    pinging.set()

    def ping() -> None:  # like GpuStream: from the start, every 0.2 s
        while pinging.is_set():
            try:
                proc.stdin.write("ping\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                return
            time.sleep(0.2)  # the client's pace (GpuStream pings every 0.2 s)

    pinger = threading.Thread(target=ping, daemon=True)
    pinger.start()
    try:
        frames(proc, until="tick")
        time.sleep(2.4)  # a fixed window on purpose: longer than the heartbeat, and the agent must outlive it
        assert proc.poll() is None
        pinging.clear()
        pinger.join()
        code = _wait_exit(proc, timeout=8)  # pings stop; nobody reads its stdout: it leaves by itself
        assert code == 3
    finally:
        pinging.clear()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_control_channel_changes_interval(tmp_path: Path) -> None:
    proc = start_agent("--interval", "1.0", scenario="pcie_delay=0.001", state=tmp_path / "s.json")
    try:
        frames(proc, until="tick")
        proc.stdin.write("interval 0.05\n")
        proc.stdin.flush()
        t0 = time.monotonic()
        ticks = [f for f in frames(proc, until="never", limit=12) if f["type"] == "tick"]
        assert len(ticks) >= 5 and time.monotonic() - t0 < 3.0
    finally:
        proc.kill()
        proc.wait()


def test_a_bad_interval_on_the_control_channel_is_ignored(tmp_path: Path) -> None:
    """``interval inf`` made the tick loop sleep(inf): OverflowError, no tick ever again (issue 13)."""
    proc = start_agent("--interval", "0.05", scenario="pcie_delay=0.001", state=tmp_path / "s.json")
    try:
        frames(proc, until="tick")
        proc.stdin.write("interval nan\ninterval x\ninterval\n")
        proc.stdin.flush()
        assert len([f for f in frames(proc, until="never", limit=10, timeout=10) if f["type"] == "tick"]) >= 5
        proc.stdin.write("interval inf\ninterval 1e9\n")  # ignored: ticks go on every 0.05 s
        proc.stdin.flush()
        t0 = time.monotonic()
        assert len([f for f in frames(proc, until="never", limit=10, timeout=5) if f["type"] == "tick"]) >= 5
        assert time.monotonic() - t0 < 3.0 and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_nvidia_smi_values_that_are_no_reading_become_none() -> None:
    row = parse_smi_line("0, GPU-a, n, inf, nan, 1, 97887, 1e999, 600.00, 35, 180, 405, P², 0x1, ², 16")
    assert row["util_pct"] is None and row["mem_util_pct"] is None and row["power_w"] is None
    assert row["pstate"] is None and row["pcie_max_gen"] is None and row["pcie_max_width"] == 16
    json.loads(json.dumps(row), parse_constant=lambda c: pytest.fail(f"{c} in a frame"))


def test_helpers() -> None:
    assert rank_from_title("sglang::scheduler_DP2_TP2_EP2") == "DP2_TP2_EP2"
    assert rank_from_title("sglang::scheduler_TP3") == "TP3"
    assert rank_from_title("python -m sglang.launch_server") is None
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]


SMI_LINES = [
    "0, GPU-aaaa, NVIDIA RTX PRO 6000 Blackwell Server Edition, 97, 41, 85000, 97887, 412.35, 600.00, 71, 2400, 14001, P1, 0x0000000000000004, 5, 16",
    "1, GPU-bbbb, NVIDIA RTX PRO 6000 Blackwell Server Edition, 0, 0, 1, 97887, [N/A], 600.00, 35, 180, 405, P8, 0x0000000000000001, 5, 16",
    "2, GPU-cccc, NVIDIA RTX PRO 6000 Blackwell Server Edition, [Not Supported], [Not Supported], 1, 97887, 50.00, [N/A], 35, 180, 405, [N/A], [N/A], 5, 16",
]


def test_nvidia_smi_csv_parser() -> None:
    r0, r1, r2 = (parse_smi_line(x) for x in SMI_LINES)
    assert r0["index"] == 0 and r0["util_pct"] == 97.0 and r0["power_w"] == 412.35 and r0["pstate"] == 1
    assert r0["throttle_reasons"] == ["sw_power_cap"] and r0["pcie_max_gen"] == 5
    assert r1["power_w"] is None and r1["throttle_reasons"] == ["gpu_idle"]
    assert r2["util_pct"] is None and r2["power_limit_w"] is None and r2["pstate"] is None
    assert r2["throttle_reasons"] is None
    with pytest.raises(ValueError, match="columns"):
        parse_smi_line("0, GPU-x, name")


def test_nvidia_smi_backend_streams_blocks(tmp_path: Path) -> None:
    """A stand-in nvidia-smi (no GPU here) printing two -lms blocks, then the real backend code."""
    script = tmp_path / "nvidia-smi"
    body = "\n".join(SMI_LINES[:2] * 3)
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{body}\nEOF\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    proc = subprocess.run(
        [sys.executable, "-m", "kimitui.telemetry.agent", "--backend", "nvidia-smi", "--nvidia-smi", str(script),
         "--no-stdin"], capture_output=True, text=True, timeout=30,
    )
    got = [json.loads(x) for x in proc.stdout.splitlines()]
    assert proc.returncode == 0, proc.stderr
    assert got[0]["type"] == "caps" and got[0]["backend"] == "nvidia-smi"
    assert "power_w" in got[0]["gpus"][0]["supported"] and got[0]["gpus"][1]["unsupported"]["power_w"] == "not_supported"
    ticks = by_type(got, "tick")
    assert [t["seq"] for t in ticks] == [0, 1, 2]
    assert [g["index"] for g in ticks[0]["gpus"]] == [0, 1]
    assert "power_w" not in ticks[0]["gpus"][1]


def test_slow_pcie_calls_never_hold_up_the_ticks(tmp_path: Path) -> None:
    """Each PCIe call blocks (20 ms on hardware; 200 ms here): 16 serial calls per tick would be 3.2 s."""
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    got = run_agent("--interval", "0.05", "--pcie-interval", "0.5", "--count", "20", state=state,
                    scenario="pcie_delay=0.2")
    ticks = by_type(got, "tick")
    assert len(ticks) == 20
    assert ticks[-1]["t"] - ticks[0]["t"] < 5.0  # ~1 s: PCIe is sampled on worker threads
    assert ticks[-1]["gpus"][7]["pcie_rx_kbps"] == 16000.0  # and its values still arrive


def test_bench_mode_reports_latency_per_nvml_call(tmp_path: Path) -> None:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    env = {**os.environ, "KIMITUI_SIM_STATE": str(state), "KIMITUI_FAKE_NVML": "pcie_delay=0.02"}
    proc = subprocess.run([sys.executable, "-m", "kimitui.telemetry.agent", "--backend", "fake", "--bench",
                           "--count", "10"], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = {r["call"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert rows["nvmlDeviceGetPcieThroughput(TX)"]["p50_us"] >= 20_000  # the blocking 20 ms sample
    assert rows["nvmlDeviceGetFanSpeed"]["error"] == "NVMLError_NotSupported"
    assert rows["nvmlDeviceGetUtilizationRates"]["n"] == 80 and rows["nvmlDeviceGetUtilizationRates"]["error"] is None
    assert 0 < rows["tick (8 GPUs)"]["p50_us"] < 20_000  # PCIe stays off the tick path
