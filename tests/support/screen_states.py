"""The cockpit's eight states (issue 15), each a controller and the keys that bring it on screen.

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
    ConnectionState,
    Event,
    GpuProcess,
    GpuProcs,
    LogLine,
    ProfileState,
    ServerHealth,
    ServerStats,
    SwapProgress,
    SweepResult,
)
from kimitui.recording import write_recording
from kimitui.replay import ReplayController
from kimitui.tui.app import KimituiApp
from tests.support.fakecontrol import T0, FakeController, StoryController, caps, gpu_sample, story_events
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
