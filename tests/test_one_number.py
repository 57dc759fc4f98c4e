"""One number per fact (issue 29): one sweep pair through every view says the same figures.

The pair (tests/support/storypair.py) is the seeds' story at report scale: ep8-tuned, then ep8-eplb whose
every level has one EPLB rebalance stalling 16 requests while the GPUs fall to 8 %.  The same events go
through the cockpit's model (as the live cockpit and a replay fold them), the compare view's runs and text,
the report from the recordings in md, text and json, and ``kimitui sweep``'s closing line; every view must
print the same loss shares and causes, straggler coverage, rebalance counts, peak and GPU ranges.  Counts
read "16 of 24", never "16/24".  The md report of the pair fits on one screen of a chat.

GPU ranges: a straggler's cause headline said "all 8 GPUs at 8–72 % utilisation" (lowest to highest reading,
edge samples included) over its detail saying "fell to 8 % (from 49–54 %)" (per-GPU means, samples timed
by arrival).  B's GPU samples arrive late (``LINK_LAG_S``), so a view timing them by arrival reads a busy
sample into the gap; every view must say ``GPU_WORDS`` (each GPU's mean on the host's clock).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from kimitui.analysis.causes.words import headline
from kimitui.analysis.gap_evidence import gather, in_gap_gpus
from kimitui.analysis.gap_evidence import headline as gap_headline
from kimitui.commands.sweep import peak_text
from kimitui.recording import write_recording
from kimitui.report import compare, summarize
from kimitui.report.render import render_json, render_md, render_text
from kimitui.report.spec_eplb import eplb_line
from kimitui.report.sweep_summary import SweepRun, sweeps_of
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.curve_series import peak_point
from kimitui.tui.model.level_eplb import rebalances_by_level
from kimitui.tui.screens.compare import level_table, with_causes
from kimitui.tui.widgets.level_table import LevelExtras
from kimitui.tui.widgets.straggler_list import cause_cell
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.widgets.straggler_list import StragglerList
from tests.support.fakecontrol import FakeController
from tests.support.storypair import BUSY, GPU_WORDS, IDLE, LEVELS, STRAGGLERS, story_pair
from tests.support.tuiscreen import screen_text, settle, tick

MAX_MD_LINES = 80


def _views(tmp: Path):
    a_events, b_events = story_pair()
    model = CockpitModel(raise_errors=True)
    for ev in [*a_events, *b_events]:
        model.apply([ev])
    a, b = (summarize(write_recording(tmp / f"{name}.jsonl", evs)) for name, evs in (("a", a_events), ("b", b_events)))
    cmp = compare(a.sweeps[0], b.sweeps[0])
    return model, a, b, cmp


def _compare_view_text(model: CockpitModel) -> str:
    """What the compare view shows: its runs from the cockpit's events, the cockpit's causes, its table."""
    runs: list[SweepRun] = [r for r in sweeps_of(list(model.sweep_events), "this session") if r.levels]
    for run in runs:
        with_causes(run, model)
    cmp = compare(runs[0], runs[1])
    console = Console(width=250, record=True, file=io.StringIO())
    console.print(level_table(cmp))
    return "\n".join([cmp.headline(), *cmp.summary_lines(), console.export_text()])


def test_one_sweep_pair_says_the_same_numbers_in_every_view(tmp_path: Path) -> None:
    model, _, b, cmp = _views(tmp_path)
    run = b.sweeps[0]
    sw = model.sweep
    assert sw is not None and sw.sweep_id == run.sweep_id == "s2"
    md = render_md([], cmp)
    md_all = render_md([], cmp, stragglers=True)
    text = render_text([b], None, stragglers=True)
    data = json.loads(render_json([b]))["recordings"][0]["sweeps"][0]
    view = _compare_view_text(model)
    cells = LevelExtras(model).losses

    # each level's loss share and cause: the cockpit's cell and sentence, the report's table cell and lines
    for c in LEVELS:
        live, recorded = sw.losses[(c, 0)], run.losses[(c, 0)]
        assert live.cell() == recorded.cell() and live.sentence() == recorded.sentence(), c
        assert cells[f"{c}:0"].plain == recorded.cell()
        assert re.search(rf"^\| {c} \|.*\| {re.escape(recorded.cell())} \|$", md, re.M), c  # the brief table
        assert f"B at C={c}: {live.sentence()}" in view and f"B at C={c}: {live.sentence()}" in md_all
        level = next(lv for lv in data["levels"] if lv["concurrency"] == c)
        assert level["loss"]["sentence"] == live.sentence() and level["loss"]["main_cause"] == live.main_cause

    # each straggler's coverage and GPU range: the list's cell, the detail's headline, the report's json and text
    assert len(sw.attributions) == len(run.attributions) == STRAGGLERS * len(LEVELS)
    for rid, live_a in sw.attributions.items():
        rec_a = run.attributions[rid]
        said = headline(live_a)
        assert said == headline(rec_a) and f"({GPU_WORDS})" in said, said
        assert cause_cell(live_a).plain == f"EPLB {said.split('covers ')[1].split(' of')[0].replace(' ', '')}"
        strag = next(s for lv in data["levels"] for s in lv["stragglers"] if s["request_id"] == rid)
        assert strag["headline"] == said and strag["coverage"] == round(live_a.coverage, 4)
        assert f"straggler C={live_a.concurrency} {rid}: {said} (high confidence)" in text
        _same_gpus_in_the_detail(model, rid, live_a)
    worst = max(run.attributions.values(), key=lambda a: (a.lost_s, a.request_id))
    assert f"worst C={worst.concurrency} {worst.request_id}: {headline(sw.attributions[worst.request_id])}" in md
    assert GPU_WORDS in md and GPU_WORDS in strag["headline"]

    # rebalance counts: the cockpit's EPLB column, the report's, the one line that counts them; no other count
    live_reb = rebalances_by_level(model)
    for c in LEVELS:
        assert live_reb[c].count == run.level_rebalances(run.levels[c]).count == 1
    line = eplb_line(run, "B")
    assert line is not None and line.startswith(f"{len(LEVELS)} EPLB rebalances")
    assert line in md  # the compare view keeps no log lines: it names the cause and says no count at all
    for shown in (md, view):
        assert not re.search(r"explained by \d+|explained by one", shown)  # the count is said once, in that line

    # the peak: the cockpit's curve, the report (md, json), the sweep command's line
    c, agg = peak_point(model.curves["ep8-eplb"]) or (0, 0.0)
    assert run.peak == (c, agg) and data["peak"] == {"concurrency": c, "agg_tok_s": agg}
    assert f"peak (seed-comparable aggregate) {agg:,.0f} tok/s at C={c}" in md
    assert peak_text(list(sw.levels)).startswith(f"peak {agg:,.0f} tok/s at C={c} (seed-comparable aggregate")

    # counts are "16 of 24", never "16/24"
    assert f"| {STRAGGLERS} of 24 |" in md and not re.search(r"\b\d+/\d+\b", md.split("```")[0])


def _same_gpus_in_the_detail(model: CockpitModel, rid: str, cause) -> None:
    """The straggler detail's facts line and GPU table say the cause's GPU range, with the cause or without."""
    sw = model.sweep
    assert sw is not None
    s = next(x for x in sw.stragglers if x.request_id == rid)
    ev = gather(s, sw.straggler_result(rid), model.history)
    for body in (gap_headline(ev, cause=cause), gap_headline(ev)):  # quoted, and computed from the window alone
        assert f"during which {GPU_WORDS};" in body, body
    table = in_gap_gpus(ev)
    assert [round(g.util_mean or -1) for g in table] == [round(IDLE)] * 8
    assert [g.util_before for g in table] == BUSY


async def test_the_cockpits_straggler_detail_says_the_range_once(tmp_path: Path) -> None:
    """On screen: the cause line and the facts line under it name the same GPU range."""
    a_events, b_events = story_pair()
    app = KimituiApp(FakeController(initial=[*a_events, *b_events]), tick=None)
    async with app.run_test(size=(260, 60)) as pilot:
        await settle(app, pilot)
        app.query_one(StragglerList).focus()
        await pilot.press("enter")
        await tick(pilot)
        await tick(pilot)
        assert isinstance(app.screen, StragglerDetail) and app.screen.cause is not None
        shown = screen_text(app)
    assert shown.count(GPU_WORDS) == 2, shown
    assert f"covers 95 % of the 4.0 s gap ({GPU_WORDS})" in shown and f"during which {GPU_WORDS};" in shown


def test_two_8_level_sweeps_md_report_fits_one_screen(tmp_path: Path) -> None:
    """The report that listed each of 128 stragglers (2,592 lines): each cause once, every straggler only
    behind ``--stragglers``."""
    _, a, b, cmp = _views(tmp_path)
    md = render_md([a, b], cmp)
    assert len(md.splitlines()) < MAX_MD_LINES, md
    assert md.count("EPLB rebalance: ") == 1 and f"{STRAGGLERS * len(LEVELS)} of {STRAGGLERS * len(LEVELS)} stragglers" in md
    full = render_md([a, b], cmp, stragglers=True)
    assert full.count("**cause: EPLB rebalance") == STRAGGLERS * len(LEVELS)  # still there when asked for
    assert len(render_text([a, b], cmp).splitlines()) < 2 * MAX_MD_LINES  # the text has no per-straggler lines
