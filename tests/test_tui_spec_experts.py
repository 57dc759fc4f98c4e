"""Issue 17 in the cockpit: speculative decoding per level (accept length, speed-up over the baseline, the
collapse notice live and at the level's end), EPLB rebalances per level and on the curve, the expert
heatmap on ``h``, the GPU panel's expert-balance gauge, the sweep form's capability line; all rebuilt
from recorded events after a replay seek.  Synthetic events drive the real model and widgets; the
log lines go through the real parser (``kimitui.sglang.log``)."""

from __future__ import annotations

import pytest

from kimitui.analysis.eplb import RebalanceTracker, level_rebalances, next_rebalance_in, rebalance_period, rebalances_in
from kimitui.events import (
    Baseline, Event, ExpertLoad, LevelResult, LevelStarted, LogLine, Percentiles, ReplayState, ServerInfo,
    ServerStats, SweepResult, SweepStarted,
)
from kimitui.sglang.log import parse_line, to_event, to_stats
from kimitui.tui.app import KimituiApp
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.curve_series import curve_figure
from kimitui.tui.renderables.curve_legend import EPLB_MARK, fit_legend, legend_items
from kimitui.tui.model.gpu_summary import figure_pieces
from kimitui.tui.model.heatmap_data import HeatWindows, bands, expert_parallel, shade, why_no_heatmap
from kimitui.tui.screens.expert_heatmap import ExpertHeatmap
from kimitui.tui.screens.sweep_form import SweepForm
from kimitui.tui.widgets.level_table import LevelExtras, LevelTable
from tests.support.fakecontrol import T0, FakeController, caps, gpu_sample, level, spec
from tests.support.tuiscreen import screen_text, settle, tick

SIZE = (120, 40)
EP_ARGS = {"ep_size": 8, "tp_size": 8, "enable_eplb": True, "eplb_rebalance_num_iterations": 1000,
           "expert_balancedness_report_mode": "both", "enable_metrics": True}
"""``/server_info`` of ep8-eplb, with SGLang 0.5.23's names (arg_groups/fields/parallel.py, exec_.py)."""


def eplb_line(t: float, text: str, rank: int = 0) -> LogLine:
    """A rank's copy of an ``[EPLBManager]`` line through the real parser."""
    return to_event(f"[2026-12-05 10:00:00 TP{rank} EP{rank}] [EPLBManager] {text}", host="sim", source="test", t=t)


def decode_stats(t: float, accept_len: float) -> ServerStats:
    """The scheduler's Decode line with its spec part, as the log follower turns it into figures."""
    line = (f"[2026-12-05 10:00:00 TP0 EP0] Decode batch, #running-req: 64, #token: 9000, token usage: 0.40, "
            f"accept len: {accept_len:.2f}, accept rate: 0.30, cuda graph: True, gen throughput (token/s): "
            f"1620.33, #queue-req: 0")
    stats = to_stats(parse_line(line), host="sim", t=t)
    assert stats is not None and stats.source == "log"
    return stats


def spec_level(sweep_id: str, c: int, agg: float, t: float, acc: float | None, decode_p50: float) -> LevelResult:
    lv = level(sweep_id, c, agg, agg * 1.02, t)
    update: dict[str, object] = {"decode_tok_s": Percentiles(p50=decode_p50, p99=decode_p50 * 1.2)}
    if acc is not None:
        update |= {"spec_accept_len": Percentiles(p50=acc, mean=acc, p99=acc), "spec_accept_len_level": acc,
                   "spec_requests": lv.requests}
    return lv.model_copy(update=update)


def baseline_then_drafter() -> list[Event]:
    """ep8-tuned swept and marked the baseline; ep8-dflash swept: 5.6 at C=1, 1.9 at C=128 (collapsed)."""
    return [
        SweepStarted(t=T0, sweep_id="base", spec=spec([1, 8, 128]), profile="ep8-tuned"),
        spec_level("base", 1, 65.0, T0 + 5, None, 65.0),
        spec_level("base", 8, 420.0, T0 + 10, None, 52.0),
        spec_level("base", 128, 1490.0, T0 + 15, None, 11.6),
        SweepResult(t=T0 + 16, sweep_id="base", levels=[1, 8, 128]),
        Baseline(t=T0 + 17, profile="ep8-tuned"),
        SweepStarted(t=T0 + 20, sweep_id="spec", spec=spec([1, 8, 128]), profile="ep8-dflash"),
        LevelStarted(t=T0 + 20, sweep_id="spec", concurrency=1),
        spec_level("spec", 1, 120.0, T0 + 25, 5.6, 119.6),
        LevelStarted(t=T0 + 25, sweep_id="spec", concurrency=8),
        spec_level("spec", 8, 700.0, T0 + 30, 4.8, 87.0),
        LevelStarted(t=T0 + 30, sweep_id="spec", concurrency=128),
    ]


def _collapse_notices(model: CockpitModel) -> list[str]:
    return [n.message for n in model.notices if "speculation collapsed" in n.message]


# --------------------------------------------------------------------------- analysis/eplb


def test_rebalances_fold_rank_copies_skips_and_a_missing_start():
    """0.5.23 eplb/eplb_manager.py EPLBManager.rebalance logs '[EPLBManager] rebalance start' and
    'rebalance end time=X.XXXs' on every rank; _check_rebalance_needed logs 'Skipped ep rebalancing:
    current GPU utilization X > minimum rebalance threshold Y' after the start, with no end."""
    tr = RebalanceTracker()
    lines = [*(eplb_line(100.0 + r * 0.01, "rebalance start", r) for r in range(8)),
             *(eplb_line(109.3 + r * 0.01, "rebalance end time=9.310s", r) for r in range(8)),
             *(eplb_line(200.0 + r * 0.01, "rebalance start", r) for r in range(8)),
             *(eplb_line(200.1 + r * 0.01, "Skipped ep rebalancing: current GPU utilization 0.93 > minimum "
                                         "rebalance threshold 0.90", r) for r in range(8)),
             eplb_line(330.0, "rebalance end time=4.000s")]  # its start was before the log follower came
    for line in lines:
        tr.feed(line)
    done, skip, late = tr.records
    assert (done.start, done.end, done.duration_s, done.skipped) == (100.0, 109.3, 9.31, False)
    assert skip.skipped and (skip.utilization, skip.threshold) == (0.93, 0.90) and skip.start == 200.0
    assert late.start == pytest.approx(326.0) and late.duration_s == 4.0
    assert rebalances_in(tr.records, 90.0, 250.0) == [done]  # a skip stalls nothing
    assert level_rebalances(tr.records, 0.0, 400.0).text == "≡2 13s"
    assert level_rebalances(tr.records, 0.0, 50.0).text == ""
    assert rebalance_period(tr.records) == pytest.approx(126.0)
    assert next_rebalance_in(tr.records, 400.0) == pytest.approx(52.0)
    assert rebalance_period(tr.records[:1]) is None and next_rebalance_in([], 1.0) is None


def test_level_rebalances_text_over_ten_seconds():
    tr = RebalanceTracker()
    for t, text in ((10.0, "rebalance start"), (30.5, "rebalance end time=20.500s"), (40.0, "rebalance start"),
                    (60.6, "rebalance end time=20.600s")):
        tr.feed(eplb_line(t, text))
    assert level_rebalances(tr.records, 0.0, 100.0).text == "≡2 41s"


# --------------------------------------------------------------------------- speculative figures and the collapse


def test_level_table_cells_accept_length_speedup_and_collapse():
    """The level's accept length (analysis.spec.level_accept_len), B's per-user decode over the baseline
    profile's last sweep at the same C (format_speedup), the collapsed level marked."""
    model = CockpitModel(raise_errors=True)
    model.apply([*baseline_then_drafter(), spec_level("spec", 128, 1600.0, T0 + 40, 1.9, 12.5),
                 SweepResult(t=T0 + 41, sweep_id="spec", levels=[1, 8, 128])])
    extras = LevelExtras(model)
    assert extras.spec and not extras.eplb
    assert str(extras.cells["1"]["acc len"]) == "5.60" and extras.cells["1"]["×base"] == "×1.84"
    assert extras.cells["8"]["×base"] == "×1.67"
    collapsed = extras.cells["128"]["acc len"]
    assert str(collapsed) == "1.90 ▼" and "yellow" in str(getattr(collapsed, "style", ""))
    said = _collapse_notices(model)
    assert said == [f"speculation collapsed at C=128: accept length 1.90 vs 5.60 at C=1 ({0.9 / 4.6:.0%} of its gain kept)"]
    assert model.errors == 0 and all(n.severity == "warning" for n in model.notices if n.message in said)


def test_the_collapse_is_said_live_from_the_decode_line_once_per_level():
    """The Decode line's accept len (0.5.23 managers/scheduler_components/metrics_reporter.py
    MetricsReporter.log_decode_stats) while C=128 runs: said before the level's result, and only once."""
    model = CockpitModel(raise_errors=True)
    model.apply(baseline_then_drafter())
    model.apply([decode_stats(T0 + 31 + k, 5.5 if k < 2 else 1.8) for k in range(8)])  # the batch still filling
    live = _collapse_notices(model)
    assert len(live) == 1 and live[0].startswith("speculation collapsed at C=128: accept length 1.80 vs 5.60 at C=1")
    assert "(live, from the scheduler's log)" in live[0]
    assert str(LevelExtras(model).cells["128"]["acc len"]) == "1.80…"
    model.apply([decode_stats(T0 + 39, 1.7), spec_level("spec", 128, 1600.0, T0 + 40, 1.9, 12.5)])
    assert len(_collapse_notices(model)) == 1, "said once per level, live or at its result"
    assert any("speculation collapsed at C=128" in e.text and e.severity == "warning" for e in model.logs)


def test_no_collapse_while_acceptance_holds_or_without_a_reference():
    model = CockpitModel(raise_errors=True)
    model.apply(baseline_then_drafter())
    model.apply([decode_stats(T0 + 31 + k, 4.9) for k in range(8)])
    assert _collapse_notices(model) == []
    lone = CockpitModel(raise_errors=True)  # no level with figures finished yet: nothing to judge against
    lone.apply([SweepStarted(t=T0, sweep_id="x", spec=spec([64]), profile="ep8-dflash"),
                LevelStarted(t=T0, sweep_id="x", concurrency=64),
                *(decode_stats(T0 + 1 + k, 1.1) for k in range(8))])
    assert _collapse_notices(lone) == []


def test_a_replay_seek_rebuilds_the_same_figures_and_says_the_collapse_again():
    events = [*baseline_then_drafter(), *(decode_stats(T0 + 31 + k, 1.8) for k in range(6)),
              spec_level("spec", 128, 1600.0, T0 + 40, 1.9, 12.5)]
    model = CockpitModel(raise_errors=True)
    model.apply(events)
    before = {c: {k: str(v) for k, v in cells.items()} for c, cells in LevelExtras(model).cells.items()}
    model.apply([ReplayState(t=T0 + 50, position=T0, start=T0, end=T0 + 50, reset=True)])
    assert model.sweep is None and LevelExtras(model).cells == {}
    model.apply(events)
    assert {c: {k: str(v) for k, v in cells.items()} for c, cells in LevelExtras(model).cells.items()} == before
    assert len(_collapse_notices(model)) == 1, "said again after the seek (a replay says it too), once"


# --------------------------------------------------------------------------- EPLB per level, on the curve


def eplb_sweep() -> list[Event]:
    """ep8-eplb swept at C=1, 8: one rebalance (every rank's copy) during C=1, a skip during C=8."""
    return [
        ServerInfo(t=T0, url="http://127.0.0.1:30000", args=EP_ARGS),
        SweepStarted(t=T0 + 1, sweep_id="e", spec=spec([1, 8]), profile="ep8-eplb"),
        LevelStarted(t=T0 + 1, sweep_id="e", concurrency=1),
        *(eplb_line(T0 + 5 + r * 0.01, "rebalance start", r) for r in range(8)),
        *(eplb_line(T0 + 14.3 + r * 0.01, "rebalance end time=9.310s", r) for r in range(8)),
        level("e", 1, 38.4, 62.1, T0 + 20),
        LevelStarted(t=T0 + 20, sweep_id="e", concurrency=8),
        eplb_line(T0 + 30, "rebalance start"),
        eplb_line(T0 + 30.1, "Skipped ep rebalancing: current GPU utilization 0.93 > minimum rebalance threshold 0.90"),
        level("e", 8, 300.0, 352.0, T0 + 40),
        SweepResult(t=T0 + 41, sweep_id="e", levels=[1, 8]),
    ]


def test_rebalances_are_counted_per_level_and_marked_on_the_curve():
    model = CockpitModel(raise_errors=True)
    model.apply(eplb_sweep())
    extras = LevelExtras(model)
    assert extras.eplb and str(extras.cells["1"]["EPLB"]) == "≡1 9.3s" and "EPLB" not in extras.cells["8"]
    fig = curve_figure(model)
    assert fig.eplb == [(1, 38.4)]
    assert f"{EPLB_MARK} rebalance" in fit_legend(legend_items(fig), 200)
    assert [m.kind for m in model.timeline.marks].count("eplb") == 2  # the rebalance's span and the skip


async def test_the_level_table_shows_the_extra_columns_only_when_there_are_figures():
    ctrl = FakeController(initial=[caps(T0), gpu_sample(T0, 80.0), *eplb_sweep()])
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        labels = [str(c.label) for c in app.query_one(LevelTable).columns.values()]
        assert labels[:5] == ["C", "status", "agg", "steady", "EPLB"] and "acc len" not in labels
        assert "≡1 9.3s" in screen_text(app)
    plain = KimituiApp(FakeController(initial=[caps(T0), *baseline_then_drafter()[:6]]), tick=None)
    async with plain.run_test(size=SIZE) as pilot:
        await settle(plain, pilot)
        labels = [str(c.label) for c in plain.query_one(LevelTable).columns.values()]
        assert "acc len" not in labels and "EPLB" not in labels


# --------------------------------------------------------------------------- expert balance and the heatmap


def loads(t: float, layers: int = 61, hot: int = 3, skew: float = 1.6) -> ExpertLoad:
    """A heatmap window: layers 0-2 dense (no routed experts), the rest with GPU ``hot`` over its share."""
    counts = [[0.0] * 8 if layer < 3 else [100.0 * (skew if g == hot else 1.0) for g in range(8)]
              for layer in range(layers)]
    return ExpertLoad(t=t, layers=list(range(layers)), counts=counts, balancedness=round(8 / (7 + skew) / skew, 3))


def test_heatmap_bands_fit_the_rows_and_sum_recent_windows():
    heat = HeatWindows()
    heat.add(loads(T0, skew=3.0))
    heat.add(loads(T0 + 10))  # the first is more than WINDOW_S older: left out
    heat.add(loads(T0 + 11))
    summed = heat.summed()
    assert summed[5][3] == pytest.approx(320.0) and summed[5][0] == pytest.approx(200.0)
    found = bands(summed, 16)
    assert len(found) == 15 and found[0].label == "L3–6" and found[-1].label == "L59–60"  # 58 MoE layers, 4 a row
    assert found[0].ratios[3] == pytest.approx(1.6 / (8.6 / 8)) and found[0].balance == pytest.approx(8.6 / 8 / 1.6)
    assert [shade(r)[1] for r in (0.5, 1.0, 1.2, 1.5)] == ["blue", "green", "yellow", "bold red"]


def test_why_no_heatmap_names_what_to_set():
    """0.5.23 eplb/expert_distribution.py _handle_metric_eplb_heatmap: only with the balancedness report on
    (runtime_context.py reports_expert_balancedness) and SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL > 0."""
    assert "not read yet" in why_no_heatmap(None, False)
    assert "no expert parallelism (ep_size 1" in why_no_heatmap({"ep_size": 1, "enable_eplb": False}, False)
    off = why_no_heatmap({"ep_size": 8, "expert_balancedness_report_mode": "off"}, False)
    assert "expert_balancedness_report_mode is off" in off and 'expert_balancedness_report_mode = "both"' in off
    env = why_no_heatmap(EP_ARGS, True)
    assert "SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL > 0" in env and "balance below comes from its report" in env
    assert expert_parallel(EP_ARGS) and expert_parallel({"ep_size": 1, "enable_eplb": True})
    assert not expert_parallel({"ep_size": 1}) and not expert_parallel(None)


def test_gauge_prefers_expert_balance_and_says_so():
    model = CockpitModel(raise_errors=True)
    model.apply([caps(T0), gpu_sample(T0, 80.0)])
    rows = list(model.gpus.values())
    assert any("spread" in text for text, _ in figure_pieces(rows, model.imbalance(), balance=model.balance))
    line = "[2026-12-05 10:00:00] [Expert Balancedness] forward_pass_id=1200 current_pass_balancedness=0.812 " \
           "last_10_average_balancedness=0.790 last_100_average_balancedness=0.800  gpu_physical_count_sum=98304"
    stats = to_stats(parse_line(line), host="sim", t=T0 + 1)
    assert stats is not None
    model.apply([stats])
    assert (model.balance, model.balance_source) == (0.812, "log")
    pieces = figure_pieces(rows, model.imbalance(), balance=model.balance)
    assert ("expert balance 0.81", "warn") in pieces and not any("spread" in text for text, _ in pieces)


async def test_h_opens_the_heatmap_which_follows_the_model_live():
    ctrl = FakeController(initial=[caps(T0), gpu_sample(T0, 80.0), ServerInfo(t=T0, url="http://x", args=EP_ARGS),
                                   *eplb_sweep()[1:]])
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "experts" in screen_text(app), "the footer offers h where the server has expert parallelism"
        await pilot.press("h")
        await tick(pilot)
        assert isinstance(app.screen, ExpertHeatmap)
        text = screen_text(app)
        assert "SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL > 0" in text and "EPLB rebalances: 1" in text
        assert "1 skipped" in text and "every 1000 forward passes" in text
        ctrl.session.publish(loads(T0 + 42))
        await pilot.pause(0.7)  # the screen refreshes twice a second
        app.pump()
        await pilot.pause(0.7)
        text = screen_text(app)
        assert "GPU0" in text and "GPU7" in text and "L3–5" in text and "58 MoE layers in 20 rows" in text
        assert "busiest GPU3" in text and "balance now" in text
        await pilot.press("escape")
        await tick(pilot)
        assert not isinstance(app.screen, ExpertHeatmap)


async def test_the_footer_shows_h_only_where_experts_are_spread_but_the_key_works_everywhere():
    ctrl = FakeController(initial=[caps(T0), gpu_sample(T0, 80.0),
                                   ServerInfo(t=T0, url="http://x", args={"ep_size": 1, "tp_size": 8})])
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        footer = {b.binding.description for b in app.screen.active_bindings.values() if b.binding.show}
        assert "experts" not in footer
        helps = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert helps["Experts: heatmap of layers x GPUs, balance, EPLB rebalances"].startswith("key h")
        await pilot.press("h")
        await tick(pilot)
        assert isinstance(app.screen, ExpertHeatmap) and "no expert parallelism" in screen_text(app)
        await pilot.press("escape")
        ctrl.session.publish(ServerInfo(t=T0 + 5, url="http://x", args=EP_ARGS))
        await settle(app, pilot)
        footer = {b.binding.description for b in app.screen.active_bindings.values() if b.binding.show}
        assert "experts" in footer
        await pilot.press("question_mark")
        await tick(pilot)
        assert [k for k, what in app.screen.keys if what.startswith("experts")] == ["h"]  # once in help


async def test_the_sweep_form_says_what_the_server_takes():
    args = {**EP_ARGS, "speculative_algorithm": "DFLASH", "tokenizer_metrics_allowed_custom_labels":
            ["kimitui_sweep", "kimitui_level", "other"]}
    ctrl = FakeController(initial=[caps(T0), ServerInfo(t=T0, url="http://x", args=args)])
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await tick(pilot)
        assert isinstance(app.screen, SweepForm)
        text = screen_text(app)
        assert "kimitui_sweep, kimitui_level via x-custom-labels" in text and "DFLASH" in text


def test_a_level_without_its_start_is_not_charged_with_the_previous_levels_rebalance():
    """Levels run one after another: without a LevelStarted, a level's window starts no earlier than the
    previous level's result (its wall time alone would reach back into the level before)."""
    events = [e for e in eplb_sweep() if not (isinstance(e, LevelStarted) and e.concurrency == 8)]
    events = [e.model_copy(update={"wall_s": 39.0}) if isinstance(e, LevelResult) and e.concurrency == 8 else e
              for e in events]
    model = CockpitModel(raise_errors=True)
    model.apply(events)
    assert set(LevelExtras(model).cells["1"]) == {"EPLB"} and "EPLB" not in LevelExtras(model).cells["8"]
    assert curve_figure(model).eplb == [(1, 38.4)]


async def test_a_remap_of_experts_moves_both_copies_of_the_key():
    ctrl = FakeController(initial=[caps(T0), ServerInfo(t=T0, url="http://x", args=EP_ARGS)])
    app = KimituiApp(ctrl, tick=None, config_keys={"experts": "x"})
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        shown = {b.binding.description: k for k, b in app.screen.active_bindings.items() if b.binding.show}
        assert shown.get("experts") == "x" and "h" not in app.screen.active_bindings
        await pilot.press("x")
        await tick(pilot)
        assert isinstance(app.screen, ExpertHeatmap)
