"""A deterministic Controller and a fixed event story for cockpit tests.

``FakeController`` implements :class:`kimitui.control.Controller` over a real
``Session``: every action publishes the events a live controller would publish
(swap phases, sweep levels, notes, markers) and records the call, so pilot
tests assert both what the app asked for and what the screen shows.
``story_events`` is the SCENARIOS.md story (ep8-tuned swept, then ep8-eplb
with a C=1 straggler during an EPLB rebalance) at fixed times for snapshots.
"""

from __future__ import annotations

import asyncio

from kimitui.control import NotAvailable
from kimitui.launcher.plan import SwapPlan
from kimitui.events import (
    Baseline,
    ConnectionState,
    Event,
    GpuCaps,
    GpuProcess,
    GpuProcs,
    GpuReading,
    GpuSample,
    GpuStatic,
    InFlight,
    LevelResult,
    LevelStarted,
    LogLine,
    Marker,
    Note,
    Percentiles,
    ProfileState,
    ProfileSwitch,
    RequestResult,
    ServerHealth,
    ServerStats,
    Straggler,
    SwapProgress,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.session import Session

T0 = 1_764_498_000.0
"""2025-11-30 10:20:00 UTC: every scripted event is relative to this."""

PROFILES = ["ep8-tuned", "ep8-v2", "ep8-eplb", "tp8"]
SUPPORTED = ["util_pct", "mem_used_mib", "mem_total_mib", "power_w", "power_limit_w", "temp_c",
             "sm_clock_mhz", "pcie_tx_kbps", "pcie_rx_kbps", "throttle_reasons"]


def caps(t: float = T0, supported: list[str] | None = None) -> GpuCaps:
    return GpuCaps(t=t, driver="580.65", nvml_version="13.580", gpus=[
        GpuStatic(index=i, uuid=f"GPU-{i:04d}", name="NVIDIA RTX PRO 6000 Blackwell", memory_total_mib=97_887,
                  power_limit_w=600, supported=list(SUPPORTED if supported is None else supported))
        for i in range(8)])


def gpu_sample(t: float, util: float, *, hot: int | None = None, pcie: float = 2_000.0, seq: int = 0,
               dip: float = 0.0) -> GpuSample:
    """Eight GPUs at one tick; ``hot`` runs warmer, ``dip`` lowers utilisation (a rebalance)."""
    gpus = []
    for i in range(8):
        u = max(0.0, util - dip - (i % 3) * 1.5)
        gpus.append(GpuReading(
            index=i, uuid=f"GPU-{i:04d}", util_pct=u, mem_used_mib=87_000 + i * 100, mem_total_mib=97_887,
            power_w=180 + u * 3.5, power_limit_w=600, temp_c=(84.0 if i == hot else 62.0 + i),
            sm_clock_mhz=2_400, pcie_tx_kbps=pcie + i * 10, pcie_rx_kbps=pcie / 2,
            throttle_reasons=["sw_power_cap"] if i == 7 and u > 90 else []))
    return GpuSample(t=t, seq=seq, gpus=gpus)


def spec(levels: list[int] | None = None) -> SweepSpec:
    return SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6",
                     levels=levels or [1, 8, 32, 64, 96, 128, 192, 256], mode="sustained", max_tokens=512)


def level(sweep_id: str, c: int, agg: float, steady: float, t: float, stragglers: list[Straggler] | None = None,
          failed: int = 0) -> LevelResult:
    per = agg / c
    return LevelResult(
        t=t, sweep_id=sweep_id, concurrency=c, requests=max(6, c), ok=max(6, c) - failed, failed=failed,
        failures={"timeout": failed} if failed else {}, wall_s=512 / per, output_tokens=512 * max(6, c),
        agg_tok_s=agg, steady_tok_s=steady,
        ttft=Percentiles(p50=0.05 + c * 0.001, p99=0.09 + c * 0.002),
        tpot=Percentiles(p50=1 / per, p99=1.3 / per),
        decode_tok_s=Percentiles(p50=per * 1.02, p99=per * 1.2), stragglers=stragglers or [])


TUNED = [(1, 65.1, 65.4), (8, 420.0, 431.0), (32, 1010.0, 1052.0), (64, 1290.0, 1330.0),
         (96, 1420.0, 1466.0), (128, 1490.0, 1521.0), (192, 1530.0, 1560.0), (256, 1538.0, 1571.0)]
EPLB = [(1, 38.4, 62.1), (8, 300.0, 352.0), (32, 640.0, 700.0)]


def straggler(sweep_id: str = "s2") -> Straggler:
    return Straggler(request_id=f"{sweep_id}-c1-r4", concurrency=1, decode_tok_s=7.7, median_decode_tok_s=63.0,
                     max_gap_s=9.8, gap_start=T0 + 67.0, gap_end=T0 + 76.8, reason="stall gap 9.8 s")


def story_events() -> list[Event]:
    """The operator's story up to a running ep8-eplb sweep at C=64 (fixed times, no randomness)."""
    ev: list[Event] = [ConnectionState(t=T0, state="connected"), caps(T0),
                       GpuProcs(t=T0, procs=[GpuProcess(gpu_index=i, pid=1000 + i, used_mib=86_000,
                                                          name="python", rank=f"TP{i}_EP{i}") for i in range(8)])]
    for k in range(0, 100, 2):
        t = T0 + k
        in_gap = 67 <= k <= 77
        ev.append(gpu_sample(t, 93.0 if k < 60 else 88.0, hot=3 if in_gap else None,
                             pcie=40_000.0 if in_gap else 2_000.0, seq=k, dip=45.0 if in_gap else 0.0))
        ev.append(ServerStats(t=t, source="log", running_reqs=64 if k > 80 else 1, queued_reqs=0,
                              token_usage=0.12 + k / 1000, gen_throughput=60 + k * 10, cuda_graph=True))
    ev += [
        ProfileState(t=T0 + 1, profile="ep8-tuned", state="serving"),
        LogLine(t=T0 + 1, raw="[2025-11-30 10:20:01] The server is fired up and ready to roll!", line_kind="startup"),
        ServerHealth(t=T0 + 1, url="http://127.0.0.1:30000", ok=True, status=200),
        SweepStarted(t=T0 + 2, sweep_id="s1", spec=spec(), profile="ep8-tuned"),
    ]
    ev += [level("s1", c, a, s, T0 + 3 + i) for i, (c, a, s) in enumerate(TUNED)]
    ev += [SweepResult(t=T0 + 20, sweep_id="s1", levels=[c for c, _, _ in TUNED], peak_tok_s=1538.0),
           Baseline(t=T0 + 21, profile="ep8-tuned"),
           SwapProgress(t=T0 + 30, profile="ep8-eplb", phase="graphs", fraction=0.5),
           ProfileSwitch(t=T0 + 40, from_profile="ep8-tuned", to_profile="ep8-eplb", outcome="ok",
                         phases={"stop": 3.0, "start": 38.0}, diff={"enable_eplb": [False, True]}),
           ProfileState(t=T0 + 40, profile="ep8-eplb", state="serving"),
           Note(t=T0 + 41, text="trying EPLB alone"),
           SweepStarted(t=T0 + 60, sweep_id="s2", spec=spec(), profile="ep8-eplb"),
           LevelStarted(t=T0 + 60, sweep_id="s2", concurrency=1),
           LogLine(t=T0 + 66, raw="[2025-11-30 10:21:06 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 61.2",
                   line_kind="decode"),
           LogLine(t=T0 + 67.2, raw="[2025-11-30 10:21:07 TP0] [EPLBManager] rebalance start", line_kind="eplb",
                   severity="warning"),
           LogLine(t=T0 + 76.5, raw="[2025-11-30 10:21:16 TP0] [EPLBManager] rebalance end time=9.31 s",
                   line_kind="eplb", severity="warning"),
           LogLine(t=T0 + 90, raw="[2025-11-30 10:21:30 TP3] ERROR watchdog: NCCL timeout suspected", line_kind="error",
                   severity="error")]
    ev += [level("s2", c, a, s, T0 + 80 + i, stragglers=[straggler()] if c == 1 else None)
           for i, (c, a, s) in enumerate(EPLB)]
    ev.append(LevelStarted(t=T0 + 90, sweep_id="s2", concurrency=64))
    ev += [RequestResult(t=T0 + 95, sweep_id="s2", request_id=f"s2-c64-r{i}", concurrency=64, ok=True,
                         intended_send=T0 + 90, sent=T0 + 90, ttft_s=0.1, e2e_s=4.0 + i * 0.05,
                         completion_tokens=512, decode_tok_s=11.0 + (i % 7) * 0.4 if i != 5 else 3.1)
           for i in range(12)]
    ev.append(SweepProgress(t=T0 + 96, sweep_id="s2", concurrency=64, done=12, level_tokens=5_400,
                            level_elapsed_s=6.0, in_flight=[
                                InFlight(request_id=f"s2-c64-f{i}", elapsed_s=1.0 + i * 0.08, tokens=10 + i * 2,
                                         tok_s=9.0 + (i % 5)) for i in range(52)]))
    return ev


class FakeController:
    """Deterministic stand-in for the live controller; records every call in ``calls``."""

    def __init__(self, session: Session | None = None, *, live: bool = True, initial: list[Event] | None = None,
                 sweep_levels: int = 1, fail: dict[str, Exception] | None = None) -> None:
        self.session = session or Session("sim")
        self.host_name = "sim"
        self.live = live
        self.watch_url: str | None = None
        self.watch_offer: str | None = None
        self.initial = initial if initial is not None else [ConnectionState(t=T0, state="connected"), caps(T0),
                                                            gpu_sample(T0, 0.0),
                                                            ProfileState(t=T0, profile="ep8-tuned", state="serving")]
        self.calls: list[tuple[object, ...]] = []
        self.running: str | None = "ep8-tuned"
        self.baseline: str | None = None
        self._busy: str | None = None
        self._recording = True
        self.fail = fail or {}
        self.sweep_levels = sweep_levels
        self.swap_gate = asyncio.Event()
        """Set it to let a swap finish (tests can hold a swap to see it as busy)."""
        self.swap_gate.set()
        self.shut_down = False

    def _check(self, name: str) -> None:
        self.calls.append((name,))
        if name in self.fail:
            raise self.fail[name]

    # -- lifecycle
    async def start(self) -> None:
        self._check("start")
        self.session.publish_many(self.initial)

    async def shutdown(self) -> None:
        self.calls.append(("shutdown",))
        if self._busy == "sweep":
            await self.stop_sweep()
        self.shut_down = True

    # -- profiles
    def profile_names(self) -> list[str]:
        return list(PROFILES)

    def plan_swap(self, profile: str) -> SwapPlan:
        self._check("plan_swap")
        if not self.live:
            raise NotAvailable("swapping is not possible while replaying")
        if profile == "ep8-v2":
            return SwapPlan(target=profile, running=self.running, baseline=self.baseline,
                            changes={"num_continuous_decode_steps": (8, 16), "enable_eplb": (False, True)},
                            confounded=True,
                            warnings=["confounded — 2 knobs changed",
                                      "num_continuous_decode_steps has no effect in this SGLang"],
                            variants=["ep8-eplb"])
        if profile == "tp8":
            return SwapPlan(target=profile, running=self.running, baseline=self.baseline,
                            changes={"tp_size": (1, 8), "ep_size": (8, 1)},
                            errors=["tp8: --tp-size 8 with --ep-size 1 needs 8 GPUs free"])
        return SwapPlan(target=profile, running=self.running, baseline=self.baseline,
                        changes={"enable_eplb": (False, True)} if profile == "ep8-eplb" else {})

    async def swap(self, profile: str) -> None:
        self.calls.append(("swap", profile))
        self._busy = "swap"
        pub = self.session.publish
        try:
            pub(ProfileState(profile=profile, state="starting"))
            for phase, frac in (("stop", 0.1), ("weights", 0.4), ("kv_cache", 0.6), ("graphs", 0.9)):
                pub(SwapProgress(profile=profile, phase=phase, fraction=frac))
                await asyncio.sleep(0)
            await self.swap_gate.wait()
            if "swap" in self.fail:
                pub(ProfileSwitch(from_profile=self.running, to_profile=profile, outcome="rolled_back",
                                  reason=str(self.fail["swap"]), log_excerpt=["CUDA out of memory"]))
                pub(ProfileState(profile=self.running, state="rolled_back", detail=str(self.fail["swap"])))
                return
            pub(ProfileSwitch(from_profile=self.running, to_profile=profile, outcome="ok",
                              phases={"stop": 1.0, "start": 2.0}))
            self.running = profile
            pub(ProfileState(profile=profile, state="serving"))
        finally:
            self._busy = None

    def mark_baseline(self) -> str | None:
        self._check("mark_baseline")
        self.baseline = self.running
        if self.running:
            self.session.publish(Baseline(profile=self.running))
        return self.running

    # -- sweeps
    def default_sweep_spec(self) -> SweepSpec:
        return spec()

    async def start_sweep(self, sweep: SweepSpec) -> None:
        self._check("start_sweep")
        self.calls[-1] = ("start_sweep", sweep)
        self._busy = "sweep"
        pub = self.session.publish
        t = T0 + 200
        pub(SweepStarted(t=t, sweep_id="live", spec=sweep, profile=self.running))
        for c in sweep.levels[: self.sweep_levels]:
            pub(LevelStarted(t=t, sweep_id="live", concurrency=c))
            pub(SweepProgress(t=t + 1, sweep_id="live", concurrency=c, level_tokens=130, level_elapsed_s=2.0,
                              in_flight=[InFlight(request_id=f"live-c{c}-r0", elapsed_s=2.0, tokens=130, tok_s=65.0)]))
            st = Straggler(request_id=f"live-c{c}-r1", concurrency=c, decode_tok_s=7.7, median_decode_tok_s=63.0,
                           max_gap_s=9.8, gap_start=t + 2, gap_end=t + 11.8, reason="stall gap")
            pub(level("live", c, 65.0 * c, 66.0 * c, t + 12, stragglers=[st]))
        if len(sweep.levels) > self.sweep_levels:
            c = sweep.levels[self.sweep_levels]
            pub(LevelStarted(t=t + 13, sweep_id="live", concurrency=c))

    async def stop_sweep(self) -> None:
        self.calls.append(("stop_sweep",))
        if self._busy == "sweep":
            self.session.publish(SweepResult(sweep_id="live", outcome="stopped", reason="stopped by operator"))
        self._busy = None

    @property
    def busy(self) -> str | None:
        return self._busy

    # -- recording
    def add_note(self, text: str) -> None:
        self._check("add_note")
        self.calls[-1] = ("add_note", text)
        self.session.publish(Note(text=text))

    def add_marker(self, label: str = "") -> None:
        self._check("add_marker")
        self.session.publish(Marker(label=label))

    def toggle_recording(self) -> bool:
        self._check("toggle_recording")
        self._recording = not self._recording
        return self._recording

    @property
    def recording_path(self) -> str | None:
        return "/tmp/kimitui-test.jsonl" if self._recording else None

    def quit_rule(self) -> str:
        return ""


class StoryController(FakeController):
    """The FakeController whose start() publishes the whole fixed story (for snapshots)."""

    def __init__(self, session: Session | None = None, *, live: bool = True, sweep_levels: int = 1,
                 fail: dict[str, Exception] | None = None) -> None:
        super().__init__(session, live=live, initial=story_events(), sweep_levels=sweep_levels, fail=fail)
        self.running = "ep8-eplb"
        self.baseline = "ep8-tuned"
