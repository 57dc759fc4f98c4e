"""The simulator's power model (issue 34): power follows the batch and the profile, a rebalance's stall
draws less, nothing exceeds the 600 W cap, and the draws repeat with the server's seed."""

from __future__ import annotations

import dataclasses
import time

import pytest

from kimitui.sim.gpus import GpuModel
from kimitui.sim.gpustate import GPU_POWER_LIMIT_W, IDLE_POWER_W, idle_state
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.power_model import PowerModel
from kimitui.sim.scheduler import SchedStats
from kimitui.sim.settings import ServerSettings, load_settings
from kimitui.sim.startup import BootState

SERVING = BootState(phase="serving", mem_used_gb=85.0)
KV_PER_REQUEST = 900


def busy(batch: int, **kw: object) -> SchedStats:
    return SchedStats(running=batch, batch=batch, kv_tokens=batch * KV_PER_REQUEST,
                      busy_until=time.monotonic() + 30, **kw)  # type: ignore[arg-type]


def settled(model: GpuModel, stats: SchedStats, writes: int = 16) -> list[float]:
    """Each GPU's power once the one-second average has caught up with the load."""
    for _ in range(writes):
        state = model.state(SERVING, stats)
    return [g.power_w for g in state.gpus]


def gpu_model(settings: ServerSettings | str) -> GpuModel:
    s = load_settings(settings) if isinstance(settings, str) else settings
    return GpuModel(s, pid=4242, rank_title=lambda i: f"sglang::scheduler_TP{i}")


@pytest.mark.parametrize("profile", ["ep8-tuned", "tp8", "ep4", "ep8-eplb"])
def test_power_rises_with_the_batch_at_a_fixed_profile(profile):
    power = PowerModel(PerfModel(load_settings(profile)))
    graph_max = power.perf.s.cuda_graph_max_bs
    draws = [power.pass_w(b, b * KV_PER_REQUEST) for b in range(1, graph_max + 1)]
    assert all(b >= a for a, b in zip(draws, draws[1:]))
    assert draws[255] - draws[0] > 150  # C=256 draws far more than C=1: memory-bound GEMV vs compute-heavy GEMMs
    # the same through the GPUs the fake NVML reads
    watts = [sum(settled(gpu_model(profile), busy(b))) / 8 for b in (1, 16, 64, 256)]
    assert watts == sorted(watts) and watts[0] > IDLE_POWER_W


def test_tp8_and_ep8_draw_differently_as_modelled():
    tp8, ep8 = (PowerModel(PerfModel(load_settings(p))) for p in ("tp8", "ep8"))
    parts_tp, parts_ep = tp8.perf.decode_phases_ms(16, 16 * KV_PER_REQUEST), ep8.perf.decode_phases_ms(16, 16 * KV_PER_REQUEST)
    assert parts_tp["allreduce"] > 0 and parts_tp["a2a"] == 0  # TP8: an all-reduce per layer over PCIe
    assert parts_ep["allreduce"] == 0 and parts_ep["a2a"] > 0  # EP8: dispatch and combine
    for batch in (1, 16, 64, 256):
        kv = batch * KV_PER_REQUEST
        # TP8's all-reduce makes every pass longer: more energy per token at every C
        assert tp8.pass_joules(batch, kv) > 1.2 * ep8.pass_joules(batch, kv)
        # once its bytes dominate the pass, TP8's GPUs draw less than EP8's: they wait on PCIe while EP8 multiplies
        if batch >= 16:
            assert tp8.pass_w(batch, kv) < ep8.pass_w(batch, kv) - 15
    # at C=1 both passes are mostly latency: TP8's spinning all-reduce draws a little more than EP8's launch gaps
    assert 0 < tp8.pass_w(1, KV_PER_REQUEST) - ep8.pass_w(1, KV_PER_REQUEST) < 30
    tp_watts, ep_watts = settled(gpu_model("tp8"), busy(16)), settled(gpu_model("ep8"), busy(16))
    assert max(tp_watts) < min(ep_watts)


def test_a_drafter_and_eplb_cost_energy_per_pass():
    tuned, dflash, eplb = (PowerModel(PerfModel(load_settings(p))) for p in ("ep8-tuned", "ep8-dflash", "ep8-eplb"))
    kv = 16 * KV_PER_REQUEST
    assert dflash.pass_w(16, kv) > tuned.pass_w(16, kv) + 50  # the drafter's pass and the verify work: compute
    assert dflash.perf.decode_phases_ms(16, kv)["draft"] > 0
    assert eplb.pass_joules(16, kv) > tuned.pass_joules(16, kv)  # the recorder's per-token work


def test_a_rebalance_stall_draws_less_for_the_same_wall_time():
    model = gpu_model("ep8-eplb")
    working = settled(model, busy(64))
    stalled = settled(model, busy(64, in_rebalance=True))
    assert all(s < w - 150 for s, w in zip(stalled, working))
    # a window with a stall in it: the same number of writes, less energy
    plain, with_stall = gpu_model("ep8-eplb"), gpu_model("ep8-eplb")
    steady = [sum(plain.state(SERVING, busy(64)).gpus[i].power_w for i in range(8)) for _ in range(40)]
    stats = [busy(64, in_rebalance=10 <= k < 22) for k in range(40)]
    stall = [sum(g.power_w for g in with_stall.state(SERVING, s).gpus) for s in stats]
    assert sum(stall) < sum(steady) - 12 * 8 * 100


def test_never_over_the_cap():
    hot = dataclasses.replace(load_settings("ep8-eplb"), tuning={"power_tokens_w": 2000.0, "power_experts_w": 900.0})
    watts_and_reasons = []
    model = gpu_model(hot)
    for _ in range(20):
        state = model.state(SERVING, busy(256))
        watts_and_reasons += [(g.power_w, g.throttle_reasons) for g in state.gpus]
    assert all(w <= GPU_POWER_LIMIT_W for w, _ in watts_and_reasons)
    assert all("sw_power_cap" in r for w, r in watts_and_reasons[-8:])
    for profile in ("ep8-tuned", "tp8", "ep4", "ep8-eplb", "ep8-dflash", "ep8-eagle3"):
        model = gpu_model(profile)
        for batch in (1, 8, 64, 256, 512, 1024):
            assert all(w <= GPU_POWER_LIMIT_W for w in settled(model, busy(batch), writes=4))


def test_draws_repeat_with_the_seed():
    def run(seed: int) -> list[float]:
        model = gpu_model(dataclasses.replace(load_settings("ep8-eplb"), seed=seed))
        out: list[float] = []
        for k in range(30):
            state = model.state(SERVING, busy(8 + k, in_rebalance=k in (12, 13)))
            out += [g.power_w for g in state.gpus]
        return out

    assert run(7) == run(7)
    assert run(7) != run(8)  # the noise is the seed's


def test_an_idle_card_draws_its_idle_power():
    assert all(g.power_w == IDLE_POWER_W for g in idle_state().gpus)
    model = gpu_model("ep8-tuned")
    loaded_idle = settled(model, SchedStats())
    assert all(IDLE_POWER_W < w < 120 for w in loaded_idle)  # weights resident, clocks up, no kernel
