"""The cockpit's states (issue 15's eight; issue 17's speculative sweep and expert heatmap), each a controller
and the keys that bring it on screen.

Shared by the snapshot tests (tests/test_tui_snapshots.py, three sizes each) and by anyone who wants
to look at a state as a picture.  Fixed times and figures: a state draws the same everywhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot

from kimitui.control import Controller
from kimitui.events import (
    Baseline,
    ConnectionState,
    Event,
    ExpertLoad,
    GpuProcess,
    GpuProcs,
    InFlight,
    LevelResult,
    LevelStarted,
    LogLine,
    Percentiles,
    ProfileState,
    ProfileSwitch,
    RequestResult,
    ServerHealth,
    ServerInfo,
    ServerStats,
    SwapProgress,
    SweepProgress,
    SweepResult,
    SweepStarted,
)
from kimitui.recording import write_recording
from kimitui.replay import ReplayController
from kimitui.tui.app import KimituiApp
from kimitui.sglang.log import parse_line, to_event, to_stats
from tests.support.fakecontrol import T0, TUNED, FakeController, StoryController, caps, gpu_sample, level, spec, story_events
from tests.support.gapcase import gap_case_events

POLLS = ("/metrics", "/v1/loads", "/health")


def _rank_lines(t: float, clock: str, message: str, kind: str = "startup", severity: str = "info") -> list[Event]:
    return [LogLine(t=t + r * 0.001, raw=f"[2025-11-30 {clock} TP{r} EP{r}] {message}", line_kind=kind,
                    severity=severity) for r in range(8)]


def _polling(t: float) -> list[Event]:
    return [LogLine(t=t, raw=f'INFO:     127.0.0.1:5{k}123 - "GET {path} HTTP/1.1" 200 OK', line_kind="access")
            for k, path in enumerate(POLLS)]


def serving_events(minutes: int = 3) -> list[Event]:
    """ep8-tuned up and serving for a few minutes, no sweep yet: GPUs idle-ish, the log with polling."""
    ev: list[Event] = [ConnectionState(t=T0, state="connected"), caps(T0),
                       GpuProcs(t=T0, procs=[GpuProcess(gpu_index=i, pid=4100 + i, used_mib=86_000,
                                                        name="sglang::scheduler", rank=f"TP{i}_EP{i}")
                                             for i in range(8)]),
                       ProfileState(t=T0 + 1, profile="ep8-tuned", state="serving"),
                       ServerHealth(t=T0 + 1, url="http://127.0.0.1:30000", ok=True, status=200)]
    ev += _rank_lines(T0 + 1, "10:20:01", "Load weight end. type=DeepseekV3ForCausalLM, avail mem=9.81 GB")
    ev += _rank_lines(T0 + 2, "10:20:02", "Capture cuda graph end. Time elapsed: 41.20 s. mem usage=2.11 GB.")
    ev.append(LogLine(t=T0 + 3, raw="[2025-11-30 10:20:03] The server is fired up and ready to roll!",
                      line_kind="startup"))
    for k in range(0, minutes * 60, 2):
        t = T0 + 4 + k
        ev.append(gpu_sample(t, 3.0 + (k % 7), seq=k))
        ev.append(ServerStats(t=t, source="metrics", running_reqs=0, queued_reqs=0, token_usage=0.01,
                              gen_throughput=0.0, cuda_graph=True))
        if k % 10 == 0:
            ev += _polling(t)
    return ev


def starting_events() -> list[Event]:
    """ep8-tuned was serving; a swap to ep8-eplb is loading weights (62 %)."""
    ev = serving_events(minutes=1)
    t = T0 + 70
    ev += [ProfileState(t=t, profile="ep8-eplb", state="starting", detail="loading weights"),
           SwapProgress(t=t + 20, profile="ep8-eplb", phase="weights", fraction=0.62, message="loading weights: 39 of 64")]
    ev += _rank_lines(t + 5, "10:21:15", "Load weight begin. avail mem=94.12 GB")
    ev += _rank_lines(t + 19, "10:21:29", "Loading safetensors checkpoint shards:  61% Completed | 39/64")
    for k in range(0, 20, 2):
        ev.append(gpu_sample(t + k, 0.0, seq=1000 + k))
    return ev


def after_sweep_events() -> list[Event]:
    """The story's ep8-eplb sweep finished (stopped after C=64): its curve over ep8-tuned's."""
    return [*story_events(), SweepResult(t=T0 + 99, sweep_id="s2", levels=[1, 8, 32], outcome="stopped",
                                         reason="stopped by the operator", peak_tok_s=640.0)]


SPEC_LEVELS = [1, 8, 32, 64, 128, 256]
DFLASH = [(1, 119.8, 5.62), (8, 672.0, 5.10), (32, 1364.0, 4.21), (64, 1548.0, 3.37), (128, 1460.0, 1.93)]
"""ep8-dflash's finished levels: (C, aggregate tok/s, accept length); C=128 collapsed, C=256 runs."""
DFLASH_ARGS = {"tp_size": 8, "ep_size": 8, "speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
               "tokenizer_metrics_custom_labels_header": "x-custom-labels",
               "tokenizer_metrics_allowed_custom_labels": ["kimitui_sweep", "kimitui_level"]}
EPLB_ARGS = {"tp_size": 8, "ep_size": 8, "enable_eplb": True, "eplb_rebalance_num_iterations": 1000,
             "expert_balancedness_report_mode": "both", "enable_metrics": True}


def _log(t: float, clock: str, message: str, rank: int = 0) -> LogLine:
    """A server log line through the real parser (its kind and fields as the log follower makes them)."""
    return to_event(f"[2025-11-30 {clock} TP{rank} EP{rank}] {message}", host="sim", source="journal", t=t)


def _decode(t: float, clock: str, running: int, accept_len: float, throughput: float) -> list[Event]:
    """The scheduler's Decode line with its speculative part, and the figures the follower reads from it."""
    line = _log(t, clock, f"Decode batch, #running-req: {running}, #token: {running * 900}, token usage: "
                          f"{running / 400:.2f}, accept len: {accept_len:.2f}, accept rate: {(accept_len - 1) / 15:.2f}, "
                          f"cuda graph: True, gen throughput (token/s): {throughput:.2f}, #queue-req: 0")
    stats = to_stats(parse_line(line.raw), host="sim", t=t)
    return [line, *([stats] if stats is not None else [])]


def _spec_level(sweep_id: str, c: int, agg: float, acc: float, t: float) -> LevelResult:
    lv = level(sweep_id, c, agg, agg * 1.03, t)
    return lv.model_copy(update={"spec_accept_len": Percentiles(p50=acc, p90=acc * 1.1, p99=acc * 1.2, mean=acc),
                                 "spec_accept_len_level": acc, "spec_requests": lv.requests})


def spec_sweep_events() -> list[Event]:
    """ep8-tuned swept and the baseline; ep8-dflash (DFlash) swept: accept length falling with C, collapsed
    at C=128 (said when its result landed) and at the running C=256 (said live, from the Decode line)."""
    ev = serving_events(minutes=1)
    ev += [SweepStarted(t=T0 + 70, sweep_id="s1", spec=spec(SPEC_LEVELS), profile="ep8-tuned"),
           *(level("s1", c, a, s, T0 + 72 + i) for i, (c, a, s) in enumerate(TUNED) if c in SPEC_LEVELS),
           SweepResult(t=T0 + 80, sweep_id="s1", levels=SPEC_LEVELS, peak_tok_s=1538.0),
           Baseline(t=T0 + 81, profile="ep8-tuned"),
           ProfileSwitch(t=T0 + 120, from_profile="ep8-tuned", to_profile="ep8-dflash", outcome="ok",
                         phases={"stop": 4.0, "start": 35.0, "total": 39.0},
                         diff={"speculative_algorithm": [None, "DFLASH"]}),
           ProfileState(t=T0 + 120, profile="ep8-dflash", state="serving"),
           ServerInfo(t=T0 + 121, url="http://127.0.0.1:30000", args=DFLASH_ARGS),
           SweepStarted(t=T0 + 130, sweep_id="s3", spec=spec(SPEC_LEVELS), profile="ep8-dflash")]
    t = T0 + 130
    for c, agg, acc in DFLASH:
        ev.append(LevelStarted(t=t, sweep_id="s3", concurrency=c))
        ev += _decode(t + 2, f"10:22:{(t + 2 - T0 - 120) % 60:02.0f}", c, acc, agg)
        t += 8
        ev.append(_spec_level("s3", c, agg, acc, t))
    ev.append(LevelStarted(t=t, sweep_id="s3", concurrency=256))
    for k in range(6):
        ev += _decode(t + 1 + k, f"10:23:{k + 11:02d}", 256, 1.45 - k * 0.01, 1400.0 + k * 10)
        ev.append(gpu_sample(t + 1 + k, 96.0, seq=5000 + k))
    ev += [RequestResult(t=t + 5, sweep_id="s3", request_id=f"s3-c256-r{i}", concurrency=256, ok=True,
                         intended_send=t, sent=t, ttft_s=0.4, e2e_s=30.0 + i * 0.1, completion_tokens=512,
                         decode_tok_s=5.4 + (i % 9) * 0.15) for i in range(40)]
    ev.append(SweepProgress(t=t + 7, sweep_id="s3", concurrency=256, done=40, level_tokens=9_800, level_elapsed_s=7.0,
                            in_flight=[InFlight(request_id=f"s3-c256-f{i}", elapsed_s=6.0, tokens=30 + i % 20,
                                                tok_s=5.0 + (i % 7) * 0.2) for i in range(216)]))
    return ev


def _heat_window(t: float, drift: float) -> ExpertLoad:
    """61 layers (0-2 dense) x 8 GPU ranks: GPU3 carries more in the early layers, GPU5 in the late ones."""
    counts: list[list[float]] = []
    for layer in range(61):
        if layer < 3:
            counts.append([0.0] * 8)
            continue
        hot = 3 if layer < 30 else 5
        counts.append([120.0 * (1.0 + drift * (1.6 if g == hot else 0.25 if g == (hot + 1) % 8 else 0.0)
                                + 0.02 * ((layer * 7 + g * 3) % 5)) for g in range(8)])
    rates = [sum(row) / 8 / max(row) for row in counts if max(row) > 0]
    return ExpertLoad(t=t, layers=list(range(61)), counts=counts, balancedness=round(sum(rates) / len(rates), 3))


def experts_events() -> list[Event]:
    """ep8-eplb serving under load: the balance drifting down, two rebalances that lift it (every rank's
    copy), one skipped, the newest heatmap windows."""
    ev = serving_events(minutes=1)
    ev += [ProfileState(t=T0 + 60, profile="ep8-eplb", state="serving"),
           ServerInfo(t=T0 + 61, url="http://127.0.0.1:30000", args=EPLB_ARGS)]
    balance = 0.91
    for k in range(60):
        t = T0 + 62 + k * 2
        balance = 0.93 if k in (20, 45) else max(0.62, balance - 0.012)
        line = _log(t, f"10:{21 + (k * 2 + 2) // 60}:{(k * 2 + 2) % 60:02d}",
                    f"[Expert Balancedness] forward_pass_id={(k + 1) * 100} current_pass_balancedness={balance:.3f} "
                    f"last_10_average_balancedness={balance + 0.01:.3f} last_100_average_balancedness=0.840  "
                    "gpu_physical_count_sum=98304")
        stats = to_stats(parse_line(line.raw), host="sim", t=t)
        ev += [line, *([stats] if stats is not None else [])]
        ev.append(gpu_sample(t, 90.0 - (1 - balance) * 30, seq=3000 + k))
        if k in (19, 44):
            ev += [_log(t + 0.5 + r * 0.001, "10:22:00", "[EPLBManager] rebalance start", r) for r in range(8)]
            ev += [_log(t + 1.8 + r * 0.001, "10:22:01", "[EPLBManager] rebalance end time=1.312s", r) for r in range(8)]
        if k == 32:
            ev += [_log(t + 0.5, "10:22:30", "[EPLBManager] rebalance start"),
                   _log(t + 0.6, "10:22:30", "[EPLBManager] Skipped ep rebalancing: current GPU utilization 0.86 > "
                                             "minimum rebalance threshold 0.85")]
    ev += [_heat_window(T0 + 180 + k * 0.5, 0.2 + k * 0.02) for k in range(4)]
    return ev


async def _experts(pilot: Pilot[int]) -> None:
    await _press(pilot, "h")
    await pilot.pause(0.6)  # the heatmap refreshes twice a second


Steps = Callable[[Pilot[int]], Awaitable[None]]


async def _nothing(pilot: Pilot[int]) -> None:
    return None


async def _press(pilot: Pilot[int], *keys: str) -> None:
    await pilot.press(*keys)
    await pilot.pause(0.05)
    await pilot.app.screen.workers.wait_for_complete()
    await pilot.pause(0.05)


async def _confound(pilot: Pilot[int]) -> None:
    await _press(pilot, "2")


async def _straggler(pilot: Pilot[int]) -> None:
    app = pilot.app
    assert isinstance(app, KimituiApp)
    app.query_one("#stragglers").focus()
    await _press(pilot, "enter")


async def _compare(pilot: Pilot[int]) -> None:
    await _press(pilot, "c")


@dataclass
class ScreenState:
    """A named state: how to build its controller and what to press once it is drawn."""

    name: str
    controller: Callable[[Path], Controller]
    steps: Steps = _nothing


class _SnapshotReplay(ReplayController):
    """A replay of the story whose header names the recording without the test's temporary folder."""

    @property
    def recording_path(self) -> str | None:
        return "recordings/story.jsonl"


async def _replayed_to_the_end(pilot: Pilot[int]) -> None:
    """A replay at full speed runs in its own task: wait for its last event, however loaded the machine."""
    app = pilot.app
    assert isinstance(app, KimituiApp) and isinstance(app.controller, ReplayController)
    for _ in range(200):
        if app.controller.replayer.finished:
            break
        await pilot.pause(0.05)
    await drawn(pilot)


def _replay(tmp: Path) -> Controller:
    path = write_recording(tmp / "story.jsonl", story_events())
    return _SnapshotReplay(path, speed=None)


STATES: list[ScreenState] = [
    ScreenState("idle", lambda tmp: FakeController(initial=serving_events())),
    ScreenState("starting", lambda tmp: FakeController(initial=starting_events())),
    ScreenState("sweeping", lambda tmp: StoryController()),
    ScreenState("after_sweep", lambda tmp: FakeController(initial=after_sweep_events())),
    ScreenState("confound_dialog", lambda tmp: StoryController(), _confound),
    ScreenState("straggler_detail", lambda tmp: FakeController(initial=gap_case_events()), _straggler),
    ScreenState("compare", lambda tmp: StoryController(), _compare),
    ScreenState("replay", _replay, _replayed_to_the_end),
    ScreenState("spec_sweep", lambda tmp: FakeController(initial=spec_sweep_events())),
    ScreenState("experts", lambda tmp: FakeController(initial=experts_events()), _experts),
]
SIZES = [(80, 24), (120, 40), (200, 60)]


async def drawn(pilot: Pilot[int]) -> None:
    """Let the controller publish, fold it all, draw every chart; no toasts (they time out differently)."""
    app = pilot.app
    assert isinstance(app, KimituiApp)
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause(0.05)
        app.pump(force_charts=True)
    app.clear_notifications()
    await pilot.pause(0.05)
