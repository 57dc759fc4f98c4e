"""The straggler detail view (issue 15): headline first, the request's own timeline, the gap's log without polling.

The seed case (tests/support/gapcase.py): the story's C=1 straggler ``s2-c1-r4`` with the issue's 35.6 s gap,
its own chunk offsets, all 8 ranks printing the rebalance lines and kimitui's polling: the 119-line window.
"""

from __future__ import annotations

import html
import re

from kimitui.analysis.gap_evidence import (GapEvidence, ShownLine, explains, fold_quiet, gap_lines, gather, headline,
                                           seconds)
from kimitui.analysis.window import EventHistory
from kimitui.tui.app import KimituiApp
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.widgets.request_timeline import GAP_BG, draw_timeline
from kimitui.tui.widgets.straggler_list import StragglerList
from tests.support.fakecontrol import FakeController
from tests.support.gapcase import gap_case_events, straggler_result, the_straggler
from tests.support.tuiscreen import screen_text, settle, tick


def evidence(with_result: bool = True) -> GapEvidence:
    history = EventHistory()
    for e in gap_case_events():
        history.add(e)
    return gather(the_straggler(), straggler_result() if with_result else None, history)


# --------------------------------------------------------------------------- the pure parts


def test_the_gap_window_holds_the_issues_119_lines_and_shows_only_the_merged_few():
    ev = evidence()
    assert ev.gap is not None and len(ev.gap.log_lines) >= 119
    lines = gap_lines(ev.gap)
    texts = [s.line.shown for s in lines]
    assert not any("GET /metrics" in t or "/v1/loads" in t or "/health" in t for t in texts)
    rebalance_end = [s for s in lines if "rebalance end time=35.6 s" in s.line.shown]
    assert len(rebalance_end) == 1 and "TP0–7 EP0–7" in rebalance_end[0].line.shown and rebalance_end[0].explains
    assert len(lines) <= 4
    everything = gap_lines(ev.gap, everything=True)
    assert len(everything) == len(ev.gap.log_lines)  # the toggle: every line as it came


def test_headline_states_rate_gap_gpus_and_the_explaining_line():
    text = headline(evidence())
    assert text.startswith("s2-c1-r4 at C=1 ran at 11.7 tok/s (level median 63): one 35.6 s gap at 10:21:07")
    assert "all 8 GPUs fell from 90–93 % to 7–10 % utilisation" in text
    assert text.endswith("the log says: rebalance end time=35.6 s.")


def test_explains_marks_eplb_kv_and_errors_not_decode_lines():
    from kimitui.analysis.log_lines import MergedLine
    assert explains(MergedLine(0, "warning", "warning", "KV cache pool is full. Retract requests."))
    assert explains(MergedLine(0, "error", "error", "NCCL error"))
    assert not explains(MergedLine(0, "info", "decode", "Decode batch. #running-req: 1"))


def test_a_busy_gap_keeps_every_explaining_line_and_the_quiet_ones_nearest_its_start():
    from kimitui.analysis.log_lines import MergedLine
    quiet = [ShownLine(MergedLine(float(t), "info", "decode", f"Decode batch {t}"), False) for t in range(60)]
    marked = ShownLine(MergedLine(59.5, "info", "eplb", "[EPLBManager] rebalance end time=35.6 s"), True)
    kept, folded = fold_quiet([*quiet, marked], around=30.0, keep=4)
    assert marked in kept and folded == 56
    assert [s.line.t for s in kept if not s.explains] == [28.0, 29.0, 30.0, 31.0]
    assert seconds(35.61) == "35.6 s" and seconds(0.42) == "0.42 s" and seconds(0.0163) == "0.016 s"


def test_timeline_shades_the_gap_and_the_tokens_stay_flat_in_it():
    ev = evidence()
    text = draw_timeline(ev, 100, 12)
    rows = text.plain.splitlines()
    assert "◀ 35.6 s gap ▶" in rows[0]
    span = ev.gap_span
    assert span is not None and abs(span[0] - 1.0) < 0.05 and abs(span[1] - 36.6) < 0.05
    shaded = {s.start for s in text.spans if GAP_BG.split()[-1] in str(s.style)}
    assert shaded, "the gap's columns carry the red background"
    gutter = rows[1].index("│") + 1
    total = ev.axis_end - ev.axis_start
    in_gap = [gutter + c for c in range(100 - gutter) if span[0] + 1 < (c + 0.5) * total / (100 - gutter) < span[1] - 1]
    token_rows = rows[1:-4 if len(rows) > 5 else -1]
    heights = {c: "".join(r[c] for r in token_rows) for c in in_gap}
    assert len(set(heights.values())) == 1, "no tokens arrive during the gap: the area is flat there"
    assert "s since sent" in rows[-1] and "GPU%" in text.plain


def test_timeline_without_the_requests_chunks_still_draws_the_gpus_and_the_gap():
    text = draw_timeline(evidence(with_result=False), 90, 8).plain
    assert "no chunk times kept for this request" in text and "35.6 s gap" in text and "GPU%" in text


# --------------------------------------------------------------------------- on screen


async def open_detail(size: tuple[int, int]) -> tuple[KimituiApp, str]:
    app = KimituiApp(FakeController(initial=gap_case_events()), tick=None)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        app.query_one(StragglerList).focus()
        await pilot.press("enter")
        await tick(pilot)
        await tick(pilot)
        assert isinstance(app.screen, StragglerDetail)
        text = screen_text(app)
        lines = text_rows(app)
        await pilot.press("a")
        await tick(pilot)
        everything = screen_text(app)
        assert "GET /metrics" in everything, "a shows every line, polling included"
    return app, "\n".join(lines)


_ROW_TEXT = re.compile(r'<text[^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)"[^>]*>(.*?)</text>', re.S)


def text_rows(app: KimituiApp) -> list[str]:
    """The screen as rows of text, top to bottom: what a person sees without scrolling."""
    rows: dict[int, list[str]] = {}
    for row, chunk in _ROW_TEXT.findall(app.export_screenshot()):
        rows.setdefault(int(row), []).append(html.unescape(chunk).replace("\xa0", " "))
    return ["".join(rows.get(i, [])) for i in range(max(rows, default=-1) + 1)]


async def test_120x40_headline_first_no_polling_one_merged_rebalance_line_on_the_first_screen():
    app, shown = await open_detail((120, 40))
    rows = shown.splitlines()
    heads = [i for i, r in enumerate(rows) if "s2-c1-r4 at C=1 ran at" in r]
    assert heads, "a headline sentence opens the view"
    assert not any("GET /" in r for r in rows), "kimitui's own polling is hidden"
    end_rows = [i for i, r in enumerate(rows) if "rebalance end time=35.6 s" in r and "TP0–7" in r]
    assert len(end_rows) == 1, "one merged rebalance-end line naming all eight ranks, within the 40 rows"
    assert sum("rebalance start" in r for r in rows) == 1
    timeline = [i for i, r in enumerate(rows) if "35.6 s gap ▶" in r]
    assert timeline and heads[0] < timeline[0] < end_rows[0], "headline, then the timeline, then the log"
    assert "GPU%" in shown


async def test_80x24_headline_and_the_explaining_line_are_on_the_first_screen():
    app, shown = await open_detail((80, 24))
    assert "s2-c1-r4 at C=1 ran at" in shown
    assert "rebalance end time=35.6" in shown
