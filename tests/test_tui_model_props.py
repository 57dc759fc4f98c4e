"""Whatever order and content events arrive in, the fold never raises and stays bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kimitui.events import (
    ConnectionState,
    GpuReading,
    GpuSample,
    InFlight,
    LevelResult,
    LevelStarted,
    LogLine,
    ProfileState,
    RequestResult,
    ServerStats,
    Straggler,
    SweepProgress,
    SweepResult,
    SweepStarted,
)
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.spread_data import spread_points
from tests.support.fakecontrol import spec

maybe = st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False)
ids = st.sampled_from(["a", "b"])
t = st.floats(min_value=1e9, max_value=1e9 + 1000)

events = st.one_of(
    st.builds(lambda tt, u, i: GpuSample(t=tt, gpus=[GpuReading(index=i, util_pct=u)]), t, maybe,
              st.integers(0, 15)),
    st.builds(lambda tt, sev, k: LogLine(t=tt, raw="x", severity=sev, line_kind=k), t,
              st.sampled_from(["debug", "info", "warning", "error", "critical"]), st.sampled_from(["access", "eplb"])),
    st.builds(lambda r, g: ServerStats(running_reqs=r, gen_throughput=g), maybe, maybe),
    st.builds(lambda s: SweepStarted(sweep_id=s, spec=spec([1, 2])), ids),
    st.builds(lambda s, c: LevelStarted(sweep_id=s, concurrency=c), ids, st.integers(1, 4)),
    st.builds(lambda s, c, el, n: SweepProgress(sweep_id=s, concurrency=c, level_elapsed_s=el, level_tokens=n,
                                                in_flight=[InFlight(request_id="f", elapsed_s=el, tokens=n)]),
              ids, st.integers(1, 4), st.floats(0, 100), st.integers(0, 10_000)),
    st.builds(lambda s, ok, d: RequestResult(sweep_id=s, request_id="r", concurrency=1, ok=ok, intended_send=0,
                                             sent=0, decode_tok_s=d), ids, st.booleans(), maybe),
    st.builds(lambda s, a, gs: LevelResult(sweep_id=s, concurrency=1, agg_tok_s=a, stragglers=[
        Straggler(request_id="r", concurrency=1, gap_start=gs, gap_end=None if gs is None else gs + 1)]),
        ids, maybe, st.none() | t),
    st.builds(lambda s: SweepResult(sweep_id=s, outcome="stopped"), ids),
    st.builds(lambda p, s: ProfileState(profile=p, state=s), st.none() | st.sampled_from(["x", "y"]),
              st.sampled_from(["starting", "serving", "failed", "rolled_back"])),
    st.builds(lambda s: ConnectionState(state=s), st.sampled_from(["connected", "lost", "reconnecting"])),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(events, max_size=60))
def test_any_event_sequence_folds_and_stays_bounded(batch):
    m = CockpitModel(log_lines=20, raise_errors=True)  # a handler that raises fails the test, not a log line
    m.apply(batch)
    m.apply(batch)  # replayed twice: duplicates are fine too
    assert m.fold_errors == 0
    assert len(m.logs) <= 20 and len(m.log_pending) <= 20
    assert all(len(row.util_hist) <= 120 for row in m.gpus.values())
    assert not any("could not show" in e.text for e in m.logs)
    spread_points(m.sweep)
    m.imbalance()
    m.filtered_logs("warning", "-access", "x")
    for s in (m.sweep.stragglers if m.sweep else []):
        if s.gap_start is not None:
            m.history.window(s.gap_start, s.gap_end or s.gap_start)
