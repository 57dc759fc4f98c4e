"""Issue 30: the cockpit grew ~7 MB a minute over back-to-back sweeps with ``decode_log_interval = 1``.

Each test feeds what an hour of that would bring (fast, no terminal where none is needed) and asserts
that what the cockpit keeps stays within its documented bound; ``bench/bench_cockpit_soak.py`` is the
hour-long figure.
"""

from __future__ import annotations

from kimitui.events import (
    LevelResult,
    LevelStarted,
    ProfileSwitch,
    RequestResult,
    ServerInfo,
    Straggler,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.report.sweep_summary import sweeps_of
from kimitui.tui.model.compare_book import COMPARE_SWEEPS, DETAIL_SWEEPS
from kimitui.tui.model.cockpit_state import CockpitModel

SPEC = SweepSpec(url="http://127.0.0.1:30000", model="m", levels=[1, 8])
ARGS = {f"arg_{k:03d}": k for k in range(120)}


def sweep(m: CockpitModel, k: int, t: float, profile: str) -> float:
    """One 12 s sweep of two levels on ``profile``, with the /server_info polls (every 10 s) around it."""
    sid = f"s{k:04d}"
    m.apply([ServerInfo(t=t, url="http://127.0.0.1:30000", version="0.5.23", args={**ARGS, "profile": profile}),
             SweepStarted(t=t, sweep_id=sid, spec=SPEC, profile=profile)])
    for c in (1, 8):
        t += 6
        m.apply([LevelStarted(t=t - 6, sweep_id=sid, concurrency=c),
                 *[RequestResult(t=t, sweep_id=sid, request_id=f"{sid}-c{c}-r{i}", concurrency=c, ok=True,
                                 intended_send=t - 5, sent=t - 5, e2e_s=5.0, completion_tokens=64,
                                 decode_tok_s=13.0) for i in range(2 * c)],
                 ServerInfo(t=t, url="http://127.0.0.1:30000", version="0.5.23", args={**ARGS, "profile": profile}),
                 LevelResult(t=t, sweep_id=sid, concurrency=c, requests=2 * c, ok=2 * c, agg_tok_s=13.0 * c,
                             stragglers=[Straggler(request_id=f"{sid}-c{c}-r0", concurrency=c)])])
    m.apply([SweepResult(t=t + 0.1, sweep_id=sid, levels=[1, 8], peak_tok_s=104.0)])
    return t + 0.5


def test_the_compare_view_keeps_recent_sweeps_and_each_profiles_last_not_the_whole_session():
    """An hour of back-to-back sweeps (300) with /server_info every 10 s: the compare view's events grew
    with each (about 30 KB a sweep, 20,000 events before its cap: hours of growth).  Now the last
    ``COMPARE_SWEEPS`` sweeps, each profile's last besides, and one server_info per sweep kept."""
    m = CockpitModel()
    t = 1_000.0
    t = sweep(m, 0, t, "baseline-profile")  # swept once, long ago: the compare view's A stays available
    m.apply([ProfileSwitch(t=t, from_profile="baseline-profile", to_profile="ep8", outcome="ok")])
    for k in range(1, 300):
        t = sweep(m, k, t, ("ep8", "ep8-eplb")[k % 2])
    assert m.compare_sweeps <= COMPARE_SWEEPS + 3  # the recent ones and the three profiles' last
    events = m.sweep_events
    starts = [e.sweep_id for e in events if isinstance(e, SweepStarted)]
    assert starts[0] == "s0000" and starts[-1] == "s0299"  # the baseline's one sweep, then the recent ones in order
    assert starts[1:] == [f"s{k:04d}" for k in range(300 - len(starts) + 1, 300)]
    assert sum(isinstance(e, ServerInfo) for e in events) <= len(starts)  # not one per 10 s poll
    assert sum(isinstance(e, LevelResult) for e in events) == 2 * len(starts)
    assert {e.sweep_id for e in events if isinstance(e, RequestResult)} == {
        f"s{k:04d}" for k in range(300 - DETAIL_SWEEPS, 300)}
    assert len(m.sweep_state.client_said) <= m.compare_sweeps * 2

    runs = sweeps_of(events, "this session")  # what the compare view reads: still every kept sweep, whole
    by_id = {r.sweep_id: r for r in runs}
    assert by_id["s0000"].profile == "baseline-profile" and by_id["s0000"].knobs.get("arg_007") == 7
    assert by_id["s0299"].switch is not None and by_id["s0299"].switch.to_profile == "ep8"
    assert sorted(by_id["s0299"].levels) == [1, 8] and by_id["s0299"].outcome == "completed"


def test_a_failed_switch_after_the_last_server_info_still_hides_it_from_the_next_sweep():
    """``sweeps_of`` drops a host's server_info when a switch after it failed: the kept context keeps
    their order, so a sweep after the failed switch reads no stale knobs."""
    m = CockpitModel()
    m.apply([ServerInfo(t=1.0, args=dict(ARGS)),
             ProfileSwitch(t=2.0, from_profile="a", to_profile="b", outcome="rolled_back", reason="oom"),
             SweepStarted(t=3.0, sweep_id="x", spec=SPEC, profile="a")])
    (run,) = sweeps_of(m.sweep_events)
    assert not run.knobs and run.switch is not None and run.switch.outcome == "rolled_back"
    m.apply([ServerInfo(t=4.0, args=dict(ARGS)), SweepStarted(t=5.0, sweep_id="y", spec=SPEC, profile="a")])
    runs = {r.sweep_id: r for r in sweeps_of(m.sweep_events)}
    assert runs["y"].knobs.get("arg_001") == 1 and not runs["x"].knobs


async def test_the_footer_holds_only_the_keys_it_shows_after_many_sweeps_start_and_end():
    """Each sweep's start and end re-checks which keys can fire; Textual's Footer then rebuilds its keys and
    kept every old one through a watcher on itself (~40 a rebuild: the issue's ~7 MB a minute)."""
    import gc

    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    from kimitui.tui.app import KimituiApp
    from tests.support.fakecontrol import FakeController
    from tests.support.tuiscreen import tick

    ctrl = FakeController()
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await tick(pilot)
        footer = app.query_one(Footer)
        rebuilds = 0
        for k in range(60):  # 30 sweeps' starts and ends, as the pump sees the controller busy or not
            ctrl._busy = "sweep" if k % 2 == 0 else None
            app.pump()
            await tick(pilot)
            rebuilds += 1
        for _ in range(100):  # the last rebuild may still be in flight on a busy machine: let it finish
            shown = len(footer.query(FooterKey))
            watchers = getattr(footer, "__watchers", {}).get("compact", [])
            if len(watchers) <= shown:
                break
            await tick(pilot)
        assert shown > 5
        assert len(watchers) <= shown, f"{len(watchers)} watchers for {shown} keys after {rebuilds} rebuilds"
        gc.collect()
        alive = sum(isinstance(o, FooterKey) for o in gc.get_objects())
        assert alive <= 2 * shown, f"{alive} FooterKeys alive, {shown} on screen"
