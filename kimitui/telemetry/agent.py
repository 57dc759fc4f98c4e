"""kimitui GPU agent: streams NVML telemetry as JSON lines.  Stdlib + pynvml only.

This one file is shipped to the GPU host over SSH and run from memory (see
``kimitui.telemetry.gpu.BOOTSTRAP``); nothing is installed there.  It also runs
directly: ``python -m kimitui.telemetry.agent [--interval S] [--count N]
[--backend pynvml|fake|nvidia-smi] [--bench]``.

Frames (one JSON object per line, ``type`` first):

- ``caps``  once: driver, CUDA and NVML versions, backend, per GPU static facts and which
  fields it supports (probed once: NotSupported/NoPermission/FunctionNotFound
  fields are listed in ``unsupported`` and never reported as zeros).
- ``tick``  every interval (default 0.25 s): ``seq``, host time ``t``, per GPU
  the fast fields.  PCIe throughput blocks >= 20 ms per call on real hardware,
  so it is sampled on worker threads at its own interval and the latest value
  rides along in ticks.
- ``procs`` every few seconds: pid, used memory, process title, SGLang rank
  (``sglang::scheduler_TP3_EP3`` -> ``TP3_EP3``), per-process SM utilisation.
- ``event`` XID errors (nvmlEventSet), a GPU lost or back.  A lost GPU leaves
  the ticks; the others keep streaming.
- ``error`` a failure the agent survived; ``bye`` when it ends on purpose.

stdin is the control channel: ``ping`` (heartbeat), ``interval S``, ``procs``
(send processes now), ``quit``.  The agent exits on stdin EOF, on a broken
stdout, and (with ``--heartbeat S``) when no line came for S seconds, so no
orphan survives a dropped SSH link.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, TextIO

if TYPE_CHECKING:  # aliases for the checker only: at run time the agent needs nothing newer than its python3
    Handle = object
    """An NVML device handle: opaque, only ever passed back to pynvml."""
    Reader = Callable[[Handle], dict[str, Any]]
    """Reads one group of fields of one GPU into frame fields."""

PROTOCOL = 1
EXIT_OK = 0
EXIT_INIT_FAILED = 2
EXIT_HEARTBEAT = 3
EXIT_PIPE = 4

CLOCK_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
    "board_limit": 0x200,
    "reliability": 0x400,
}
"""Clock-event reason bits (``nvmlClocksEventReason*``) by the short names GpuReading uses: the one table
(the simulator's fake driver imports it from here; this file never imports the package)."""
RANK_RE = re.compile(r"sglang::\w*?_((?:(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+_?)+)")
MIB = 1048576.0


_CHILDREN: list[subprocess.Popen[str]] = []


def _exit(code: int) -> None:
    """Leave now (daemon threads may be blocked in NVML), taking any child (nvidia-smi) along."""
    for child in _CHILDREN:
        try:
            child.kill()
        except Exception:
            pass
    os._exit(code)


def reason_names(mask: int) -> list[str]:
    return [name for name, bit in CLOCK_REASON_BITS.items() if mask & bit]


def rank_from_title(title: str) -> str | None:
    m = RANK_RE.search(title)
    return m.group(1).rstrip("_") if m else None


# --------------------------------------------------------------------------- output


class Output:
    """Thread-safe JSON-lines writer; a broken stdout ends the process."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._lock = threading.Lock()

    def send(self, frame: dict[str, Any]) -> None:
        line = json.dumps(frame, separators=(",", ":")) + "\n"
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                _exit(EXIT_PIPE)

    def error(self, message: str, detail: str = "", index: int | None = None) -> None:
        frame: dict[str, Any] = {"type": "error", "t": time.time(), "message": message, "detail": detail}
        if index is not None:
            frame["index"] = index
        self.send(frame)


class Control:
    """stdin commands and heartbeats; EOF ends the process."""

    def __init__(self, heartbeat_s: float | None, interval: float) -> None:
        self.heartbeat_s = heartbeat_s
        self.interval = interval
        self.last_seen = time.monotonic()
        self.procs_now = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name="control", daemon=True).start()
        if self.heartbeat_s is not None:
            threading.Thread(target=self._watchdog, name="heartbeat", daemon=True).start()

    def _watchdog(self) -> None:
        """Its own thread: a stalled stdout (reader gone, SSH window full) must not keep us alive."""
        while True:
            time.sleep(min(0.2, self.heartbeat_s or 0.2))
            if self.expired():
                try:
                    sys.stderr.write(f"kimitui-agent: no heartbeat for {self.heartbeat_s} s; exiting\n")
                    sys.stderr.flush()
                finally:
                    _exit(EXIT_HEARTBEAT)

    def _read(self) -> None:
        stdin = sys.stdin.buffer
        while True:
            try:
                line = stdin.readline(65536)
            except (OSError, ValueError):
                line = b""
            if not line:
                _exit(EXIT_OK)  # the client (or the SSH link) is gone
            self.last_seen = time.monotonic()
            cmd = line.decode("utf-8", "replace").strip()
            if cmd == "quit":
                _exit(EXIT_OK)
            if cmd.startswith("interval "):
                try:
                    value = float(cmd.split()[1])
                except (ValueError, IndexError):
                    continue
                if 0.0 < value <= 60.0:  # not NaN, inf (sleep overflows: no more ticks) or an hour-long stall
                    self.interval = max(0.02, value)
            elif cmd == "procs":
                self.procs_now.set()

    def expired(self) -> bool:
        return self.heartbeat_s is not None and time.monotonic() - self.last_seen > self.heartbeat_s


# --------------------------------------------------------------------------- pynvml backend


class _CFunction:
    """An NVML C function called as pynvml's wrappers call it: looked up once (after nvmlInit, on first
    use; a missing symbol is pynvml's NVMLError_FunctionNotFound), a non-zero return raised as pynvml's
    NVMLError of that code (its subclass: GpuIsLost, NotSupported...)."""

    __slots__ = ("_nv", "_name", "_fn")

    def __init__(self, nv: Any, name: str) -> None:
        self._nv, self._name, self._fn = nv, name, None

    def __call__(self, *args: Any) -> None:
        fn = self._fn
        if fn is None:
            fn = self._fn = self._nv._nvmlGetFunctionPointer(self._name)
        ret = fn(*args)
        if ret:
            raise self._nv.NVMLError(ret)


class NvmlBackend:
    """All NVML access; the fake backend is this same code over kimitui's fake library."""

    def __init__(self, out: Output, fake: bool = False) -> None:
        if fake:
            from kimitui.sim import nvml as fake_nvml  # here: only the simulated host has the package

            fake_nvml.install()
        import pynvml  # here: a host without it still streams, through nvidia-smi

        self.nv = pynvml
        self.out = out
        self.name = "fake" if fake else "pynvml"
        pynvml.nvmlInit()
        self.count = pynvml.nvmlDeviceGetCount()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.count)]
        self.uuids: list[str] = [""] * self.count
        self.lost: dict[int, float] = {}
        self.readers: list[dict[str, Reader]] = [{} for _ in range(self.count)]
        self.unsupported: list[dict[str, str]] = [{} for _ in range(self.count)]
        self.static: list[dict[str, Any]] = [{} for _ in range(self.count)]
        self.pcie_ok = [False] * self.count
        self.pcie: dict[int, tuple[float | None, float | None]] = {}
        self.features: dict[str, str] = {}
        self.proc_util_api: str | None = None
        self._proc_ts: dict[int, int] = {}
        self._reported: set[tuple[int, str, str]] = set()
        self._split: list[tuple[list[tuple[str, Reader]], list[tuple[str, Reader]]]] | None = None
        self._carried: dict[int, dict[str, Any]] = {}  # per GPU: the slow groups' last values

    # -- helpers -----------------------------------------------------------------
    @staticmethod
    def _s(value: object) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    def _reason(self, exc: Exception) -> str | None:
        nv = self.nv
        if isinstance(exc, nv.NVMLError_NotSupported):
            return "not_supported"
        if isinstance(exc, nv.NVMLError_NoPermission):
            return "no_permission"
        if isinstance(exc, nv.NVMLError_FunctionNotFound):
            return "function_not_found"
        return None

    def _variants(self) -> dict[str, list[tuple[str, Reader]]]:
        """Field group -> candidate readers, newest API first."""
        nv = self.nv

        # The three groups read every tick call NVML's C functions straight into buffers made once
        # (pynvml's wrappers build a structure and look the function up on every call): the same
        # symbols, arguments and return codes as the wrappers, a third of the Python per call.
        mem2_type = getattr(nv, "c_nvmlMemory_v2_t", None)  # an older pynvml: the v1 reader is used
        util_buf, mem1_buf, watts = nv.c_nvmlUtilization_t(), nv.c_nvmlMemory_t(), ctypes.c_uint()
        mem2_buf = mem2_type() if mem2_type is not None else None
        util_ref, mem1_ref, watts_ref = ctypes.byref(util_buf), ctypes.byref(mem1_buf), ctypes.byref(watts)
        mem2_ref = ctypes.byref(mem2_buf) if mem2_buf is not None else None
        util_fn = _CFunction(nv, "nvmlDeviceGetUtilizationRates")
        mem2_fn = _CFunction(nv, "nvmlDeviceGetMemoryInfo_v2")
        mem1_fn = _CFunction(nv, "nvmlDeviceGetMemoryInfo")
        power_fn = _CFunction(nv, "nvmlDeviceGetPowerUsage")

        def util(h: Handle) -> dict[str, Any]:
            util_fn(h, util_ref)
            return {"util_pct": float(util_buf.gpu), "mem_util_pct": float(util_buf.memory)}

        def mem_v2(h: Handle) -> dict[str, Any]:
            if mem2_buf is None:
                raise AttributeError("c_nvmlMemory_v2_t")  # as the wrapper's absence reads in _probe
            mem2_buf.version = nv.nvmlMemory_v2
            mem2_fn(h, mem2_ref)
            return {"mem_used_mib": mem2_buf.used / MIB, "mem_total_mib": mem2_buf.total / MIB}

        def mem_v1(h: Handle) -> dict[str, Any]:
            mem1_fn(h, mem1_ref)
            return {"mem_used_mib": mem1_buf.used / MIB, "mem_total_mib": mem1_buf.total / MIB}

        def power(h: Handle) -> dict[str, Any]:
            power_fn(h, watts_ref)
            return {"power_w": watts.value / 1000.0}

        def temp_v(h: Handle) -> dict[str, Any]:
            return {"temp_c": float(nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU))}

        def temp(h: Handle) -> dict[str, Any]:
            return {"temp_c": float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))}

        def sm_clock(h: Handle) -> dict[str, Any]:
            return {"sm_clock_mhz": float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))}

        def mem_clock(h: Handle) -> dict[str, Any]:
            return {"mem_clock_mhz": float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))}

        def reasons(h: Handle) -> dict[str, Any]:
            return {"throttle_reasons": reason_names(nv.nvmlDeviceGetCurrentClocksEventReasons(h))}

        def reasons_old(h: Handle) -> dict[str, Any]:
            return {"throttle_reasons": reason_names(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))}

        def pstate(h: Handle) -> dict[str, Any]:
            p = nv.nvmlDeviceGetPerformanceState(h)
            return {"pstate": None if p == 32 else int(p)}

        def pcie_link(h: Handle) -> dict[str, Any]:
            return {"pcie_gen": int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
                    "pcie_width": int(nv.nvmlDeviceGetCurrPcieLinkWidth(h))}

        return {
            "util": [("utilization_rates", util)],
            "memory": [("memory_v2", mem_v2), ("memory_v1", mem_v1)],
            "power": [("power_usage", power)],
            "temp": [("temperature_v", temp_v), ("temperature", temp)],
            "sm_clock": [("clock_sm", sm_clock)],
            "mem_clock": [("clock_mem", mem_clock)],
            "throttle": [("clocks_event_reasons", reasons), ("clocks_throttle_reasons", reasons_old)],
            "pstate": [("performance_state", pstate)],
            "pcie_link": [("curr_pcie_link", pcie_link)],
        }

    GROUP_FIELDS = {
        "util": ("util_pct", "mem_util_pct"),
        "memory": ("mem_used_mib", "mem_total_mib"),
        "power": ("power_w",),
        "temp": ("temp_c",),
        "sm_clock": ("sm_clock_mhz",),
        "mem_clock": ("mem_clock_mhz",),
        "throttle": ("throttle_reasons",),
        "pstate": ("pstate",),
        "pcie_link": ("pcie_gen", "pcie_width"),
    }

    # -- caps ----------------------------------------------------------------------
    def caps(self) -> dict[str, Any]:
        nv = self.nv
        driver = nvml_version = None
        try:
            driver = self._s(nv.nvmlSystemGetDriverVersion())
            nvml_version = self._s(nv.nvmlSystemGetNVMLVersion())
        except nv.NVMLError as exc:
            self.out.error("driver version unreadable", str(exc))
        cuda_version = self._cuda_version()
        variants = self._variants()
        gpus = []
        for i, h in enumerate(self.handles):
            info: dict[str, Any] = {"index": i}
            try:
                info["uuid"] = self.uuids[i] = self._s(nv.nvmlDeviceGetUUID(h))
                info["name"] = self._s(nv.nvmlDeviceGetName(h))
            except nv.NVMLError as exc:
                if isinstance(exc, nv.NVMLError_GpuIsLost):
                    self._mark_lost(i, str(exc))
                info.setdefault("uuid", f"unknown-{i}")
                info.setdefault("name", "unknown")
            for key, fn, scale in (
                ("power_limit_w", nv.nvmlDeviceGetEnforcedPowerLimit, 1000.0),
                ("pcie_max_gen", nv.nvmlDeviceGetMaxPcieLinkGeneration, None),
                ("pcie_max_width", nv.nvmlDeviceGetMaxPcieLinkWidth, None),
            ):
                if i in self.lost:
                    break
                try:
                    value = fn(h)
                    info[key] = value / scale if scale else int(value)
                except nv.NVMLError as exc:
                    reason = self._reason(exc)
                    if reason:
                        self.unsupported[i][key] = reason
            if i not in self.lost:
                self._probe(i, h, variants)
            self.static[i] = {"power_limit_w": info.get("power_limit_w")}
            supported = [f for g, fs in self.GROUP_FIELDS.items() if g in self.readers[i] for f in fs]
            if info.get("power_limit_w") is not None:
                supported.append("power_limit_w")
            gpus.append(info)
            info["supported"] = supported
            info["unsupported"] = self.unsupported[i]
        self._probe_pcie()
        for i, info in enumerate(gpus):
            if self.pcie_ok[i]:
                info["supported"] += ["pcie_tx_kbps", "pcie_rx_kbps"]
            if "mem_total_mib" in info["supported"] and i not in self.lost:
                try:
                    info["memory_total_mib"] = self.readers[i]["memory"](self.handles[i])["mem_total_mib"]
                except nv.NVMLError:
                    pass
        self._probe_proc_util()
        return {"type": "caps", "v": PROTOCOL, "t": time.time(), "backend": self.name, "driver": driver,
                "nvml_version": nvml_version, "cuda_version": cuda_version, "features": self.features, "gpus": gpus}

    def _cuda_version(self) -> str | None:
        """The CUDA version the driver supports, as nvidia-smi prints it (12080 -> ``12.8``)."""
        nv = self.nv
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            fn = getattr(nv, name, None)
            if fn is None:
                continue
            try:
                version = int(fn())
            except nv.NVMLError:  # FunctionNotFound on an old driver: try the older call
                continue
            return f"{version // 1000}.{version % 1000 // 10}"
        return None

    def _probe(self, i: int, h: Handle, variants: dict[str, list[tuple[str, Reader]]]) -> None:
        nv = self.nv
        for group, candidates in variants.items():
            last_reason = "function_not_found"
            for api, reader in candidates:
                try:
                    reader(h)
                except AttributeError:  # an older pynvml without this wrapper or constant
                    last_reason = "function_not_found"
                    continue
                except nv.NVMLError as exc:
                    if isinstance(exc, nv.NVMLError_GpuIsLost):
                        self._mark_lost(i, str(exc))
                        return
                    reason = self._reason(exc)
                    if reason is None:  # transient: keep the reader, report the error
                        self.readers[i][group] = reader
                        self.features.setdefault(f"{group}_api", api)
                        break
                    last_reason = reason
                    if reason == "function_not_found":
                        continue  # an older driver: try the older call
                    break
                else:
                    self.readers[i][group] = reader
                    self.features.setdefault(f"{group}_api", api)
                    break
            if group not in self.readers[i]:
                for field in self.GROUP_FIELDS[group]:
                    self.unsupported[i][field] = last_reason

    def _pcie_pair(self, i: int) -> tuple[float | None, float | None]:
        nv = self.nv
        h = self.handles[i]
        tx = nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)
        rx = nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)
        return float(tx), float(rx)

    def _probe_pcie(self) -> None:
        nv = self.nv
        live = [i for i in range(self.count) if i not in self.lost]
        if not live:
            return
        with ThreadPoolExecutor(max_workers=len(live)) as pool:
            futures = {i: pool.submit(self._pcie_pair, i) for i in live}
        for i, fut in futures.items():
            try:
                self.pcie[i] = fut.result()
                self.pcie_ok[i] = True
            except nv.NVMLError as exc:
                reason = self._reason(exc) or "error"
                self.unsupported[i]["pcie_tx_kbps"] = self.unsupported[i]["pcie_rx_kbps"] = reason

    def _probe_proc_util(self) -> None:
        """Per-process SM util: the >= 550 call, else the legacy one (broken on 580), else none."""
        nv = self.nv
        for api, fn in (("processes_utilization_info", getattr(nv, "nvmlDeviceGetProcessesUtilizationInfo", None)),
                        ("process_utilization", nv.nvmlDeviceGetProcessUtilization)):
            if fn is None:
                continue
            ok = False
            for i in range(self.count):
                if i in self.lost:
                    continue
                try:
                    fn(self.handles[i], 0)
                    ok = True
                except nv.NVMLError as exc:
                    if isinstance(exc, nv.NVMLError_NotFound):  # legacy: "no samples yet" means it works
                        ok = True
                    elif self._reason(exc) is None:
                        ok = True
                break
            if ok:
                self.proc_util_api = api
                self.features["proc_util_api"] = api
                return
        self.features["proc_util_api"] = "none"

    # -- sampling --------------------------------------------------------------------
    def _mark_lost(self, i: int, detail: str) -> None:
        if i not in self.lost:
            self.lost[i] = time.monotonic()
            self.out.send({"type": "event", "t": time.time(), "index": i, "event": "lost", "detail": detail})

    def _retry_lost(self) -> None:
        now = time.monotonic()
        for i, since in list(self.lost.items()):
            if now - since < 5.0:
                continue
            try:
                self.nv.nvmlDeviceGetUUID(self.handles[i])
            except self.nv.NVMLError:
                self.lost[i] = now
                continue
            del self.lost[i]
            self.out.send({"type": "event", "t": time.time(), "index": i, "event": "recovered", "detail": ""})

    # Utilisation, memory and power every tick; the rest (which moves slower, or is itself an
    # average over ~1 s) about once a second, its last value riding in every tick.
    SLOW_GROUPS = frozenset({"temp", "mem_clock", "pstate", "sm_clock", "throttle", "pcie_link"})

    def sample(self, slow: bool = True) -> list[dict[str, Any]]:
        """One tick's rows.  Per GPU the fast groups are read now; the slow groups' last values ride
        along as one dict, rebuilt only on a slow tick (with the static power limit), and the last
        PCIe round is added: a tick does no work for what did not move (issue 33, the agent's cost)."""
        if self.lost:
            self._retry_lost()
        if self._split is None:
            self._split = [self._split_readers(i) for i in range(self.count)]
        gpu_lost = self.nv.NVMLError_GpuIsLost
        rows = []
        for i, h in enumerate(self.handles):
            if i in self.lost:
                continue
            fast, slow_readers = self._split[i]
            try:
                carried = self._carried.get(i)
                if slow or carried is None:
                    carried = self._carried[i] = self._read(i, h, slow_readers, {})
                    limit = self.static[i].get("power_limit_w")
                    if limit is not None:
                        carried["power_limit_w"] = limit
                row = self._read(i, h, fast, {"index": i})
            except gpu_lost as exc:
                self._mark_lost(i, f"{exc}")
                continue
            row.update(carried)
            pcie = self.pcie.get(i)
            if pcie is not None:
                row["pcie_tx_kbps"], row["pcie_rx_kbps"] = pcie
            rows.append(row)
        return rows

    def _split_readers(self, i: int) -> tuple[list[tuple[str, Reader]], list[tuple[str, Reader]]]:
        """GPU ``i``'s readers: (every tick, about once a second)."""
        readers = list(self.readers[i].items())
        return ([(g, r) for g, r in readers if g not in self.SLOW_GROUPS],
                [(g, r) for g, r in readers if g in self.SLOW_GROUPS])

    def _read(self, i: int, h: Handle, readers: list[tuple[str, Reader]], into: dict[str, Any]) -> dict[str, Any]:
        """Each reader's fields into ``into``; a failed read is said once per kind and left out (a slow
        group is tried again on the next slow tick); a lost GPU raises."""
        nv = self.nv
        for group, reader in readers:
            try:
                into.update(reader(h))
            except nv.NVMLError_GpuIsLost:
                raise
            except nv.NVMLError as exc:
                key = (i, group, type(exc).__name__)
                if key not in self._reported:
                    self._reported.add(key)
                    self.out.error(f"GPU {i}: {group} read failed", str(exc), index=i)
        return into

    def sample_pcie(self, pool: ThreadPoolExecutor) -> None:
        """One PCIe round, all GPUs in parallel (each call blocks ~20 ms on real hardware)."""
        nv = self.nv
        live = [i for i in range(self.count) if self.pcie_ok[i] and i not in self.lost]
        futures = {i: pool.submit(self._pcie_pair, i) for i in live}
        for i, fut in futures.items():
            try:
                self.pcie[i] = fut.result()
            except nv.NVMLError_GpuIsLost as exc:
                self._mark_lost(i, str(exc))
            except nv.NVMLError:
                self.pcie.pop(i, None)

    def procs(self) -> list[dict[str, Any]]:
        nv = self.nv
        rows = []
        for i, h in enumerate(self.handles):
            if i in self.lost:
                continue
            try:
                plist = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except nv.NVMLError_GpuIsLost as exc:
                self._mark_lost(i, str(exc))
                continue
            except nv.NVMLError:
                continue
            util = self._proc_util(i, h) if plist else {}
            for p in plist:
                used = getattr(p, "usedGpuMemory", None)
                title = self._title(int(p.pid))
                rows.append({"gpu_index": i, "pid": int(p.pid), "used_mib": None if used is None else used / MIB,
                             "name": title, "rank": rank_from_title(title), "sm_util_pct": util.get(int(p.pid))})
        return rows

    def _proc_util(self, i: int, h: Handle) -> dict[int, float]:
        nv = self.nv
        last = self._proc_ts.get(i, 0)
        out: dict[int, float] = {}
        try:
            if self.proc_util_api == "processes_utilization_info":
                samples = nv.nvmlDeviceGetProcessesUtilizationInfo(h, last)
            elif self.proc_util_api == "process_utilization":
                samples = nv.nvmlDeviceGetProcessUtilization(h, last)
            else:
                return out
        except nv.NVMLError:
            return out
        for s in samples:
            out[int(s.pid)] = float(s.smUtil)
            self._proc_ts[i] = max(self._proc_ts.get(i, 0), int(s.timeStamp))
        return out

    def _title(self, pid: int) -> str:
        title = ""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                title = fh.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            pass
        if rank_from_title(title) is None:  # another PID namespace, or a title only NVML knows
            try:
                name = self._s(self.nv.nvmlSystemGetProcessName(pid))
                if name:
                    title = name
            except self.nv.NVMLError:
                pass
        return title

    def setup_xid(self) -> bool:
        """Register for XID events on every GPU that supports them; the result goes into caps."""
        nv = self.nv
        try:
            self._event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            self.features["xid"] = self._reason(exc) or "error"
            return False
        self._xid_gpus: dict[int, int] = {}
        for i, h in enumerate(self.handles):
            if i in self.lost:
                continue
            try:
                if nv.nvmlDeviceGetSupportedEventTypes(h) & nv.nvmlEventTypeXidCriticalError:
                    nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._event_set)
                    self._xid_gpus[ctypes.cast(h, ctypes.c_void_p).value or 0] = i
            except nv.NVMLError:
                continue
        self.features["xid"] = "events" if self._xid_gpus else "not_supported"
        return bool(self._xid_gpus)

    def xid_loop(self, stop: threading.Event) -> None:
        """Blocking XID waits on their own thread (nvmlEventSetWait_v2, 1 s timeout)."""
        nv = self.nv
        while not stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(self._event_set, 1000)
            except nv.NVMLError_Timeout:
                continue
            except nv.NVMLError as exc:
                self.out.error("XID wait failed", str(exc))
                time.sleep(1.0)
                continue
            index = self._xid_gpus.get(ctypes.cast(data.device, ctypes.c_void_p).value or 0)
            self.out.send({"type": "event", "t": time.time(), "index": index, "event": "xid",
                           "xid": int(data.eventData), "detail": f"XID {int(data.eventData)}"})

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:
            pass


def run_nvml(args: argparse.Namespace, out: Output, control: Control | None) -> int:
    try:
        backend = NvmlBackend(out, fake=args.backend == "fake")
    except Exception as exc:  # no driver, no pynvml: say so in-band, then exit
        out.error("NVML init failed", f"{type(exc).__name__}: {exc}")
        return EXIT_INIT_FAILED
    try:
        caps = backend.caps()
        caps["interval"] = args.interval
        xid = backend.setup_xid()
    except Exception as exc:  # a driver quirk while probing must not be a silent death
        out.error("GPU probe failed", f"{type(exc).__name__}: {exc}")
        return EXIT_INIT_FAILED
    out.send(caps)
    stop = threading.Event()
    if xid:
        threading.Thread(target=backend.xid_loop, args=(stop,), name="xid", daemon=True).start()
    pool = ThreadPoolExecutor(max_workers=max(1, backend.count), thread_name_prefix="pcie")

    def pcie_loop() -> None:
        while not stop.wait(args.pcie_interval):
            backend.sample_pcie(pool)

    if any(backend.pcie_ok):
        threading.Thread(target=pcie_loop, name="pcie", daemon=True).start()

    seq = 0
    next_procs = 0.0
    next_tick = time.monotonic()
    while True:
        if control is not None and control.expired():
            out.error("heartbeat missed", f"no control line for {control.heartbeat_s} s; exiting")
            return EXIT_HEARTBEAT
        now = time.monotonic()
        interval = control.interval if control is not None else args.interval
        slow = seq % max(1, round(args.slow_interval / interval)) == 0
        try:
            out.send({"type": "tick", "seq": seq, "t": time.time(), "gpus": backend.sample(slow)})
            if now >= next_procs or (control is not None and control.procs_now.is_set()):
                if control is not None:
                    control.procs_now.clear()
                next_procs = now + args.procs_interval
                out.send({"type": "procs", "t": time.time(), "procs": backend.procs()})
        except Exception as exc:  # keep streaming; say what broke (once per kind of failure)
            key = (-1, "loop", f"{type(exc).__name__}: {exc}")
            if key not in backend._reported:
                backend._reported.add(key)
                out.error("sampling failed", key[2])
        seq += 1
        if args.count and seq >= args.count:
            break
        next_tick += interval
        delay = next_tick - time.monotonic()
        if delay < 0:  # fell behind (suspended, slow host): don't burst to catch up
            next_tick = time.monotonic()
            delay = 0
        time.sleep(delay)
    stop.set()
    out.send({"type": "bye", "t": time.time(), "reason": "count"})
    backend.close()
    return EXIT_OK


# --------------------------------------------------------------------------- nvidia-smi fallback

SMI_FIELDS = (
    "index", "uuid", "name", "utilization.gpu", "utilization.memory", "memory.used", "memory.total",
    "power.draw", "power.limit", "temperature.gpu", "clocks.sm", "clocks.mem", "pstate",
    "clocks_event_reasons.active", "pcie.link.gen.max", "pcie.link.width.max",
)
_SMI_NUMERIC = {
    "utilization.gpu": "util_pct", "utilization.memory": "mem_util_pct", "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib", "power.draw": "power_w", "power.limit": "power_limit_w",
    "temperature.gpu": "temp_c", "clocks.sm": "sm_clock_mhz", "clocks.mem": "mem_clock_mhz",
}


def _smi_value(text: str) -> str | None:
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported", "Unknown Error"):
        return None
    return text


def parse_smi_line(line: str, fields: tuple[str, ...] = SMI_FIELDS) -> dict[str, Any]:
    """One ``--format=csv,noheader,nounits`` row -> reading fields (None for [N/A]/[Not Supported])."""
    parts = [p.strip() for p in line.split(", ")]
    if len(parts) != len(fields):
        raise ValueError(f"expected {len(fields)} columns, got {len(parts)}: {line!r}")
    raw = dict(zip(fields, parts))
    index_text = _smi_value(raw["index"])
    if index_text is None:
        raise ValueError(f"no GPU index in {line!r}")
    row: dict[str, Any] = {"index": int(index_text), "uuid": raw.get("uuid", ""), "name": raw.get("name", "")}
    for key, name in _SMI_NUMERIC.items():
        if key in raw:
            val = _smi_value(raw[key])
            num = float(val) if val is not None else None
            row[name] = num if num is None or num - num == 0.0 else None  # inf/nan: no reading, not a bad JSON
    pstate = _smi_value(raw.get("pstate", ""))
    row["pstate"] = int(pstate[1:]) if pstate and pstate[:1] == "P" and pstate[1:].isdecimal() else None
    reasons_key = next((k for k in raw if k.startswith("clocks_") and k.endswith(".active")), None)
    mask = _smi_value(raw[reasons_key]) if reasons_key else None
    row["throttle_reasons"] = reason_names(int(mask, 16)) if mask else None
    for key, name in (("pcie.link.gen.max", "pcie_max_gen"), ("pcie.link.width.max", "pcie_max_width")):
        val = _smi_value(raw.get(key, ""))
        row[name] = int(val) if val and val.isdecimal() and len(val) < 10 else None
    return row


_READING_KEYS = ("util_pct", "mem_util_pct", "mem_used_mib", "mem_total_mib", "power_w", "power_limit_w", "temp_c",
                 "sm_clock_mhz", "mem_clock_mhz", "throttle_reasons", "pstate")


try:
    _PRCTL: Callable[..., int] | None = ctypes.CDLL(None).prctl  # looked up before fork: the child only calls it
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the agent dies, however it dies (Linux prctl)."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def run_smi(args: argparse.Namespace, out: Output, control: Control | None) -> int:
    """Stream ``nvidia-smi --query-gpu ... -lms N``; a block ends when the index wraps."""
    fields: tuple[str, ...] = SMI_FIELDS
    for attempt in range(2):
        argv = [args.nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits",
                f"-lms={max(1, int(args.interval * 1000))}"]
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "LC_ALL": "C"}, preexec_fn=_die_with_parent)
            _CHILDREN.append(proc)
        except OSError as exc:
            out.error("nvidia-smi failed to start", str(exc))
            return EXIT_INIT_FAILED
        first = proc.stdout.readline() if proc.stdout else ""
        if first and "," in first:
            break
        err = (proc.stderr.read() if proc.stderr else "") + first
        proc.kill()
        proc.wait()
        if attempt == 0 and "clocks_event_reasons" in err:  # drivers before 535 know only the throttle name
            fields = tuple("clocks_throttle_reasons.active" if f.startswith("clocks_event") else f for f in SMI_FIELDS)
            continue
        out.error("nvidia-smi produced no data", err.strip()[:500])
        return EXIT_INIT_FAILED
    seq = 0
    block: list[dict[str, Any]] = []
    sent_caps = False
    line: str | None = first
    try:
        while line:
            if control is not None and control.expired():
                out.error("heartbeat missed", "exiting")
                return EXIT_HEARTBEAT
            try:
                row = parse_smi_line(line.rstrip("\n"), fields)
            except ValueError as exc:
                out.error("nvidia-smi line not understood", str(exc))
                line = proc.stdout.readline() if proc.stdout else ""
                continue
            if block and row["index"] <= block[-1]["index"]:
                sent_caps = _smi_flush(out, block, seq, sent_caps, args)
                seq += 1
                block = []
                if args.count and seq >= args.count:
                    break
            block.append(row)
            line = proc.stdout.readline() if proc.stdout else ""
        else:
            if block:
                _smi_flush(out, block, seq, sent_caps, args)
    finally:
        proc.kill()
        proc.wait()
    out.send({"type": "bye", "t": time.time(), "reason": "count" if args.count else "nvidia-smi ended"})
    return EXIT_OK


def _smi_flush(out: Output, block: list[dict[str, Any]], seq: int, sent_caps: bool, args: argparse.Namespace) -> bool:
    if not sent_caps:
        gpus = []
        for row in block:
            supported = [k for k in _READING_KEYS if row.get(k) is not None]
            gpus.append({"index": row["index"], "uuid": row["uuid"], "name": row["name"],
                         "memory_total_mib": row.get("mem_total_mib"), "power_limit_w": row.get("power_limit_w"),
                         "pcie_max_gen": row.get("pcie_max_gen"), "pcie_max_width": row.get("pcie_max_width"),
                         "supported": supported,
                         "unsupported": {k: "not_supported" for k in _READING_KEYS if row.get(k) is None}})
        out.send({"type": "caps", "v": PROTOCOL, "t": time.time(), "backend": "nvidia-smi", "driver": None,
                  "nvml_version": None, "features": {"proc_util_api": "none", "xid": "none"}, "gpus": gpus,
                  "interval": args.interval})
    rows = [{k: row.get(k) for k in ("index",) + _READING_KEYS if row.get(k) is not None} for row in block]
    out.send({"type": "tick", "seq": seq, "t": time.time(), "gpus": rows})
    return True


# --------------------------------------------------------------------------- bench


def run_bench(args: argparse.Namespace, out: Output) -> int:
    """Per-call latency (p50/p99, microseconds) of each NVML call, over every GPU."""
    backend = NvmlBackend(out, fake=args.backend == "fake")
    nv = backend.nv
    calls: dict[str, Callable[[Handle], object]] = {
        "nvmlDeviceGetUtilizationRates": nv.nvmlDeviceGetUtilizationRates,
        "nvmlDeviceGetMemoryInfo_v2": lambda h: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2),
        "nvmlDeviceGetMemoryInfo": nv.nvmlDeviceGetMemoryInfo,
        "nvmlDeviceGetPowerUsage": nv.nvmlDeviceGetPowerUsage,
        "nvmlDeviceGetTemperatureV": lambda h: nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetTemperature": lambda h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetClockInfo(SM)": lambda h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        "nvmlDeviceGetCurrentClocksEventReasons": nv.nvmlDeviceGetCurrentClocksEventReasons,
        "nvmlDeviceGetPerformanceState": nv.nvmlDeviceGetPerformanceState,
        "nvmlDeviceGetComputeRunningProcesses": nv.nvmlDeviceGetComputeRunningProcesses,
        "nvmlDeviceGetPcieThroughput(TX)": lambda h: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES),
        "nvmlDeviceGetFanSpeed": nv.nvmlDeviceGetFanSpeed,
    }
    reps = max(1, args.count or 20)
    for name, fn in calls.items():
        lat: list[float] = []
        error = None
        for _ in range(reps if "Pcie" not in name else max(1, reps // 10)):
            for h in backend.handles:
                t0 = time.perf_counter()
                try:
                    fn(h)
                except nv.NVMLError as exc:
                    error = type(exc).__name__
                lat.append((time.perf_counter() - t0) * 1e6)
        out.send(_latency_frame(name, lat, error))
    # what one tick costs the agent (all GPUs, fast tier; the slow tier every 4th as at 4 Hz)
    backend.caps()
    lat = []
    for k in range(reps):
        t0 = time.perf_counter()
        backend.sample(slow=k % 4 == 0)
        lat.append((time.perf_counter() - t0) * 1e6)
    out.send(_latency_frame(f"tick ({backend.count} GPUs)", lat, None))
    backend.close()
    return EXIT_OK


def _latency_frame(name: str, lat: list[float], error: str | None) -> dict[str, Any]:
    lat = sorted(lat)
    return {"type": "bench", "call": name, "n": len(lat), "p50_us": round(lat[len(lat) // 2], 1),
            "p99_us": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1), "error": error}


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kimitui-agent", description="Stream NVML telemetry as JSON lines.")
    p.add_argument("--interval", type=float, default=0.25, help="seconds between ticks (default 0.25 = 4 Hz)")
    p.add_argument("--count", type=int, default=0, help="stop after N ticks (0 = run until stdin closes)")
    p.add_argument("--backend", choices=("pynvml", "fake", "nvidia-smi"), default="pynvml")
    p.add_argument("--bench", action="store_true", help="print per-call NVML latency (p50/p99) and exit")
    p.add_argument("--heartbeat", type=float, default=None, metavar="S",
                   help="exit when no control line arrived for S seconds (the client pings every second)")
    p.add_argument("--no-stdin", action="store_true", help="do not watch stdin (benchmarks, manual runs)")
    p.add_argument("--procs-interval", type=float, default=2.0)
    p.add_argument("--pcie-interval", type=float, default=2.0, help="seconds between PCIe throughput rounds")
    p.add_argument("--slow-interval", type=float, default=1.0,
                   help="seconds between reads of the slower fields (temperature, clocks, clock-event reasons, "
                        "P-state)")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi executable (nvidia-smi backend)")
    p.add_argument("--pythonpath", default=None, help="directory to put on sys.path (fake backend on the sim host)")
    p.add_argument("--tag", default="", help="free text shown in ps, to tell whose agent a process is")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.pythonpath:
        sys.path.insert(0, args.pythonpath)
    args.interval = max(0.02, args.interval)
    out = Output()
    if args.bench:
        return run_bench(args, out)
    control = None
    if not args.no_stdin:
        control = Control(args.heartbeat, args.interval)
        control.start()
    if args.backend == "nvidia-smi":
        return run_smi(args, out, control)
    return run_nvml(args, out, control)


if __name__ == "__main__":
    code = main()
    try:
        sys.stdout.flush()
    except Exception:
        pass
    _exit(code)  # daemon threads (blocked NVML waits) must not keep us alive
