"""The eight simulated GPUs, derived from what the server is doing, written ~4x/s.

The fake NVML (``kimitui.sim.nvml``) reads the state file this module writes
(``kimitui.sim.gpustate``).  Values follow the load:
- memory: CUDA context, then weights filling during loading, then the KV pool
  and CUDA graphs (about 85 GB per GPU for ep8-tuned while serving);
- utilisation with the batch size (a decode pass keeps the SMs busy in
  proportion to how much of the expert weights it touches); power from
  :mod:`kimitui.sim.power_model` (what each part of the pass draws: batch,
  profile, drafter), the loaded idle draw between passes and during an EPLB
  rebalance, smoothed like NVML's one-second average, with a little noise drawn
  from the server's seed;
- PCIe traffic with the EP all-to-all (or TP all-reduce) bytes of each step,
  host-to-device traffic while loading, a burst of expert weights during an
  EPLB rebalance;
- ``sw_power_cap`` among the clock-event reasons when power reaches the cap;
- under EPLB one GPU runs hotter (the rank the static dispatch overloads).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

from kimitui.sim.gpustate import GPU_POWER_LIMIT_W, NUM_GPUS, SimGpu, SimGpuState, idle_state, shard_dir, write_state
from kimitui.sim.perf_model import HIDDEN, NUM_LAYERS, PerfModel, experts_touched
from kimitui.sim.power_model import PowerModel
from kimitui.sim.scheduler import SchedStats
from kimitui.sim.settings import ServerSettings
from kimitui.sim.startup import BootState

WRITE_INTERVAL_S = 0.25
POWER_SMOOTHING = 0.5
"""Share of the way to the new draw each write (4 a second) moves: NVML's power is a one-second average."""
HOT_RANK_W = 45.0
"""Modelled: the rank EPLB's static dispatch overloads multiplies more tokens through its experts."""
PCIE_GEN5_X16_KBPS = 63.0e6
"""A Gen5 x16 link per direction, in NVML's KB/s."""


def state_target(settings: ServerSettings, pid: int) -> Path | None:
    """The file this server writes: ``None`` (the host's ``gpus.json``) for a plain server from GPU 0, else
    its own shard ``gpus.json.d/<pid>.json``, so a prefill and a decode server (or two TP4 servers) on one
    host never overwrite each other's GPUs."""
    return None if settings.owns_whole_host else shard_dir() / f"{pid}.json"


def release_state(path: Path | None) -> None:
    """At exit: the whole host goes idle, or this server's shard goes away."""
    if path is None:
        write_idle()
        return
    try:
        path.unlink()
    except OSError:
        pass


class GpuModel:
    """Turns (boot phase, scheduler stats) into per-GPU readings."""

    def __init__(self, settings: ServerSettings, pid: int, rank_title: Callable[[int], str]) -> None:
        self.s = settings
        self.pid = pid
        self.rank_title = rank_title
        self._last_tokens = 0
        self._last_t = time.monotonic()
        self._tok_rate = 0.0
        self._temps = [33.0 + 0.7 * i % 3 for i in range(NUM_GPUS)]
        self.power = PowerModel(PerfModel(settings))
        self._watts: list[float | None] = [None] * NUM_GPUS
        self._noise = random.Random(settings.seed * 104729 + 31)
        """The power's noise: from the server's seed, so a run's draws repeat with its requests."""

    def state(self, boot: BootState, stats: SchedStats | None) -> SimGpuState:
        now = time.monotonic()
        rate = 0.0
        if stats is not None:
            dt = max(1e-3, now - self._last_t)
            rate = (stats.generated_total - self._last_tokens) / dt
            self._last_tokens, self._last_t = stats.generated_total, now
        # smooth like NVML's sampling window
        self._tok_rate = 0.6 * self._tok_rate + 0.4 * rate
        mine = self.s.local_gpus
        gpus = [self._gpu(i, boot, stats, now, in_use=i in mine) for i in range(NUM_GPUS)]
        return SimGpuState(written_at=time.time(), pid=self.pid, profile=self.s.name, phase=boot.phase, gpus=gpus)

    def _gpu(self, i: int, boot: BootState, stats: SchedStats | None, now: float, in_use: bool) -> SimGpu:
        if not in_use:
            self._watts[i] = None
            return SimGpu(index=i, temp_c=round(self._temps[i], 1))
        phase = boot.phase
        util = 0.0
        draw: float | None = None
        """Watts the GPU's work asks for now, before smoothing (None: a share of the utilisation)."""
        pcie_rx = pcie_tx = 0.0
        mem = boot.mem_used_gb * 1024
        if phase == "loading":
            util = 3.0 + 4.0 * math.sin(now * 3 + i) ** 2
            pcie_rx = 2.6e6 + 1.5e5 * math.sin(now * 2 + i)  # KB/s from host: shards being copied in
        elif phase == "graph":
            util = 35.0 + 20.0 * math.sin(now * 5 + i) ** 2
        elif phase in ("serving", "warmup") and stats is not None:
            busy = 1.0 if (now < stats.busy_until or stats.running) and not stats.frozen else 0.0
            batch = max(stats.batch, stats.running)
            draw = self.power.loaded_idle_w
            if stats.frozen:
                util = 0.0  # a stuck collective: no kernel runs
            elif stats.in_rebalance:
                util = 8.0
                draw = self.power.waiting_w(rebalancing=True)  # the GPUs wait while experts move: lower power
                pcie_tx = pcie_rx = 9.5e6 + 1.2e6 * math.sin(now * 7 + i)  # expert weights moving between GPUs
            elif busy:
                touched = experts_touched(batch) / 384.0
                util = min(100.0, 58.0 + 40.0 * touched)
                draw = self.power.pass_w(batch, stats.kv_tokens, graph=stats.cuda_graph)
                # dispatch + combine, bf16 hidden states, per layer, spread over the peers
                bytes_per_tok = NUM_LAYERS * HIDDEN * 2 * 2 * (1.0 if self.s.ep_size > 1 else 2.0)
                kbps = self._tok_rate * bytes_per_tok / max(1, self.s.tp_size) / 1000.0
                pcie_tx = kbps * (1.0 + 0.04 * math.sin(now + i))
                pcie_rx = kbps * (1.0 + 0.04 * math.cos(now + i))
        hot = self._hot_gpu(stats)
        base = self.power.loaded_idle_w if mem > 4096 else self.power.idle_w
        if draw is None:  # loading the weights, capturing graphs: a share of the utilisation (modelled)
            draw = base + util / 100.0 * 400.0
        if hot == i and util > 20:
            util = min(100.0, util * 1.12 + 6.0)
            draw += HOT_RANK_W
        episode = stats.episode if stats is not None and phase == "serving" and util > 20 else None
        if episode == "slow_gpu" and stats is not None:
            util = 100.0 if i == stats.episode_gpu else 40.0  # the others wait for it in every all-to-all
            if i != stats.episode_gpu:
                draw = base + (draw - base) * 0.45
        elif episode == "pcie_saturation":  # another process's traffic fills the links (Gen5 x16: 63 GB/s)
            pcie_tx = pcie_rx = PCIE_GEN5_X16_KBPS * (0.86 + 0.02 * math.sin(now * 3 + i))
        mem_util = util * 0.55
        power = self._smoothed(i, draw, base)
        power, throttle, sm_clock = self._limits(i, power, util, hot, stats, episode)
        return SimGpu(
            index=i,
            mem_used_mib=round(mem, 1),
            util_pct=round(util, 1),
            mem_util_pct=round(mem_util, 1),
            power_w=round(power, 1),
            temp_c=round(self._temps[i], 1),
            sm_clock_mhz=sm_clock,
            mem_clock_mhz=405.0 if util < 1 else 14001.0,
            pcie_tx_kbps=round(pcie_tx, 1),
            pcie_rx_kbps=round(pcie_rx, 1),
            throttle_reasons=throttle,
            pstate=8 if util < 1 and mem < 4096 else (2 if util < 1 else 0),
            pid=self.pid if phase not in ("failed",) else None,
            proc_title=self.rank_title(self._tp_rank(i)) if phase not in ("failed",) else None,
        )

    def _limits(self, i: int, power: float, util: float, hot: int | None, stats: SchedStats | None,
                episode: str | None) -> tuple[float, list[str], float]:
        """The power limiter, the temperature it leads to, the SM clock and the clock-event reasons."""
        throttle: list[str] = []
        if power >= self.power.cap_w - 2:
            power = self.power.cap_w - 1.5 + self._noise.random()  # the limiter holds it just under the cap
            throttle.append("sw_power_cap")
        elif util < 1.0:
            throttle.append("gpu_idle")
        target_temp = 33.0 + power / GPU_POWER_LIMIT_W * 48.0 + (4.0 if hot == i else 0.0)
        self._temps[i] += (target_temp - self._temps[i]) * 0.08
        sm_clock = 180.0 if util < 1 else (2430.0 if "sw_power_cap" not in throttle else 2115.0)
        slowed = stats is not None and (episode == "gpu_throttle" or (episode == "slow_gpu" and i == stats.episode_gpu))
        if slowed and stats is not None:
            sm_clock = round(2430.0 / max(1.0, stats.episode_slowdown))
            self._temps[i] = max(self._temps[i], 88.0 if episode == "slow_gpu" else 92.0)
            throttle = [r for r in throttle if r != "sw_power_cap"]  # at that clock it draws far under its cap
            power = min(power, 0.7 * GPU_POWER_LIMIT_W)
            if episode == "gpu_throttle":  # NVML's clock-event reasons; a slow GPU shows none
                throttle += ["hw_thermal_slowdown", "sw_thermal_slowdown"]
        return power, throttle, sm_clock

    def _smoothed(self, i: int, draw: float, base: float) -> float:
        """NVML's one-second average of the draw, with a little seeded noise on what work adds."""
        draw += (draw - base) * 0.03 * (self._noise.random() - 0.5)
        last = self._watts[i]
        watts = draw if last is None else last + (draw - last) * POWER_SMOOTHING
        self._watts[i] = watts
        return watts

    def _tp_rank(self, gpu: int) -> int:
        """The TP rank on this GPU: ``base_gpu_id`` is TP rank 0 of this node's first rank."""
        return self.s.local_tp_ranks[0] + gpu - self.s.base_gpu_id

    def _hot_gpu(self, stats: SchedStats | None) -> int | None:
        if not self.s.enable_eplb or stats is None:
            return None
        return self.s.base_gpu_id + (3 + 5 * stats.rebalances) % self.s.gpus_per_node


async def write_loop(
    model: GpuModel,
    boot: BootState,
    stats: Callable[[], SchedStats | None],
    path: Path | None = None,
    interval_s: float = WRITE_INTERVAL_S,
) -> None:
    """Rewrite the state file until cancelled; then leave idle GPUs behind."""
    try:
        while True:
            try:
                write_state(model.state(boot, stats()), path)
            except OSError:
                pass  # a full or vanished tmp dir must not take the server down
            await asyncio.sleep(interval_s)
    finally:
        release_state(path)


def write_idle(path: Path | None = None) -> None:
    try:
        write_state(idle_state(), path)
    except OSError:
        pass
