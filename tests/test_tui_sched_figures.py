"""The server panel's scheduler row: queue wait, retractions and forward occupancy from SGLang's /metrics (issue 31).

Fed the real 0.5.18 server's /metrics through the poller's parser, and stories of a server under pressure.
"""

from __future__ import annotations

from kimitui.events import ServerStats
from kimitui.telemetry.metrics_poll import CounterRates, stats_from_metrics
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.server_figures import SCHED_FIGURES, Retraction, sched_figure_alarm, sched_figure_text, sched_figures
from kimitui.tui.widgets.server_panel import ServerPanel
from tests.support.fakecontrol import T0
from tests.support.real_sglang import read_http, real_output_dir
from tests.test_tui_server_sweep import OneWidget, server_lines, story_model


async def _lines(model: CockpitModel, width: int = 60, height: int = 9) -> list[str]:
    app = OneWidget(ServerPanel(model), width, height)
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.pause(0.05)
        return server_lines(app)


def test_the_real_servers_figures_reach_the_panel() -> None:
    real = real_output_dir() / "tiny-llama"
    rates = CounterRates()
    m = CockpitModel(raise_errors=True)
    for i, name in enumerate(("metrics_before.txt", "metrics_after.txt")):
        m.apply([stats_from_metrics(read_http(real / name)[2], host="h", rates=rates).model_copy(update={"t": T0 + i})])
    rows = dict(sched_figures(m.server))
    wait, retracted, busy = (rows[fig] for fig in SCHED_FIGURES)
    assert wait is not None and 0 < wait < 0.01  # the eight requests between the two scrapes waited ~1 ms each
    assert retracted == 0.0 and busy is None  # fwd_occupancy is NaN on the real CPU server: no figure
    texts = [sched_figure_text(fig, v) for fig, v in sched_figures(m.server)]
    assert texts == [f"{wait * 1000:.0f} ms", "0", "-"]


def test_a_server_without_them_shows_no_row_and_old_recordings_still_load() -> None:
    m = story_model()  # Decode-line figures only
    assert sched_figures(m.server) == []
    old = ServerStats.model_validate({"kind": "server_stats", "t": T0, "host": "h", "source": "metrics",
                                      "running_reqs": 3.0})  # a recording from before these fields
    assert old.queue_time_s is None and old.retracted_reqs is None


async def test_the_row_says_why_requests_wait_and_keeps_a_recent_retraction() -> None:
    m = story_model()
    assert not any(line.startswith("scheduler") for line in await _lines(m))
    m.apply([ServerStats(t=T0 + 100, source="metrics", queue_time_s=2.5, retracted_reqs=3.0, fwd_occupancy=97.0),
             ServerStats(t=T0 + 112, source="metrics", queue_time_s=0.041, retracted_reqs=0.0, fwd_occupancy=87.0)])
    assert m.last_retraction == Retraction(T0 + 100, 3.0)
    row = next(line for line in await _lines(m) if line.startswith("scheduler"))
    assert "wait 41 ms" in row and "retr 3 req 12s ago" in row and "fwd 87 %" in row, row
    lines = await _lines(m)
    assert lines[-1].startswith("health")  # the row is one more line: the health line is kept
    retr = SCHED_FIGURES[1]
    assert sched_figure_alarm(retr, 0.0, m.last_retraction, T0 + 112) == "bold red"
    assert sched_figure_alarm(retr, 0.0, m.last_retraction, T0 + 200) == ""  # a minute later: no longer shown
    assert sched_figure_text(retr, 0.0, m.last_retraction, T0 + 200) == "0"
    assert sched_figure_alarm(SCHED_FIGURES[0], 2.5) == "yellow"  # seconds in the queue: admission or capacity
