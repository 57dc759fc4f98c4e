"""Replayer and ReplayController: speed, pause, seek (state rebuild), jumps, Controller protocol."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kimitui.control import Controller, NotAvailable, ReplayControls
from kimitui.events import ErrorEvent, Event, LogLine, Marker, Note, ProfileSwitch, ReplayState
from kimitui.recording import RecordingIndex, read_recording, write_recording
from kimitui.replay import HIGH_RATE_KINDS, ReplayController, Replayer
from kimitui.session import Session
from tests.support.recordings import busy_minute, gpu_sample, synthetic_sweep
from tests.support.waiting import wait_for


class Collector:
    """A session sink that keeps (wall time, event) for every published event."""

    def __init__(self, session: Session) -> None:
        self.items: list[tuple[float, Event]] = []
        session.add_sink(lambda ev: self.items.append((time.monotonic(), ev)))

    @property
    def events(self) -> list[Event]:
        return [ev for _, ev in self.items if not isinstance(ev, ReplayState)]

    def states(self) -> list[ReplayState]:
        return [ev for _, ev in self.items if isinstance(ev, ReplayState)]

    def clear(self) -> None:
        self.items.clear()


def spaced(n: int, step: float, t0: float = 1000.0) -> list[Event]:
    return [Note(t=t0 + i * step, text=str(i)) for i in range(n)]


@pytest.mark.parametrize(("speed", "span"), [(10.0, 2.0), (100.0, 10.0)])
async def test_speed_factor_spaces_events(tmp_path: Path, speed: float, span: float) -> None:
    events = spaced(11, span / 10)
    path = write_recording(tmp_path / "s.jsonl", events)
    session = Session()
    got = Collector(session)
    rep = Replayer(session, path, speed=speed)
    t0 = time.monotonic()
    await rep.start()
    await asyncio.wait_for(rep.wait(), 5)
    elapsed = time.monotonic() - t0
    await rep.stop()
    assert got.events == events
    expected = span / speed
    # never early; late only by what a loaded shared host adds (10x slower would still fail)
    assert 0.9 * expected <= elapsed <= 3 * expected + 0.5, f"{span}s at {speed}x took {elapsed:.3f}s"
    # spaced, not dumped at once: no event arrives before its recorded time / speed
    # (a late one is followed by a shorter gap: the schedule is anchored, so lateness never accumulates)
    for w, ev in got.items:
        if not isinstance(ev, ReplayState):
            assert w - t0 >= (ev.t - events[0].t) / speed - 0.002
    assert got.states()[-1].finished


async def test_as_fast_as_possible_and_in_file_order(tmp_path: Path) -> None:
    events = busy_minute(seconds=60) + synthetic_sweep(t0=2_000_100.0)
    session = Session()
    got = Collector(session)
    rep = Replayer(session, write_recording(tmp_path / "f.jsonl", events), speed=None)
    t0 = time.monotonic()
    await rep.start()
    await asyncio.wait_for(rep.wait(), 5)
    await rep.stop()
    assert got.events == events
    assert time.monotonic() - t0 < 2.0


async def test_pause_resume_and_speed_change(tmp_path: Path) -> None:
    events = spaced(6, 1.0)
    session = Session()
    got = Collector(session)
    rep = Replayer(session, write_recording(tmp_path / "p.jsonl", events), speed=20.0)
    await rep.start()
    await wait_for(lambda: len(got.events) >= 2, 2, "events 0 and 1 out")
    assert rep.play_pause() is False
    n = len(got.events)
    assert 1 <= n <= 3
    pos = rep.position
    # A fixed window on purpose: unpaused, 0.2 s at 20x would play four more events (the channel
    # works: the first ones came, and all the rest come after the resume below).
    await asyncio.sleep(0.2)
    assert len(got.events) == n and rep.position == pos  # paused: nothing moves
    rep.set_speed(100.0)
    assert rep.play_pause() is True
    await asyncio.wait_for(rep.wait(), 2)
    assert got.events == events
    with pytest.raises(ValueError):
        rep.set_speed(0)
    await rep.stop()


async def test_seek_rebuilds_state_then_plays_on(tmp_path: Path) -> None:
    background = busy_minute(t0=10_000.0, seconds=600)  # ten minutes of telemetry
    sweep = synthetic_sweep(t0=10_100.0, straggler_at=8)
    events = sorted(background + sweep, key=lambda e: e.t)
    session = Session()
    got = Collector(session)
    rep = Replayer(session, write_recording(tmp_path / "k.jsonl", events), speed=None, start_paused=True,
                   history_s=60.0, max_log_lines=20)
    await rep.start()
    got.clear()
    target = 10_400.0
    assert await rep.seek(target) == target
    first = got.items[0][1]
    assert isinstance(first, ReplayState) and first.reset and first.position == target
    delivered = got.events
    before = [e for e in events if e.t <= target]
    # every sweep/marker/note event before t is there, in order
    assert [e for e in delivered if e.kind not in HIGH_RATE_KINDS] == [e for e in before if e.kind not in HIGH_RATE_KINDS]
    # telemetry only for the history window, logs capped
    gpu = [e for e in delivered if e.kind == "gpu_sample"]
    assert gpu and min(e.t for e in gpu) >= target - 60.0 and gpu[-1] == [e for e in before if e.kind == "gpu_sample"][-1]
    assert len([e for e in delivered if e.kind == "log_line"]) == 20
    # request results: only the running level's (and the history window's); older levels by their level_result
    rr = [e for e in delivered if e.kind == "request_result"]
    assert rr and all(e.t >= target - 60.0 or e.concurrency == 32 for e in rr)  # type: ignore[attr-defined]
    # seeking backwards resets again and shows less
    got.clear()
    await rep.seek(10_050.0)
    assert got.items[0][1].reset  # type: ignore[union-attr]
    assert not any(e.kind == "level_result" for e in got.events)
    # playing on from the seek delivers exactly the rest
    got.clear()
    rep.resume()
    await asyncio.wait_for(rep.wait(), 5)
    assert got.events == [e for e in events if e.t > 10_050.0]
    await rep.stop()


async def test_seek_clamps_to_the_recording(tmp_path: Path) -> None:
    events = spaced(5, 1.0)
    session = Session()
    rep = Replayer(session, write_recording(tmp_path / "c.jsonl", events), start_paused=True)
    await rep.start()
    assert await rep.seek(0.0) == 1000.0
    assert await rep.seek(1e12) == 1004.0 and rep.finished
    await rep.stop()


async def test_jumps(tmp_path: Path) -> None:
    sweep = synthetic_sweep(t0=5_000.0, straggler_at=8)
    events = [
        Note(t=4_990.0, text="start"),
        *sweep,
        Marker(t=5_100.0, label="look"),
        LogLine(t=5_101.0, raw="plain"),
        LogLine(t=5_102.0, raw="CUDA error: out of memory", severity="error", line_kind="error"),
        ErrorEvent(t=5_102.5, source="guard", message="ep8-eplb: one knob changed", severity="info"),
        ErrorEvent(t=5_103.0, source="metrics", message="timeout"),
        ProfileSwitch(t=5_200.0, to_profile="ep8-eplb", outcome="ok"),
    ]
    session = Session()
    got = Collector(session)
    rep = Replayer(session, write_recording(tmp_path / "j.jsonl", events), speed=1.0, start_paused=True)
    await rep.start()
    straggler_gap = next(e for e in sweep if getattr(e, "max_gap_s", 0) and e.max_gap_s > 5).max_gap_at  # type: ignore[union-attr]
    assert await rep.jump("straggler") == pytest.approx(straggler_gap)
    assert await rep.jump("straggler") is None
    assert await rep.jump("marker") == 5_100.0
    assert await rep.jump("error") == 5_102.0
    assert await rep.jump("error") == 5_103.0  # not the guard's information at 5_102.5 (issue 32)
    assert await rep.jump("profile_switch") == 5_200.0
    # after a jump to a marker, the marker itself is on screen
    assert any(isinstance(e, ProfileSwitch) for e in got.events)
    assert await rep.jump("profile_switch", forward=False) == sweep[0].t
    assert await rep.jump("error", forward=False) is None
    with pytest.raises(ValueError):
        await rep.jump("nonsense")
    await rep.stop()


async def test_replay_controller_is_a_controller(tmp_path: Path) -> None:
    events = synthetic_sweep(t0=7_000.0) + [gpu_sample(7_100.0, host="sim")]
    ctl = ReplayController(write_recording(tmp_path / "c.jsonl", events), speed=None)
    assert isinstance(ctl, Controller) and isinstance(ctl, ReplayControls)
    assert ctl.live is False and ctl.host_name == "sim" and ctl.busy is None
    assert ctl.recording_path and ctl.recording_path.endswith("c.jsonl")
    assert ctl.profile_names() == ["ep8-tuned"]
    assert ctl.default_sweep_spec().levels == [1, 8, 32]
    for call in (lambda: ctl.plan_swap("x"), ctl.mark_baseline, ctl.toggle_recording, lambda: ctl.add_note("n")):
        with pytest.raises(NotAvailable):
            call()
    with pytest.raises(NotAvailable):
        await ctl.swap("ep8-v2")
    with pytest.raises(NotAvailable):
        await ctl.start_sweep(ctl.default_sweep_spec())
    got = Collector(ctl.session)
    await ctl.start()
    await asyncio.wait_for(ctl.replayer.wait(), 5)
    assert got.events == events
    await ctl.seek(7_001.0)
    assert ctl.position == 7_001.0
    await ctl.shutdown()


async def test_replay_tolerates_truncated_and_malformed_lines(tmp_path: Path) -> None:
    events = spaced(10, 0.1)
    path = write_recording(tmp_path / "b.jsonl", events, compress=False)
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = '{"kind":"note","t":1000.2,"host":"sim","text":null}\n'
    path.write_text("".join(lines)[:-15])
    session = Session()
    got = Collector(session)
    rep = Replayer(session, RecordingIndex.open(path), speed=None)
    await rep.start()
    await asyncio.wait_for(rep.wait(), 5)
    await rep.stop()
    expected = read_recording(path).events
    assert got.events == expected == [e for i, e in enumerate(events[:-1]) if i != 2]
    assert sorted(s.line_no for s in rep.index.skipped) == [4, 11]
    assert sorted(s.line_no for s in ReplayController(path).skipped) == [11]  # line 4 is found when played


# --------------------------------------------------------------------------- the command and the cockpit


def test_replay_info_and_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kimitui.cli import main

    path = write_recording(tmp_path / "r.jsonl", synthetic_sweep() + [Marker(t=1_000_100.0, label="x")])
    assert main(["replay", str(path), "--info"]) == 0
    out = capsys.readouterr().out
    assert "hosts      sim" in out and "level_result     3" in out and "marker           1" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "something-else"}\n')
    assert main(["replay", str(bad)]) == 2
    assert f"{bad}: line 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", str(path), "--speed", "fast-ish"])


async def test_replay_opens_the_cockpit(tmp_path: Path) -> None:
    from kimitui.tui.app import KimituiApp

    events = sorted(busy_minute(t0=1_000_000.0 - 30, seconds=40) + synthetic_sweep(straggler_at=8), key=lambda e: e.t)
    ctl = ReplayController(write_recording(tmp_path / "c.jsonl", events), speed=None)
    app = KimituiApp(ctl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await asyncio.wait_for(ctl.replayer.wait(), 10)
        await pilot.pause(0.05)
        app.pump(force_charts=True)
        assert app.model.sweep is not None
        assert [lv.concurrency for lv in app.model.sweep.levels] == [1, 8, 32]
        assert ctl.playing and ctl.replayer.finished
        await pilot.press("q")


def test_open_at_a_time(tmp_path: Path) -> None:
    from datetime import datetime

    from kimitui.commands.replay import parse_at

    t0 = datetime(2026, 3, 4, 23, 59, 0).timestamp()  # runs past midnight
    events = spaced(5, 30.0, t0=t0)
    index = RecordingIndex.open(write_recording(tmp_path / "a.jsonl", events))
    assert parse_at("+30", index) == t0 + 30
    assert parse_at("23:59:30", index) == t0 + 30
    assert parse_at("00:01", index) == t0 + 120  # the next day
    for bad, why in (("12:00", "the recording runs"), ("+x", "takes seconds"), ("noon", "a time like")):
        with pytest.raises(ValueError, match=why):
            parse_at(bad, index)

    async def opened() -> tuple[float, list[Event]]:
        ctl = ReplayController(index, start_paused=True, start_at=t0 + 60)
        got = Collector(ctl.session)
        await ctl.start()
        pos = ctl.position
        await ctl.shutdown()
        return pos, got.events

    pos, seen = asyncio.run(opened())
    assert pos == t0 + 60 and seen == events[:3]
