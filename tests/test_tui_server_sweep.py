"""Issue 15's server-panel, sweep-ETA, quick-preset and time-scale defects, each with the test that failed before.

* the server panel ran labels and values together ("gen tok/s66") and showed "tokens 0.05";
* sweeps had no ETA and no request counts; the form had no quick preset and no estimate;
* the simulated host's time scale was never on screen, nor in the README.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.containers import Container
from textual.widget import Widget
from textual.widgets import Input, Select, Static

from kimitui.analysis.sweep_eta import (SEED_EXPONENT, START_S, RateModel, duration, eta_text, level_requests,
                                        running_level, spec_seconds, summary, sweep_eta)
from kimitui.events import (ConnectionState, LevelResult, LevelStarted, LogLine, ProfileState, ServerHealth,
                            ServerInfo, ServerStats, SwapProgress, SweepProgress, SweepSpec, SweepStarted)
from kimitui.tui.app import KimituiApp
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.screens.sweep_form import SweepForm
from kimitui.tui.widgets.header_bar import HeaderBar, RecordingStatus
from kimitui.tui.widgets.level_table import LevelTable
from kimitui.tui.widgets.server_panel import ServerPanel
from tests.support.fakecontrol import T0, FakeController, StoryController, caps, gpu_sample
from tests.support.tuiscreen import screen_text, settle, tick

ROOT = Path(__file__).resolve().parent.parent
SPARK = set("▁▂▃▄▅▆▇█")
LABEL_COLS = 11 + 6 + 6


def quick_spec(**kw: object) -> SweepSpec:
    return SweepSpec.model_validate({"url": "http://127.0.0.1:30000", "model": "kimi-k2.6", "levels": [1, 8, 64],
                                     "mode": "sustained", "max_tokens": 128, **kw})


def server_lines(app: App[None]) -> list[str]:
    return app.query_one(ServerPanel).render().plain.splitlines()


def story_model(*extra: object) -> CockpitModel:
    """The fixed story folded (C=64 running; 50 Decode-line stats: 60 -> 1040 tok/s, KV 12 -> 22 %)."""
    m = CockpitModel(raise_errors=True)
    ctrl = StoryController()
    m.apply([*ctrl.initial, *extra])  # type: ignore[list-item]  # events
    return m


class OneWidget(App[None]):
    """One cockpit widget in a box of a given size, whatever the cockpit's layout gives it today."""

    def __init__(self, widget: Widget, width: int, height: int) -> None:
        super().__init__()
        self.widget, self.box = widget, (width, height)

    def compose(self) -> ComposeResult:
        with Container(id="box"):
            yield self.widget

    def on_mount(self) -> None:
        box = self.query_one("#box")
        box.styles.width, box.styles.height = self.box


async def panel_lines(width: int, height: int, model: CockpitModel | None = None) -> list[str]:
    app = OneWidget(ServerPanel(model or story_model()), width, height)
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.pause(0.05)
        lines = server_lines(app)
        assert all(len(line) <= width for line in lines), lines
        return lines


# --------------------------------------------------------------------------- the server panel

@pytest.mark.parametrize("width", [34, 40, 60])
async def test_server_rows_keep_label_value_and_unit_apart_and_say_kv_cache_in_percent(width: int):
    lines = await panel_lines(width, 7)
    if True:
        rows = {line[:11].strip(): line for line in lines}
        assert re.match(r"decode +1040 tok/s ", rows["decode"]), rows  # was "gen tok/s1040"
        assert re.match(r"running +64 req ", rows["running"])
        assert re.match(r"queued +0 req ", rows["queued"])
        assert re.match(r"KV cache +22 % ", rows["KV cache"]), rows  # token_usage 0.218, was "tokens 0.22"
        assert re.match(r"CUDA graph +on", rows["CUDA graph"])
        assert lines[-1].startswith("health ok") and "from log" in lines[-1]
        assert not any(line.startswith("tokens") for line in lines)


async def test_server_rows_have_a_history_sparkline():
    m = story_model()
    rows = {line[:11].strip(): line for line in await panel_lines(60, 7, m)}
    for label in ("decode", "running", "queued", "KV cache"):
        tail = rows[label][LABEL_COLS:]
        assert sum(ch in SPARK for ch in tail) >= 35, (label, rows[label])  # 60 columns: 35 samples
    assert rows["decode"].rstrip()[-1] == "█"  # the newest sample is the tallest (60 -> 1040 tok/s)
    assert rows["running"].rstrip()[-4:] == "████" and "▁" in rows["running"]  # 1 request, then 64
    assert set(m.server_hist) >= {"gen_throughput", "prefill_throughput", "running_reqs", "queued_reqs", "token_usage"}
    assert all(len(h) == 50 for k, h in m.server_hist.items() if k != "prefill_throughput")


def test_prefill_throughput_from_prefill_log_lines_and_from_the_metrics_counter():
    m = CockpitModel(raise_errors=True)
    prefill = "[2026-03-04 10:00:00 TP0] Prefill batch. #new-seq: 2, #new-token: 4096, ..."
    m.apply([ServerStats(t=T0, source="log", gen_throughput=60.0),
             LogLine(t=T0 + 0.5, raw=prefill, line_kind="prefill", fields={"new_token": 4096}),
             LogLine(t=T0 + 1.0, raw=prefill, line_kind="prefill", fields={"new_token": 4096}),
             ServerStats(t=T0 + 2.0, source="log", gen_throughput=61.0)])
    assert m.server["prefill_throughput"] == pytest.approx(4096.0)  # 8192 new tokens over 2 s
    m.apply([ServerStats(t=T0 + 3.0, source="log", gen_throughput=61.0)])
    assert m.server["prefill_throughput"] == 0.0  # nothing prefilled in that second
    assert list(m.server_hist["prefill_throughput"]) == [4096.0, 0.0]
    scraped = CockpitModel(raise_errors=True)
    scraped.apply([ServerStats(t=T0, source="metrics", extra={"prompt_tokens_total": 1000.0}),
                   ServerStats(t=T0 + 5.0, source="metrics", extra={"prompt_tokens_total": 11_000.0})])
    assert scraped.server["prefill_throughput"] == pytest.approx(2000.0)
    quiet = CockpitModel(raise_errors=True)  # a log without Prefill lines: no figure, not a false zero
    quiet.apply([ServerStats(t=T0, source="log"), ServerStats(t=T0 + 1, source="log")])
    assert "prefill_throughput" not in quiet.server


@pytest.mark.parametrize(("width", "height"), [(24, 4), (24, 3), (38, 4), (60, 5)])
async def test_server_panel_is_three_or_four_dense_rows_when_small(width: int, height: int):
    lines = await panel_lines(width, height)
    assert len(lines) == min(height, 4), lines
    text = "\n".join(lines)
    if width < 34:  # short labels at 80x24; the words where there is room
        assert re.search(r"dec +1040 tok/s", text) and "KV 22%" in text and "run 64  que 0" in text
    else:
        assert re.search(r"decode +1040 tok/s", text) and "running 64  queued 0  KV 22%" in text
    assert "health ok" in text  # the health never gives way
    if height == 4:
        assert re.search(r"(pre|prefill) +- tok/s", text)  # the story has no Prefill lines: no figure, not 0


async def test_the_cockpit_at_80x24_draws_the_compact_server_panel():
    app = KimituiApp(StoryController(), tick=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        panel = app.query_one(ServerPanel)
        lines = server_lines(app)
        assert lines and all(len(line) <= panel.size.width for line in lines), lines
        assert lines[0].startswith("dec ") and not any(line.startswith("decode") for line in lines)


async def test_a_down_server_greys_its_figures_and_says_down():
    lines = await panel_lines(40, 7, story_model(ServerHealth(t=T0 + 200, ok=False, detail="connection refused")))
    assert lines[-1].startswith("health DOWN connection refused")


# --------------------------------------------------------------------------- the ETA model, with numbers

def test_eta_of_a_constructed_sweep():
    """C=1 done (5 requests, 64 tok/s), C=8 half done, C=64 to come (module docstring's model)."""
    spec = quick_spec()
    c1 = LevelResult(t=T0 + 10, sweep_id="s", concurrency=1, requests=5, ok=5, output_tokens=640, wall_s=10.0,
                     agg_tok_s=64.0)
    prog = SweepProgress(t=T0 + 12.5, sweep_id="s", concurrency=8, done=8, failed=0, level_tokens=1024,
                         level_elapsed_s=2.5, running=8)
    eta = sweep_eta(spec, [c1], prog, elapsed_s=12.5)
    assert eta.running is not None
    assert (eta.running.done, eta.running.total) == (8, 16)
    # 16 x 128 tokens - 1024 so far, at 1024 / 2.5 = 409.6 tok/s: 2.5 s left in this level
    assert eta.running.eta_s == pytest.approx(2.5)
    # C=64 from the one measured level: s(64) = (1/64) x 64^0.42 -> 714 tok/s; 128 x 128 tokens
    agg64 = 64 / (64 ** SEED_EXPONENT / 64)
    assert RateModel.measured([(1, 64.0)]).agg(64) == pytest.approx(agg64) == pytest.approx(714.1, abs=0.1)  # type: ignore[union-attr]
    assert eta.eta_s == pytest.approx(2.5 + 128 * 128 / agg64)
    assert (eta.levels_done, eta.levels_total, eta.requests_done, eta.requests_total) == (1, 3, 13, 149)
    assert eta.estimated and not eta.running.estimated  # C=64 is modelled; C=8 is measured
    assert summary(eta) == "ETA ~25s · levels 1/3 · requests 13/149 · 12s elapsed"
    assert summary(eta, 40) == "ETA ~25s · 1/3 levels · 13/149 req · 12s"
    assert summary(eta, 30) == "ETA ~25s · 1/3 levels"
    stopped = sweep_eta(spec, [c1], None, 11.0, outcome="stopped")
    assert stopped.eta_s is None and summary(stopped) == "stopped · levels 1/3 · requests 5 · 11s elapsed"


def test_eta_before_the_first_request_ends_is_marked_and_before_any_token_says_so():
    spec = quick_spec()
    first = SweepProgress(t=T0, sweep_id="s", concurrency=1, done=0, level_tokens=65, level_elapsed_s=1.0)
    lv = running_level(spec, first, None, 128.0)
    assert lv.estimated and lv.eta_s == pytest.approx((5 * 128 - 65) / 65.0)
    nothing = SweepProgress(t=T0, sweep_id="s", concurrency=1, level_elapsed_s=0.2)
    assert running_level(spec, nothing, None, 128.0).eta_s is None
    assert eta_text(None, True) == "ETA after first tokens"
    assert eta_text(75.0, True) == "ETA ~1m15s" and eta_text(75.0, False) == "ETA 1m15s"


def test_rate_model_interpolates_and_extrapolates_on_the_two_largest_levels():
    """The seeds' EP8 figures: 65 tok/s at C=1, 345 at C=16, 1538 at C=256 (log-log between them)."""
    rates = RateModel.measured([(1, 65.0), (16, 345.0), (256, 1538.0)])
    assert rates is not None
    assert rates.agg(16) == pytest.approx(345.0) and rates.agg(256) == pytest.approx(1538.0)
    s16, s256 = 16 / 345.0, 256 / 1538.0
    assert rates.seconds_per_token(64) == pytest.approx(math.sqrt(s16 * s256))  # halfway on log C
    slope = math.log(s256 / s16) / math.log(16)
    assert rates.seconds_per_token(512) == pytest.approx(s256 * 2 ** slope)
    assert 1538.0 < rates.agg(512) < 2 * 1538.0  # more throughput at 512, less per request
    flat = RateModel.measured([(8, 800.0), (64, 400.0)])  # a collapse: not extrapolated further down
    assert flat is not None and flat.agg(128) == pytest.approx(400.0)


def test_the_seeds_prior_and_the_time_scale():
    quick = quick_spec()
    assert [level_requests(quick, c) for c in quick.levels] == [5, 16, 128]
    assert level_requests(quick_spec(mode="burst"), 64) == 64 and level_requests(quick_spec(duration_s=30), 8) is None
    prior = RateModel.seeds()
    assert prior.agg(8) == pytest.approx(217.1, abs=0.1) and prior.agg(64) == pytest.approx(725.3, abs=0.1)
    levels = 640 / 65 + 16 * 128 / prior.agg(8) + 128 * 128 / prior.agg(64)
    assert levels == pytest.approx(41.9, abs=0.05)
    assert spec_seconds(quick, prior) == pytest.approx(START_S + levels)
    assert spec_seconds(quick, RateModel.seeds(10.0)) == pytest.approx(START_S + levels / 10)
    assert duration(27.6) == "28s" and duration(582) == "9m42s" and duration(3720) == "1h02m"


# --------------------------------------------------------------------------- the level table

def sweep_events() -> list:
    spec = quick_spec()
    return [ConnectionState(t=T0, state="connected"), caps(T0), gpu_sample(T0, 50.0),
            ProfileState(t=T0, profile="ep8-tuned", state="serving"),
            SweepStarted(t=T0 + 1, sweep_id="q", spec=spec, profile="ep8-tuned"),
            LevelStarted(t=T0 + 1, sweep_id="q", concurrency=1),
            LevelResult(t=T0 + 11, sweep_id="q", concurrency=1, requests=5, ok=4, failed=1, output_tokens=512,
                        wall_s=10.0, agg_tok_s=64.0, failures={"timeout": 1}),
            LevelStarted(t=T0 + 11, sweep_id="q", concurrency=8),
            SweepProgress(t=T0 + 13.5, sweep_id="q", concurrency=8, done=7, failed=1, level_tokens=1024,
                          level_elapsed_s=2.5, running=8)]


async def test_level_rows_count_requests_and_the_running_level_has_an_eta():
    app = KimituiApp(FakeController(initial=sweep_events()), tick=None)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(app, pilot)
        table = app.query_one(LevelTable)
        cols = [str(c.label) for c in table.columns.values()]
        assert cols[:6] == ["C", "status", "agg", "steady", "reqs", "time"]
        done = [str(c) for c in table.get_row_at(0)]
        assert done[0] == "1" and done[4] == "5/5" and done[5] == "10s" and done[cols.index("fail")].startswith("1")
        live = [str(c) for c in table.get_row_at(1)]
        assert live[0] == "▶ 8" and live[4] == "8/16" and live[cols.index("fail")] == "1"
        assert live[5] == "ETA 2s"  # (16 x 128 - 1024) tokens at 409.6 tok/s: 2.5 s, rounded
        subtitle = str(table.caption()[1])
        assert subtitle.startswith("ETA ~") and subtitle.endswith(" · levels 1/3 · requests 13/149 · 12s elapsed")


# --------------------------------------------------------------------------- the sweep form

async def test_quick_preset_fills_the_form_and_the_estimate_follows():
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("s")
        await tick(pilot)
        form = app.screen
        assert isinstance(form, SweepForm)
        estimate = form.query_one("#sweep-estimate", Static)
        assert "8 levels · 1,557 requests (from the seeds' figures)" in str(estimate.render())
        await pilot.click("#preset-quick")
        await tick(pilot)
        assert form.query_one("#sweep-levels", Input).value == "1, 8, 64"
        assert form.query_one("#sweep-max-tokens", Input).value == "128"
        assert form.query_one("#sweep-mode", Select).value == "sustained"
        assert str(estimate.render()) == "estimated ≈ 44s · 3 levels · 149 requests (from the seeds' figures)"
        assert "quick: C=1,8,64 · 128 tokens" in screen_text(app) and "seeds' defaults" in screen_text(app)
        await pilot.click("#preset-seeds")
        await tick(pilot)
        assert form.query_one("#sweep-levels", Input).value == "1, 8, 32, 64, 96, 128, 192, 256"
        await pilot.click("#preset-quick")
        await pilot.click("#sweep-start")
        await settle(app, pilot)
    (call,) = [c for c in app.controller.calls if c[0] == "start_sweep"]  # type: ignore[attr-defined]  # Fake
    assert call[1].levels == [1, 8, 64] and call[1].max_tokens == 128


# --------------------------------------------------------------------------- the time scale

@pytest.mark.parametrize("scale", [10.0, 1.0])
async def test_time_scale_badge_only_when_not_one(scale: float):
    ctrl = StoryController()
    ctrl.initial.insert(1, ServerInfo(t=T0, url="http://127.0.0.1:30001", args={"sim": True, "sim_time_scale": scale}))
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        header = app.query_one(HeaderBar).render().plain
        assert ("sim ×10 time" in header) is (scale == 10.0), header
        assert "sim ×" not in header or scale != 1.0


@pytest.mark.parametrize("width", [80, 200])
async def test_header_keeps_the_profile_state_at_80_and_200_columns(width: int):
    m = story_model(ServerInfo(t=T0 + 1, args={"sim": True, "sim_time_scale": 10}),
                    ConnectionState(t=T0 + 2, state="reconnecting", detail="ssh: timed out"))
    header = HeaderBar(m)
    header.recording = RecordingStatus("/tmp/kimitui-test.jsonl", True, True)
    app = OneWidget(header, width, 2)
    async with app.run_test(size=(width, 10)) as pilot:
        await pilot.pause(0.05)
        first, second = header.render().plain.splitlines()
        assert len(first) <= header.size.width and len(second) <= header.size.width, first
        assert "ep8-eplb  serving " in first and "sim ×10" in first and "REC" in first
        assert "reconnecting" in first and "errors" in second
        if width == 200:
            assert "profile ep8-eplb" in first and "/tmp/kimitui-test.jsonl" in first


def test_real_host_reports_no_time_scale():
    m = CockpitModel(raise_errors=True)
    m.apply([ServerInfo(t=T0, args={"version": "0.5.6", "sim_time_scale": 10})])  # no "sim": not the simulator
    assert m.sim_time_scale is None


def test_readme_explains_the_time_scale():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The simulated host's time scale", 1)[1].split("\n#", 1)[0]
    for words in ("time_scale", "--time-scale", "sim ×10 time", "weights", "sweep", "never scaled"):
        assert words in section, words


async def test_a_swap_line_at_80_columns_leaves_the_counters_whole():
    m = story_model(ProfileState(t=T0 + 300, profile="ep8-tuned", state="starting"),
                    SwapProgress(t=T0 + 300, profile="ep8-tuned", phase="weights", fraction=0.4,
                                 message="loading safetensors shard 12 of 64 from /root/models/Kimi-K2.6"))
    header = HeaderBar(m)
    app = OneWidget(header, 80, 2)
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause(0.05)
        first, second = header.render().plain.splitlines()
    assert len(second) <= 80 and second.endswith("notes 1  markers 0  errors 0"), second
    assert second.startswith(" swap → ep8-tuned: weights ") and " 40% " in second and "…" in second
    assert "starting" in first
