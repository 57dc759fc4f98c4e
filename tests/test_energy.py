"""Energy per level (issue 34): the arithmetic against GPU samples built by hand.

Every expected figure is worked out in the comments from the samples themselves (trapezoids, clipping at
the window's edges, coverage), so a wrong rule fails with a number that can be checked on paper.
"""

from __future__ import annotations

import pytest

from kimitui.analysis.energy import (
    EnergyFolder,
    PowerTrace,
    aggregate_window,
    fold,
    idle_window,
    level_energy,
)
from kimitui.events import (
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    RequestResult,
    SweepSpec,
    SweepStarted,
)

HOST = "h"


def tick(t: float, *watts: float | None, host: str = HOST, node: str | None = None) -> GpuSample:
    return GpuSample(t=t, host=host, node=node, gpus=[GpuReading(index=i, power_w=w) for i, w in enumerate(watts)])


def trace_of(*samples: GpuSample, max_gap_s: float = 3.0) -> PowerTrace:
    trace = PowerTrace(max_gap_s)
    for s in samples:
        trace.add(s)
    return trace


def request(sent: float, e2e: float, tokens: int, *, ok: bool = True, warmup: bool = False, c: int = 2,
            sweep: str = "s1") -> RequestResult:
    return RequestResult(t=sent + e2e, host=HOST, sweep_id=sweep, request_id=f"r{sent}", concurrency=c, ok=ok,
                         warmup=warmup, intended_send=sent, sent=sent, e2e_s=e2e, completion_tokens=tokens)


def result(t: float, tokens: int, wall: float, *, c: int = 2, repeat: int = 0, steady: tuple[float, float] | None = None,
           steady_tok_s: float | None = None, sweep: str = "s1") -> LevelResult:
    return LevelResult(t=t, host=HOST, sweep_id=sweep, concurrency=c, repeat=repeat, requests=2, ok=2,
                       output_tokens=tokens, wall_s=wall, agg_tok_s=tokens / wall,
                       steady_start=steady[0] if steady else None, steady_end=steady[1] if steady else None,
                       steady_tok_s=steady_tok_s, steady_window_s=(steady[1] - steady[0]) if steady else None)


def test_a_window_integrates_each_gpu_by_trapezoids_clipped_at_its_edges() -> None:
    # GPU 0: 100 W at t=0, 200 W at t=2, 200 W at t=4; GPU 1: a flat 50 W.
    trace = trace_of(tick(0, 100, 50), tick(2, 200, 50), tick(4, 200, 50))
    w = trace.window(1.0, 3.0)
    # GPU 0 over [1, 3]: at 1 it is 150 W (half way 100 -> 200), [1, 2] = (150 + 200) / 2 = 175 J,
    # [2, 3] = 200 J: 375 J; GPU 1: 2 s x 50 W = 100 J.  475 J in 2 s: 237.5 W.
    assert w.energy_j == pytest.approx(475.0)
    assert w.mean_w == pytest.approx(237.5)
    assert w.coverage == pytest.approx(1.0)
    # peak: the largest sum at a sample instant inside the window: t=2, 200 + 50
    assert w.peak_w == pytest.approx(250.0)
    assert w.gpus == 2 and w.reason == ""


def test_a_gap_longer_than_the_limit_is_uncovered_and_below_the_coverage_the_figures_are_none() -> None:
    # GPU 1 loses telemetry between t=1 and t=9 (8 s > 3 s): over [0, 10] it covers [0, 1] and [9, 10]: 20 %
    samples = [tick(t, 100, 100 if t in (0, 1, 9, 10) else None) for t in range(11)]
    w = trace_of(*samples).window(0.0, 10.0)
    assert w.mean_w is None and w.energy_j is None and w.peak_w is None
    assert w.coverage == pytest.approx(0.2)
    assert w.reason == "GPU 1 covered 20 % of the window (need 90 %)"


def test_a_short_gap_leaves_the_mean_of_the_rest_over_the_whole_window() -> None:
    # GPU 0 flat 100 W except one lost stretch of 4 s ([3, 7] uncovered); window [0, 40]: covers 36/40 = 90 %.
    ts = [float(t) for t in range(41) if not 3 < t < 7]
    samples = [tick(t, 100.0 if t < 20 else 300.0) for t in ts]
    w = trace_of(*samples).window(0.0, 40.0)
    # covered [0,3] and [7,19] at 100 W (15 s: 1500 J), [19,20] ramps 100->300 (200 J), [20,40] 300 W (6000 J):
    # 7700 J over 36 covered s; the mean of the rest is 213.89 W, times 40 s.
    assert w.coverage == pytest.approx(0.9)
    assert w.mean_w == pytest.approx(7700 / 36)
    assert w.energy_j == pytest.approx(7700 / 36 * 40)


def test_a_gpu_that_reports_no_power_makes_the_host_figure_unknown() -> None:
    w = trace_of(tick(0, 100, None), tick(1, 100, None)).window(0.0, 1.0)
    assert w.mean_w is None
    assert w.reason == "GPU 1 reports no power draw"


def test_the_window_before_the_first_sample_is_not_invented() -> None:
    w = trace_of(tick(5, 100), tick(6, 100)).window(0.0, 6.0)
    assert w.mean_w is None and w.coverage == pytest.approx(1 / 6)


def test_gpus_of_several_nodes_are_summed_apart() -> None:
    trace = trace_of(tick(0, 100, node="a"), tick(0, 200, node="b"), tick(1, 100, node="a"), tick(1, 200, node="b"))
    w = trace.window(0.0, 1.0)
    assert w.gpus == 2 and w.mean_w == pytest.approx(300.0)


def test_out_of_order_samples_are_put_in_their_place() -> None:
    w = trace_of(tick(2, 300), tick(0, 100), tick(1, 200)).window(0.0, 2.0)
    # [0,1] = 150 J, [1,2] = 250 J
    assert w.energy_j == pytest.approx(400.0)


def test_a_levels_joules_per_token_tokens_per_kw_and_the_marginal_energy() -> None:
    # two GPUs: 100 W each idle before t=10, 400 W each from t=10 on (a step at the level's start)
    samples = [tick(t / 2, *(2 * [100.0 if t / 2 < 10 else 400.0])) for t in range(0, 61)]
    trace = trace_of(*samples)
    idle = idle_window(trace, 10.0)
    # idle: [0, 10], 10 s: 200 W except the last half second ramping to 800 W (9.5 s x 200 + 0.5 x 500 = 2150 J)
    assert idle.mean_w == pytest.approx(215.0)
    level = result(t=30.5, tokens=4000, wall=20.0, steady=(12.0, 28.0), steady_tok_s=210.0)
    figures = level_energy(level, trace, (10.5, 30.5), idle=idle)
    # the aggregate window [10.5, 30.5] is all 800 W: 16 kJ for 4000 tokens = 4 J/token, 200 tok/s / 0.8 kW
    assert figures.energy_j == pytest.approx(16000.0)
    assert figures.j_per_token == pytest.approx(4.0)
    assert figures.tokens_per_kj == pytest.approx(250.0)
    assert figures.j_per_token_steady == pytest.approx(800.0 / 210.0)
    # (800 - 215) W / 200 tok/s
    assert figures.marginal_j_per_token == pytest.approx(585.0 / 200.0)
    assert figures.peak_w == pytest.approx(800.0) and figures.mean_w == pytest.approx(800.0)


def test_idle_starts_after_the_last_request_settled_and_needs_a_few_seconds() -> None:
    trace = trace_of(*[tick(float(t), 100.0) for t in range(0, 21)])
    busy = idle_window(trace, 20.0, last_busy=17.5)
    assert busy.mean_w is None
    assert busy.reason == "only 0.5 s of idle GPU samples before the sweep (need 3 s)"
    assert idle_window(trace, 20.0, last_busy=14.0).start == pytest.approx(16.0)
    assert idle_window(trace_of(), 20.0).reason == "no GPU samples before the sweep"


def test_aggregate_window_is_first_completed_send_to_last_completed_end() -> None:
    reqs = [request(1.0, 5.0, 10), request(2.0, 9.0, 10), request(0.5, 1.0, 10, warmup=True),
            request(0.8, 30.0, 0, ok=False)]
    assert aggregate_window(reqs) == (1.0, 11.0)
    assert aggregate_window([request(0.5, 1.0, 10, ok=False)]) is None


def test_a_level_with_no_gpu_stream_says_so() -> None:
    figures = level_energy(result(t=10.0, tokens=100, wall=5.0), None, (5.0, 10.0))
    assert figures.j_per_token is None and figures.tokens_per_kj is None
    assert figures.reason == "no GPU samples from this host (a sweep with no GPUs streamed)"


def _sweep_events(*, gpus_on: bool = True) -> list:
    spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[2])
    evs: list = [tick(float(t), 100.0, 100.0) for t in range(0, 10)] if gpus_on else []
    evs.append(SweepStarted(t=10.0, host=HOST, sweep_id="s1", spec=spec))
    evs.append(LevelStarted(t=11.0, host=HOST, sweep_id="s1", concurrency=2))
    if gpus_on:
        evs += [tick(float(t), 300.0, 300.0) for t in range(10, 25)]
    evs += [request(12.0, 8.0, 1000), request(13.0, 7.0, 1000)]
    evs.append(result(t=20.5, tokens=2000, wall=8.0))
    return sorted(evs, key=lambda e: e.t)


def test_the_folder_gives_a_levels_figures_once_a_sample_past_its_window_arrived() -> None:
    folder = EnergyFolder()
    final = []
    for ev in _sweep_events():
        got = folder.add(ev)
        if got:
            final.append((ev.t, got))
    # the window [12, 20] ends at 20; the result at 20.5 found the sample at t=20 already there
    assert [t for t, _ in final] == [20.5]
    figures = final[0][1][0]
    assert figures.mean_w == pytest.approx(600.0)
    assert figures.j_per_token == pytest.approx(600.0 * 8 / 2000)
    # idle: the 10 s before the sweep's start at t=10, measured when it started: the samples of [0, 9] cover
    # 90 % of [0, 10], all at 200 W
    idle = folder.idle_of("s1")
    assert idle is not None and idle.coverage == pytest.approx(0.9)
    assert idle.mean_w == pytest.approx(200.0)
    assert figures.idle_w == pytest.approx(200.0)


def test_a_recording_folds_to_the_same_figures_as_the_live_folder() -> None:
    live = EnergyFolder()
    for ev in _sweep_events():
        live.add(ev)
    assert fold(_sweep_events()).levels == live.levels


def test_the_folder_waits_for_late_samples_then_settles_without_them() -> None:
    folder = EnergyFolder()
    evs = [ev for ev in _sweep_events() if not (isinstance(ev, GpuSample) and ev.t >= 20)]
    for ev in evs:
        assert not any(lv for lv in folder.add(ev) if ev.t < 20.5)
    assert folder.level("s1", 2) is None  # still open: a sample may come late over the link
    folder.add(tick(20.5, 300.0, 300.0))  # the link delivers it
    figures = folder.level("s1", 2)
    assert figures is not None and figures.mean_w == pytest.approx(600.0)


def test_a_sweep_without_gpu_samples_has_no_figures_and_says_why() -> None:
    folder = fold(_sweep_events(gpus_on=False))
    figures = folder.level("s1", 2)
    assert figures is not None and figures.j_per_token is None
    assert "no GPU samples" in figures.reason
    assert folder.idle_of("s1").mean_w is None


def test_the_folder_keeps_only_the_samples_it_still_needs() -> None:
    folder = EnergyFolder()
    for t in range(0, 20_000):
        folder.add(tick(t * 0.25, 100.0))
    trace = folder.trace(HOST)
    assert trace is not None
    # idle span 10 s + settle 2 s + gap 3 s at 4 Hz, plus at most one trim interval of 256 ticks
    assert len(trace._ticks) <= 15 * 4 + 256 + 1
