"""The fake libnvidia-ml: pynvml's real wrappers over it, scenario parsing and its errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from kimitui.sim import nvml as fake_nvml
from kimitui.sim.nvml import ScenarioError, parse_scenario
from kimitui.telemetry import agent
from tests.support.agentproc import write_busy_state


@pytest.fixture
def nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    monkeypatch.setenv("KIMITUI_SIM_STATE", str(state))
    yield state
    fake_nvml.uninstall()


def test_pynvml_wrappers_return_the_simulated_gpus(nvml: Path) -> None:
    fake_nvml.install("pcie_delay=0")
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetCount() == 8
    h = pynvml.nvmlDeviceGetHandleByIndex(6)
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    mem = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert mem.total == int(97_887 * 1024 * 1024) and mem.used == int(85_006 * 1024 * 1024)
    assert pynvml.nvmlDeviceGetPowerUsage(h) == 416_000  # mW, as NVML reports
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(h) == 600_000
    assert pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h) == 5 and pynvml.nvmlDeviceGetMaxPcieLinkWidth(h) == 16
    assert pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES) == 14_000
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetFanSpeed(h)  # passively cooled server board
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetNvLinkState(h, 0)  # no NVLink on this card: the symbol is simply absent
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    assert len(procs) == 1 and procs[0].usedGpuMemory == int(85_006 * 1024 * 1024)
    assert pynvml.nvmlSystemGetProcessName(procs[0].pid) == "sglang::scheduler_TP6_EP6"
    # module-level pynvml names are reachable through kimitui.sim.nvml too
    assert fake_nvml.nvmlDeviceGetCount() == 8 and fake_nvml.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost


def test_lost_gpu_from_the_simulator_state(nvml: Path) -> None:
    write_busy_state(nvml, lost={1})
    fake_nvml.install("pcie_delay=0")
    pynvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(1))
    assert pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(0)).gpu == 90


def test_uninitialised_calls_fail_like_nvml(nvml: Path) -> None:
    fake_nvml.install()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_scenario_spec() -> None:
    sc = parse_scenario("not_supported=power_w@3,pcie; no_permission=temp_c ;lost=2@1.5;xid=4:48@0.2;old_driver;gpus=4")
    assert sc.not_supported["nvmlDeviceGetPowerUsage"] == {3}
    assert sc.not_supported["nvmlDeviceGetPcieThroughput"] is None
    assert sc.no_permission["nvmlDeviceGetTemperatureV"] is None
    assert sc.lost_at == {2: 1.5} and sc.xids == [(4, 48, 0.2)] and sc.old_driver and sc.gpus == 4
    assert sc.driver_version.startswith("470.")


@pytest.mark.parametrize("spec, words", [
    ("not_supported=warp_drive", "unknown field 'warp_drive'"),
    ("lost=two", "bad value in 'lost=two'"),
    ("turbo", "unknown item 'turbo'"),
])
def test_bad_scenario_spec_names_the_item(spec: str, words: str) -> None:
    with pytest.raises(ScenarioError, match=words) as info:
        parse_scenario(spec)
    assert "KIMITUI_FAKE_NVML" in str(info.value)


def test_configure_sets_the_scenario_for_the_next_install(nvml: Path) -> None:
    fake_nvml.configure("not_supported=power_w")
    try:
        fake_nvml.nvmlInit()  # installs with the configured scenario
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        fake_nvml.configure(None)


def test_agent_backend_copes_with_an_older_pynvml_module(nvml: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hosts may carry an older nvidia-ml-py: wrappers/constants missing means 'use the older call'."""
    import io

    from kimitui.telemetry.agent import NvmlBackend, Output

    for name in ("nvmlDeviceGetTemperatureV", "nvmlMemory_v2", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetProcessesUtilizationInfo"):
        monkeypatch.delattr(pynvml, name)
    monkeypatch.setenv("KIMITUI_FAKE_NVML", "pcie_delay=0")
    backend = NvmlBackend(Output(io.StringIO()), fake=True)
    caps = backend.caps()
    assert caps["features"]["temp_api"] == "temperature" and caps["features"]["memory_api"] == "memory_v1"
    assert caps["features"]["throttle_api"] == "clocks_throttle_reasons"
    assert caps["features"]["proc_util_api"] == "process_utilization"
    row = backend.sample()[2]
    assert row["temp_c"] == 72.0 and row["mem_used_mib"] == pytest.approx(85_002 + 512, abs=1)
    assert backend.procs()[2]["sm_util_pct"] == 92.0


def test_the_fake_driver_and_the_agent_share_one_clock_reason_table() -> None:
    """One table (the agent's, stdlib-only): the simulator reads it, so the two cannot drift apart."""
    assert fake_nvml.CLOCK_REASON_BITS is agent.CLOCK_REASON_BITS
    assert len(agent.CLOCK_REASON_BITS) == 11 and agent.reason_names(0x400 | 0x200) == ["board_limit", "reliability"]
