"""A fake ``libnvidia-ml.so.1`` for the simulated host, so pynvml's REAL wrappers run.

Instead of imitating pynvml's Python functions, this replaces the C library
object pynvml calls into (``pynvml.nvmlLib``; reference/feasibility.md §4).
Every ``pynvml.nvmlDevice*`` wrapper then runs its real code: ctypes structs,
``byref`` marshalling, return code -> ``NVMLError_<Name>`` subclass, and
``NVMLError_FunctionNotFound`` for a symbol this "driver" lacks.  The agent's
pynvml backend is therefore exercised unchanged; ``--backend fake`` only
calls :func:`install` first.

The GPUs are 8 x RTX PRO 6000 Blackwell Server Edition (96 GB, 600 W, PCIe
Gen5 x16, no NVLink, passively cooled so no fan), and what they do comes from
the simulator's state file (:func:`kimitui.sim.gpustate.read_state`).

Scenario knobs, for tests and demos, from :func:`configure` or the
``KIMITUI_FAKE_NVML`` environment variable (``;``-separated)::

    not_supported=power_w,pcie@3   # NOT_SUPPORTED for a field (on GPU 3 only with @3)
    no_permission=temp_c           # NO_PERMISSION likewise
    lost=3@1.5                     # GPU 3 falls off the bus 1.5 s after nvmlInit
    old_driver                     # 470-era driver: no nvmlDeviceGetMemoryInfo_v2 (or TemperatureV)
    driver580                      # legacy per-process utilisation call fails (NOT_SUPPORTED)
    xid=2:79@0.5                   # XID 79 on GPU 2, 0.5 s after nvmlInit
    gpus=8                         # device count
    pcie_delay=0.02                # seconds each PCIe throughput call blocks (real: >= 20 ms)
    state=/path/gpus.json          # state file (default: gpustate.state_path())

Field names (``power_w``...) are the :class:`kimitui.events.GpuReading` names;
NVML function names (``nvmlDeviceGetFanSpeed``) work too.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pynvml

from kimitui.sim import gpustate
# Clock-event reason bits: the agent's table, the one source (the agent is stdlib-only, so it may be
# imported from here; never the reverse: the agent runs on the GPU host without the package).
from kimitui.telemetry.agent import CLOCK_REASON_BITS

# What pynvml's wrappers pass into the "C library" (pynvml has no type stubs, so these are ctypes
# objects mypy cannot see into; the names say which kind each parameter is).
Handle = Any
"""A device handle (a ctypes pointer whose address is the GPU index + 1, never dereferenced) or an event set's."""
ByRef = Any
"""``ctypes.byref(x)``: the fake writes ``x`` (``ref._obj``): a number or one of pynvml's structs."""
CBuffer = Any
"""A ``ctypes.create_string_buffer``: the fake sets its ``value``."""
CValue = Any
"""A ctypes scalar argument (``c_uint``, ``c_ulonglong``...): the fake reads its ``value``."""

ENV_VAR = "KIMITUI_FAKE_NVML"


def _shard_states(main: Path) -> list[gpustate.SimGpuState]:
    """The live per-server states in ``gpus.json.d/`` (kimitui/sim/gpus.py ``state_target``), oldest first;
    a dead or stale server's shard reads as idle and is skipped."""
    folder = gpustate.shard_dir(main)
    try:
        files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime)
    except OSError:
        return []
    out = []
    for file in files:
        state = gpustate.read_state(file)
        if state.pid is not None:
            out.append(state)
    return out
MIB = 1024 * 1024

# GpuReading field -> the NVML symbols that produce it.
FIELD_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "util_pct": ("nvmlDeviceGetUtilizationRates",),
    "mem_util_pct": ("nvmlDeviceGetUtilizationRates",),
    "mem_used_mib": ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2"),
    "mem_total_mib": ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2"),
    "power_w": ("nvmlDeviceGetPowerUsage",),
    "power_limit_w": ("nvmlDeviceGetEnforcedPowerLimit",),
    "temp_c": ("nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV"),
    "sm_clock_mhz": ("nvmlDeviceGetClockInfo",),
    "mem_clock_mhz": ("nvmlDeviceGetClockInfo",),
    "pcie": ("nvmlDeviceGetPcieThroughput",),
    "pcie_tx_kbps": ("nvmlDeviceGetPcieThroughput",),
    "pcie_rx_kbps": ("nvmlDeviceGetPcieThroughput",),
    "throttle_reasons": ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
    "pstate": ("nvmlDeviceGetPerformanceState",),
    "procs": ("nvmlDeviceGetComputeRunningProcesses_v3",),
    "pcie_gen": ("nvmlDeviceGetCurrPcieLinkGeneration",),
    "pcie_width": ("nvmlDeviceGetCurrPcieLinkWidth",),
    "fan": ("nvmlDeviceGetFanSpeed",),
}



OLD_DRIVER_MISSING = frozenset({
    "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetProcessesUtilizationInfo",
})


@dataclass
class Scenario:
    """What this fake driver does wrong (by default: nothing, like a healthy 580 host)."""

    gpus: int = gpustate.NUM_GPUS
    not_supported: dict[str, set[int] | None] = field(default_factory=dict)
    """NVML symbol -> GPU indexes (None = all)."""
    no_permission: dict[str, set[int] | None] = field(default_factory=dict)
    lost_at: dict[int, float] = field(default_factory=dict)
    """GPU index -> seconds after nvmlInit when it is lost."""
    old_driver: bool = False
    driver580: bool = False
    xids: list[tuple[int, int, float]] = field(default_factory=list)
    """(GPU index, XID code, seconds after nvmlInit)."""
    pcie_delay_s: float = 0.02
    state_path: Path | None = None

    @property
    def driver_version(self) -> str:
        if self.old_driver:
            return "470.256.02"
        return "580.105.06" if self.driver580 else "575.57.08"


class ScenarioError(ValueError):
    """A bad ``KIMITUI_FAKE_NVML`` / :func:`configure` spec; the message names the item."""


def _symbols(name: str) -> tuple[str, ...]:
    if name.startswith("nvml"):
        return (name,)
    try:
        return FIELD_FUNCTIONS[name]
    except KeyError:
        raise ScenarioError(f"{ENV_VAR}: unknown field {name!r} (known: {', '.join(FIELD_FUNCTIONS)})") from None


def parse_scenario(spec: str) -> Scenario:
    """``"not_supported=power_w@3;lost=2@1.0;driver580"`` -> :class:`Scenario`."""
    sc = Scenario()
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        key, _, value = item.partition("=")
        key = key.strip()
        try:
            if key in ("not_supported", "no_permission"):
                target = sc.not_supported if key == "not_supported" else sc.no_permission
                for entry in filter(None, value.split(",")):
                    name, _, gpu = entry.partition("@")
                    for sym in _symbols(name.strip()):
                        if gpu:
                            current = target.get(sym, set())
                            if current is not None:
                                current.add(int(gpu))
                                target[sym] = current
                        else:
                            target[sym] = None
            elif key == "lost":
                for entry in filter(None, value.split(",")):
                    gpu, _, at = entry.partition("@")
                    sc.lost_at[int(gpu)] = float(at or 0)
            elif key == "xid":
                for entry in filter(None, value.split(",")):
                    head, _, at = entry.partition("@")
                    gpu, _, code = head.partition(":")
                    sc.xids.append((int(gpu), int(code or 79), float(at or 0)))
            elif key == "old_driver":
                sc.old_driver = True
            elif key == "driver580":
                sc.driver580 = True
            elif key == "gpus":
                sc.gpus = int(value)
            elif key == "pcie_delay":
                sc.pcie_delay_s = float(value)
            elif key == "state":
                sc.state_path = Path(value)
            else:
                raise ScenarioError(f"{ENV_VAR}: unknown item {item!r}")
        except ValueError as exc:
            if isinstance(exc, ScenarioError):
                raise
            raise ScenarioError(f"{ENV_VAR}: bad value in {item!r}: {exc}") from None
    return sc


class FakeNvmlLib:
    """Stands in for the ``CDLL("libnvidia-ml.so.1")`` object pynvml calls.

    Each method has the C function's name and takes the ctypes arguments
    pynvml's wrapper passes; it returns an ``nvmlReturn_t`` code.  A symbol
    that is missing here (or hidden by the scenario) raises AttributeError,
    which pynvml turns into ``NVMLError_FunctionNotFound``.
    """

    _STATE_TTL_S = 0.2

    def __init__(self, scenario: Scenario | None = None) -> None:
        self.scenario = scenario or Scenario()
        self.init_at: float | None = None
        self._state_read_at = -1e9
        self._lock = threading.Lock()
        self._events: list[tuple[float, int, int]] = []  # (due time, gpu, xid)
        self._by_index: dict[int, gpustate.SimGpu] = {}
        self._last_listed: int | None = None
        self._state_mtime: int | None = None
        self._state_written_at: float | None = None

    # -- helpers ---------------------------------------------------------------
    def _gpu_state(self, index: int) -> gpustate.SimGpu:
        now = time.monotonic()
        if now - self._state_read_at > self._STATE_TTL_S:
            with self._lock:
                if now - self._state_read_at > self._STATE_TTL_S:
                    self._refresh()
                    self._state_read_at = now
        gpu = self._by_index.get(index)
        return gpu if gpu is not None else gpustate.SimGpu(index=index)

    def _refresh(self) -> None:
        """Re-parse the state file only when it changed (or its contents went stale)."""
        path = self.scenario.state_path or gpustate.state_path()
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            mtime = None
        fresh = self._state_written_at is not None and time.time() - self._state_written_at <= gpustate.STALE_S
        if mtime is not None and mtime == self._state_mtime and fresh:
            return
        state = gpustate.read_state(path)
        shards = _shard_states(path)
        self._state_mtime = None if shards else mtime  # shards change on their own: re-read every TTL
        self._state_written_at = state.written_at if state.pid is not None or state.profile else None
        self._by_index = {gpu.index: gpu for gpu in state.gpus}
        for shard in shards:  # a server owning some GPUs (PD, --base-gpu-id): its GPUs win over idle ones
            for gpu in shard.gpus:
                if gpu.pid is not None:
                    self._by_index[gpu.index] = gpu

    @staticmethod
    def _index(handle: Handle) -> int:
        try:
            return ctypes.addressof(handle.contents) - 1  # the "pointer" is index + 1; never dereferenced
        except ValueError:  # NULL handle
            return -1

    def _check(self, name: str, handle: Handle) -> tuple[int, int]:
        """(return code, gpu index) for a device call, applying the scenario."""
        index = self._index(handle)
        if self.init_at is None:
            return pynvml.NVML_ERROR_UNINITIALIZED, index
        if not 0 <= index < self.scenario.gpus:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT, index
        sc = self.scenario
        if sc.lost_at:
            lost_at = sc.lost_at.get(index)
            if lost_at is not None and time.monotonic() - self.init_at >= lost_at:
                return pynvml.NVML_ERROR_GPU_IS_LOST, index
        if self._gpu_state(index).lost:
            return pynvml.NVML_ERROR_GPU_IS_LOST, index
        if name in sc.not_supported:
            gpus = sc.not_supported[name]
            if gpus is None or index in gpus:
                return pynvml.NVML_ERROR_NOT_SUPPORTED, index
        if name in sc.no_permission:
            gpus = sc.no_permission[name]
            if gpus is None or index in gpus:
                return pynvml.NVML_ERROR_NO_PERMISSION, index
        return pynvml.NVML_SUCCESS, index

    @staticmethod
    def _set(ref: ByRef, value: object) -> None:
        ref._obj.value = value

    # -- system ----------------------------------------------------------------
    def nvmlInitWithFlags(self, flags: int) -> int:
        self.init_at = time.monotonic()
        self._events = sorted((self.init_at + at, gpu, xid) for gpu, xid, at in self.scenario.xids)
        return pynvml.NVML_SUCCESS

    def nvmlInit_v2(self) -> int:
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> int:
        self.init_at = None
        return pynvml.NVML_SUCCESS

    def nvmlErrorString(self, result: int) -> bytes:
        return f"fake NVML error {int(result)}".encode()

    def nvmlSystemGetDriverVersion(self, buf: CBuffer, size: CValue) -> int:
        buf.value = self.scenario.driver_version.encode()
        return pynvml.NVML_SUCCESS

    def nvmlSystemGetNVMLVersion(self, buf: CBuffer, size: CValue) -> int:
        major = self.scenario.driver_version.split(".")[0]
        buf.value = f"12.{self.scenario.driver_version}".encode() if major != "580" else b"13.580.105.06"
        return pynvml.NVML_SUCCESS

    def nvmlSystemGetCudaDriverVersion(self, ref: ByRef) -> int:
        self._set(ref, 11040 if self.scenario.old_driver else 13000 if self.scenario.driver580 else 12090)
        return pynvml.NVML_SUCCESS

    def nvmlSystemGetCudaDriverVersion_v2(self, ref: ByRef) -> int:
        return self.nvmlSystemGetCudaDriverVersion(ref)

    def nvmlSystemGetProcessName(self, pid: CValue, buf: CBuffer, size: CValue) -> int:
        """The scheduler's process title.

        The simulator runs every rank in one process, so one pid owns all 8
        GPUs; the title returned is that of the GPU whose processes were listed
        last (an agent asks for names right after listing a GPU), then any.
        """
        want = int(pid.value)
        last = self._last_listed
        if last is not None:
            gpu = self._gpu_state(last)
            if gpu.pid == want and gpu.proc_title:
                buf.value = gpu.proc_title.encode()[: int(size.value) - 1]
                return pynvml.NVML_SUCCESS
        for i in range(self.scenario.gpus):
            gpu = self._gpu_state(i)
            if gpu.pid == want and gpu.proc_title:
                buf.value = gpu.proc_title.encode()[: int(size.value) - 1]
                return pynvml.NVML_SUCCESS
        return pynvml.NVML_ERROR_NOT_FOUND

    def nvmlDeviceGetCount_v2(self, ref: ByRef) -> int:
        if self.init_at is None:
            return pynvml.NVML_ERROR_UNINITIALIZED
        self._set(ref, self.scenario.gpus)
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, c_index: CValue, ref: ByRef) -> int:
        if self.init_at is None:
            return pynvml.NVML_ERROR_UNINITIALIZED
        index = int(c_index.value)
        if not 0 <= index < self.scenario.gpus:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        ptr = ctypes.c_void_p(index + 1)
        ctypes.memmove(ctypes.addressof(ref._obj), ctypes.addressof(ptr), ctypes.sizeof(ctypes.c_void_p))
        return pynvml.NVML_SUCCESS

    # -- static device facts -----------------------------------------------------
    def nvmlDeviceGetName(self, h: Handle, buf: CBuffer, size: CValue) -> int:
        code, _ = self._check("nvmlDeviceGetName", h)
        if code == pynvml.NVML_SUCCESS:
            buf.value = gpustate.GPU_NAME.encode()
        return code

    def nvmlDeviceGetUUID(self, h: Handle, buf: CBuffer, size: CValue) -> int:
        code, i = self._check("nvmlDeviceGetUUID", h)
        if code == pynvml.NVML_SUCCESS:
            buf.value = f"GPU-5ea1{i:04x}-6000-4b1a-8c0e-0000000000{i:02d}".encode()
        return code

    def _static(self, name: str, h: Handle, ref: ByRef, value: int) -> int:
        code, _ = self._check(name, h)
        if code == pynvml.NVML_SUCCESS:
            self._set(ref, value)
        return code

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetEnforcedPowerLimit", h, ref, int(gpustate.GPU_POWER_LIMIT_W * 1000))

    def nvmlDeviceGetPowerManagementLimit(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetPowerManagementLimit", h, ref, int(gpustate.GPU_POWER_LIMIT_W * 1000))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetMaxPcieLinkGeneration", h, ref, 5)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetMaxPcieLinkWidth", h, ref, 16)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetCurrPcieLinkGeneration", h, ref, self._gpu_state(self._index(h)).pcie_gen)

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetCurrPcieLinkWidth", h, ref, self._gpu_state(self._index(h)).pcie_width)

    def nvmlDeviceGetFanSpeed(self, h: Handle, ref: ByRef) -> int:
        code, _ = self._check("nvmlDeviceGetFanSpeed", h)
        return code if code != pynvml.NVML_SUCCESS else pynvml.NVML_ERROR_NOT_SUPPORTED  # passively cooled

    def nvmlDeviceGetSupportedEventTypes(self, h: Handle, ref: ByRef) -> int:
        return self._static("nvmlDeviceGetSupportedEventTypes", h, ref,
                            pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeSingleBitEccError
                            | pynvml.nvmlEventTypeDoubleBitEccError)

    # -- live values -------------------------------------------------------------
    def nvmlDeviceGetUtilizationRates(self, h: Handle, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetUtilizationRates", h)
        if code == pynvml.NVML_SUCCESS:
            gpu = self._gpu_state(i)
            ref._obj.gpu = int(round(gpu.util_pct))
            ref._obj.memory = int(round(gpu.mem_util_pct))
        return code

    def _memory(self, name: str, h: Handle, ref: ByRef, v2: bool) -> int:
        code, i = self._check(name, h)
        if code == pynvml.NVML_SUCCESS:
            gpu = self._gpu_state(i)
            total = int(gpustate.GPU_MEMORY_MIB * MIB)
            reserved = 512 * MIB
            used = min(int(gpu.mem_used_mib * MIB), total)
            mem = ref._obj
            mem.total = total
            if v2:
                mem.reserved = reserved
                mem.used = min(used, total - reserved)
                mem.free = total - reserved - mem.used
            else:  # v1: "used" includes the driver's reservation
                mem.used = min(used + reserved, total)
                mem.free = total - mem.used
        return code

    def nvmlDeviceGetMemoryInfo(self, h: Handle, ref: ByRef) -> int:
        return self._memory("nvmlDeviceGetMemoryInfo", h, ref, v2=False)

    def nvmlDeviceGetMemoryInfo_v2(self, h: Handle, ref: ByRef) -> int:
        return self._memory("nvmlDeviceGetMemoryInfo_v2", h, ref, v2=True)

    def nvmlDeviceGetPowerUsage(self, h: Handle, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetPowerUsage", h)
        if code == pynvml.NVML_SUCCESS:
            self._set(ref, int(self._gpu_state(i).power_w * 1000))
        return code

    def nvmlDeviceGetTemperature(self, h: Handle, sensor: CValue, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetTemperature", h)
        if code == pynvml.NVML_SUCCESS:
            self._set(ref, int(round(self._gpu_state(i).temp_c)))
        return code

    def nvmlDeviceGetTemperatureV(self, h: Handle, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetTemperatureV", h)
        if code == pynvml.NVML_SUCCESS:
            ref._obj.temperature = int(round(self._gpu_state(i).temp_c))
        return code

    def nvmlDeviceGetClockInfo(self, h: Handle, clock_type: CValue, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetClockInfo", h)
        if code == pynvml.NVML_SUCCESS:
            gpu = self._gpu_state(i)
            kind = int(clock_type.value)
            value = gpu.mem_clock_mhz if kind == pynvml.NVML_CLOCK_MEM else gpu.sm_clock_mhz
            self._set(ref, int(value))
        return code

    def nvmlDeviceGetPcieThroughput(self, h: Handle, counter: CValue, ref: ByRef) -> int:
        time.sleep(self.scenario.pcie_delay_s)  # the real call samples a byte counter over 20 ms
        code, i = self._check("nvmlDeviceGetPcieThroughput", h)
        if code == pynvml.NVML_SUCCESS:
            gpu = self._gpu_state(i)
            tx = int(counter.value) == pynvml.NVML_PCIE_UTIL_TX_BYTES
            self._set(ref, int(gpu.pcie_tx_kbps if tx else gpu.pcie_rx_kbps))
        return code

    def _reasons(self, name: str, h: Handle, ref: ByRef) -> int:
        code, i = self._check(name, h)
        if code == pynvml.NVML_SUCCESS:
            mask = 0
            for reason in self._gpu_state(i).throttle_reasons:
                mask |= CLOCK_REASON_BITS.get(reason, 0)
            self._set(ref, mask)
        return code

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Handle, ref: ByRef) -> int:
        return self._reasons("nvmlDeviceGetCurrentClocksEventReasons", h, ref)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Handle, ref: ByRef) -> int:
        return self._reasons("nvmlDeviceGetCurrentClocksThrottleReasons", h, ref)

    def nvmlDeviceGetPerformanceState(self, h: Handle, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetPerformanceState", h)
        if code == pynvml.NVML_SUCCESS:
            self._set(ref, int(self._gpu_state(i).pstate))
        return code

    # -- processes ---------------------------------------------------------------
    def nvmlDeviceGetComputeRunningProcesses_v3(self, h: Handle, count_ref: ByRef, procs: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetComputeRunningProcesses_v3", h)
        if code != pynvml.NVML_SUCCESS:
            return code
        gpu = self._gpu_state(i)
        self._last_listed = i
        rows = [(gpu.pid, int(gpu.mem_used_mib * MIB))] if gpu.pid and gpu.mem_used_mib > 0 else []
        have = int(count_ref._obj.value)
        count_ref._obj.value = len(rows)
        if not rows:
            return pynvml.NVML_SUCCESS
        if procs is None or have < len(rows):
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        for slot, (pid, used) in enumerate(rows):
            procs[slot].pid = pid
            procs[slot].usedGpuMemory = used
            procs[slot].gpuInstanceId = 0xFFFFFFFF
            procs[slot].computeInstanceId = 0xFFFFFFFF
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetProcessUtilization(self, h: Handle, samples: ByRef, count_ref: ByRef, ts: ByRef) -> int:
        """Legacy per-process utilisation: broken on driver 580 (HAMi #2015)."""
        code, i = self._check("nvmlDeviceGetProcessUtilization", h)
        if code != pynvml.NVML_SUCCESS:
            return code
        if self.scenario.driver580:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        gpu = self._gpu_state(i)
        if not gpu.pid:
            return pynvml.NVML_ERROR_NOT_FOUND  # the legacy call's "no samples"
        if samples is None or int(count_ref._obj.value) < 1:
            count_ref._obj.value = 1
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        samples[0].pid = gpu.pid
        samples[0].timeStamp = int(time.time() * 1e6)
        samples[0].smUtil = int(gpu.util_pct)
        samples[0].memUtil = int(gpu.mem_util_pct)
        count_ref._obj.value = 1
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetProcessesUtilizationInfo(self, h: Handle, ref: ByRef) -> int:
        code, i = self._check("nvmlDeviceGetProcessesUtilizationInfo", h)
        if code != pynvml.NVML_SUCCESS:
            return code
        gpu = self._gpu_state(i)
        info = ref._obj
        rows = 1 if gpu.pid else 0
        if not info.procUtilArray or info.processSamplesCount < rows:
            info.processSamplesCount = rows
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        info.processSamplesCount = rows
        if rows:
            sample = info.procUtilArray[0]
            sample.pid = gpu.pid
            sample.timeStamp = int(time.time() * 1e6)
            sample.smUtil = int(gpu.util_pct)
            sample.memUtil = int(gpu.mem_util_pct)
        return pynvml.NVML_SUCCESS

    # -- events ------------------------------------------------------------------
    def nvmlEventSetCreate(self, ref: ByRef) -> int:
        ptr = ctypes.c_void_p(0xE5E7)
        ctypes.memmove(ctypes.addressof(ref._obj), ctypes.addressof(ptr), ctypes.sizeof(ctypes.c_void_p))
        return pynvml.NVML_SUCCESS

    def nvmlDeviceRegisterEvents(self, h: Handle, types: CValue, event_set: Handle) -> int:
        code, _ = self._check("nvmlDeviceRegisterEvents", h)
        return code

    def nvmlEventSetFree(self, event_set: Handle) -> int:
        return pynvml.NVML_SUCCESS

    def nvmlEventSetWait_v2(self, event_set: Handle, ref: ByRef, timeout_ms: CValue) -> int:
        deadline = time.monotonic() + int(timeout_ms.value) / 1000.0
        while True:
            now = time.monotonic()
            with self._lock:
                if self._events and self._events[0][0] <= now:
                    _, gpu, xid = self._events.pop(0)
                    data = ref._obj
                    ptr = ctypes.c_void_p(gpu + 1)
                    ctypes.memmove(ctypes.addressof(data) + type(data).device.offset, ctypes.addressof(ptr),
                                   ctypes.sizeof(ctypes.c_void_p))
                    data.eventType = pynvml.nvmlEventTypeXidCriticalError
                    data.eventData = xid
                    return pynvml.NVML_SUCCESS
                next_due = self._events[0][0] if self._events else None
            if now >= deadline:
                return pynvml.NVML_ERROR_TIMEOUT
            wake = deadline if next_due is None else min(deadline, next_due)
            time.sleep(max(0.0, wake - now))


_installed: FakeNvmlLib | None = None


_configured: Scenario | None = None


def configure(spec: str | Scenario | None = None) -> Scenario:
    """Set the scenario the next :func:`install` uses (a spec string or Scenario; None: back to the env var)."""
    global _configured
    _configured = spec if isinstance(spec, Scenario) else parse_scenario(spec) if spec is not None else None
    return _configured if _configured is not None else parse_scenario(os.environ.get(ENV_VAR, ""))


def _scenario(spec: str | Scenario | None) -> Scenario:
    if isinstance(spec, Scenario):
        return spec
    if spec is not None:
        return parse_scenario(spec)
    if _configured is not None:
        return _configured
    return parse_scenario(os.environ.get(ENV_VAR, ""))


def _missing(name: str) -> property:
    def get(self: object) -> NoReturn:
        raise AttributeError(name)  # pynvml: NVMLError_FunctionNotFound

    return property(get)


class OldDriverNvmlLib(FakeNvmlLib):
    """A 470-era driver: the newer symbols do not exist."""


for _name in OLD_DRIVER_MISSING:
    setattr(OldDriverNvmlLib, _name, _missing(_name))


ACCOUNT_ENV_VAR = "KIMITUI_FAKE_NVML_CPU"
"""A file to keep the fake's own CPU seconds in, for a benchmark that charges the agent alone (issue 33)."""


class CpuAccount:
    """The fake library seen through a stopwatch: each call's thread CPU time is added up and written to
    ``path`` (at most every 0.2 s), so ``bench/bench_agent.py`` can take the fake's share out of the agent's.

    On a GPU host these calls are the driver's; here they are Python that re-reads a state file.  Only
    what pynvml calls goes through here (it looks each symbol up once and caches the function)."""

    WRITE_EVERY_S = 0.2

    def __init__(self, lib: FakeNvmlLib, path: Path) -> None:
        self._lib, self._path = lib, path
        self._lock = threading.Lock()
        self.seconds = 0.0
        self._written_at = 0.0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._lib, name)
        if not callable(fn):
            return fn
        clock = time.thread_time

        def timed(*args: Any) -> Any:
            start = clock()
            try:
                return fn(*args)
            finally:
                self._add(start)

        return timed

    def _add(self, start: float) -> None:
        """Add the call's time since ``start``, this book-keeping included (the clock is read last), so the
        stopwatch's own cost is the fake's, not the agent's."""
        with self._lock:
            now = time.monotonic()
            due = now - self._written_at >= self.WRITE_EVERY_S
            if due:
                self._written_at = now
                try:
                    self._path.write_text(f"{self.seconds:.9f}\n")
                except OSError:
                    pass  # a benchmark's folder gone: the agent's own work goes on
            self.seconds += time.thread_time() - start


def install(scenario: str | Scenario | None = None) -> FakeNvmlLib:
    """Make ``pynvml`` talk to the fake library; returns the fake."""
    global _installed
    sc = _scenario(scenario)
    lib = (OldDriverNvmlLib if sc.old_driver else FakeNvmlLib)(sc)
    account = os.environ.get(ACCOUNT_ENV_VAR)
    with pynvml.libLoadLock:
        pynvml.nvmlLib = CpuAccount(lib, Path(account)) if account else lib
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    _installed = lib
    return lib


def uninstall() -> None:
    """Forget the fake (tests); the next ``nvmlInit`` would look for the real library."""
    global _installed
    with pynvml.libLoadLock:
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    _installed = None


def installed() -> FakeNvmlLib | None:
    return _installed


def nvmlInit() -> None:
    """pynvml's ``nvmlInit`` against the fake (installing it from the environment if needed)."""
    lib = pynvml.nvmlLib
    if _installed is None or (lib is not _installed and getattr(lib, "_lib", None) is not _installed):
        install()
    pynvml.nvmlInit()


def __getattr__(name: str) -> Any:
    """Every other pynvml name (``nvmlDeviceGetName``, ``NVMLError_GpuIsLost``...) is pynvml's own."""
    if name.startswith(("nvml", "NVML", "c_nvml")):
        return getattr(pynvml, name)
    raise AttributeError(name)
