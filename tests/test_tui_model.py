"""The cockpit's fold of events (no terminal): GPUs, curves, spread, stragglers' windows, logs."""

from __future__ import annotations

from kimitui.analysis.window import EventHistory
from kimitui.events import GpuReading, GpuSample, InFlight, LogLine, ProfileSwitch, SweepProgress
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.spread_data import spread_points
from tests.support.fakecontrol import T0, caps, gpu_sample, story_events, straggler


def story_model() -> CockpitModel:
    m = CockpitModel()
    m.apply(story_events())
    return m


def test_story_folds_into_header_gpus_and_curves():
    m = story_model()
    assert (m.profile, m.profile_state, m.baseline, m.connection) == ("ep8-eplb", "serving", "ep8-tuned", "connected")
    assert sorted(m.gpus) == list(range(8))
    assert m.gpus[3].rank == "TP3_EP3"
    assert len(m.gpus[0].util_hist) == 50
    # both profiles' curves are kept: the earlier run stays overlaid
    assert list(m.curves) == ["ep8-tuned", "ep8-eplb"]
    assert m.curves["ep8-tuned"][256].agg_tok_s == 1538.0
    assert sorted(m.curves["ep8-eplb"]) == [1, 8, 32]
    assert m.sweep is not None and m.sweep.concurrency == 64
    assert m.sweep.live_point == (64, 900.0)
    assert [s.request_id for s in m.sweep.stragglers] == ["s2-c1-r4"]


def test_unsupported_fields_are_hidden_not_zero():
    m = CockpitModel()
    m.apply([caps(supported=["util_pct", "mem_used_mib"]), gpu_sample(T0, 50.0)])
    row = m.gpus[0]
    assert row.supports("util_pct") and not row.supports("power_w") and not row.supports("pcie_tx_kbps")
    m2 = CockpitModel()  # no caps: a None reading is unsupported, a value is shown
    m2.apply([GpuSample(t=T0, gpus=[GpuReading(index=0, util_pct=10.0, temp_c=None)])])
    assert m2.gpus[0].supports("util_pct") and not m2.gpus[0].supports("temp_c")


def test_imbalance_names_lowest_and_highest_gpu():
    m = CockpitModel()
    m.apply([GpuSample(t=T0, gpus=[GpuReading(index=i, util_pct=u) for i, u in enumerate([90, 95, 60, 91])])])
    imb = m.imbalance()
    assert imb is not None and (imb.low_index, imb.high_index, imb.spread) == (2, 1, 35)


def test_rerunning_a_profile_replaces_only_its_curve():
    m = story_model()
    from kimitui.events import SweepStarted
    from tests.support.fakecontrol import spec
    m.apply([SweepStarted(t=T0 + 500, sweep_id="s3", spec=spec(), profile="ep8-tuned")])
    assert m.curves["ep8-tuned"] == {} and sorted(m.curves["ep8-eplb"]) == [1, 8, 32]


def test_spread_marks_slow_requests_and_in_flight_ones_move():
    m = story_model()
    pts = spread_points(m.sweep)
    done = [p for p in pts if p.done]
    assert len(done) == 12 and len([p for p in pts if not p.done]) == 52
    slow = {p.request_id for p in pts if p.slow}
    assert slow == {"s2-c64-r5"}  # 3.1 tok/s against a median near 11
    before = {p.request_id: p.x_s for p in pts if not p.done}
    m.apply([SweepProgress(t=T0 + 97, sweep_id="s2", concurrency=64, level_tokens=6000, level_elapsed_s=7.0,
                           in_flight=[InFlight(request_id="s2-c64-f0", elapsed_s=2.5, tokens=30, tok_s=12.0)])])
    after = {p.request_id: p.x_s for p in spread_points(m.sweep) if not p.done}
    assert after == {"s2-c64-f0": 2.5} and before["s2-c64-f0"] < 2.5


def test_straggler_window_shows_gap_gpus_and_log_lines():
    m = story_model()
    s = straggler()
    assert s.gap_start is not None and s.gap_end is not None
    view = m.history.window(s.gap_start, s.gap_end)
    raws = [line.raw for line in view.log_lines]
    assert any("rebalance start" in r for r in raws) and any("rebalance end" in r for r in raws)
    assert not any("NCCL" in r for r in raws)  # outside the gap
    hot = view.hottest_gpu
    assert hot is not None and hot.index == 3 and hot.temp_max == 84.0
    g0 = view.gpus[0]
    assert g0.util_before is not None and g0.util_mean is not None and g0.util_mean < g0.util_before - 20
    assert g0.pcie_peak_kbps is not None and g0.pcie_peak_kbps > 40_000


def test_history_is_bounded_and_handles_out_of_order_events():
    h = EventHistory(max_gpu_samples=10, max_log_lines=5)
    for i in range(100):
        h.add(LogLine(t=T0 + i, raw=f"l{i}"))
    assert len(h) == 5
    h.add(LogLine(t=T0 + 50.5, raw="late"))  # arrives after newer lines
    assert [x.raw for x in h.window(T0 + 50, T0 + 51, pad_s=0).log_lines] == ["late"]


def test_log_filters_by_severity_kind_and_search():
    m = story_model()
    errors = m.filtered_logs("error")
    assert [e.text for e in errors] == ["[2025-11-30 10:21:30 TP3] ERROR watchdog: NCCL timeout suspected"]
    assert {e.kind for e in m.filtered_logs(kind="eplb")} == {"eplb"}
    assert len(m.filtered_logs(search="REBALANCE")) == 2
    assert m.log_pending and len(m.logs) == len(m.log_pending)


def test_a_broken_event_is_logged_not_raised():
    m = CockpitModel()
    bad = SweepProgress(sweep_id="x", concurrency=1)
    m.sweep = object()  # type: ignore[assignment]  # a corrupt state must not take the screen down
    dirty = m.apply([bad])
    assert "log" in dirty and "could not show sweep_progress" in m.logs[-1].text
    assert m.fold_errors == 1


def test_access_lines_can_be_hidden_and_one_kind_shown_alone():
    m = CockpitModel()
    m.apply([LogLine(t=T0, raw='127.0.0.1 - "GET /metrics HTTP/1.1" 200', line_kind="access"),
             LogLine(t=T0, raw="Decode batch", line_kind="decode")])
    assert [e.kind for e in m.filtered_logs(kind="-access")] == ["decode"]
    assert [e.kind for e in m.filtered_logs(kind="access")] == ["access"]
    assert len(m.filtered_logs()) == 2


def test_a_swap_notice_says_the_recorded_total_not_the_sum_of_every_phase_and_the_total():
    phases = {"stop": 2.0, "start": 1.1, "weights": 30.0, "cuda_graph": 8.0, "health": 3.0, "warmup": 1.0, "total": 45.1}
    m = CockpitModel()
    m.apply([ProfileSwitch(t=T0, host="sim", from_profile="ep8", to_profile="ep8-tuned", outcome="ok", phases=phases)])
    assert m.take_notices()[-1].message == "swapped ep8 -> ep8-tuned in 45.1 s"
    old = {k: v for k, v in phases.items() if k != "total"}  # a recording from before the total was kept
    m.apply([ProfileSwitch(t=T0, host="sim", from_profile="ep8-tuned", to_profile="ep8", outcome="ok", phases=old)])
    assert m.take_notices()[-1].message == "swapped ep8-tuned -> ep8 in 45.1 s"
