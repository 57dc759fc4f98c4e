"""What a straggler's detail view says: a headline of facts, the request's own token curve, the gap's log lines.

Issue 15: the gap view was 119 raw log lines, nearly all kimitui's own polling and every SGLang line
eight times, and the line that explained the gap needed scrolling.  So the evidence is gathered once,
when the operator opens a straggler, into what a person reads first:

* a headline sentence built from what the window holds (no cause attribution, just the facts): the
  rate against the level's median, the gap, what the GPUs did during it, the log line that says why.
  What the GPUs did is :mod:`kimitui.analysis.causes.gpu_figures`' one computation (each GPU's mean on
  the host's clock against the span before), and where the cause was attributed over this same gap its
  words are quoted as they are (issue 29: one number per fact);
* the request's tokens against seconds since it was sent, with the gap's span, over the GPUs' mean
  utilisation on the same time axis;
* the gap's log lines with kimitui's own polling hidden and each rank's copy merged
  (:func:`kimitui.analysis.log_lines.merge_ranks`), the explaining ones marked.

No Textual: the detail screen draws it, tests read it.
"""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass, field, replace

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.event_clock import sample_time
from kimitui.analysis.causes.gpu_figures import (COVER_S, DROP_PCT, GpuFigures, before_span, gpu_figures, gpu_words,
                                                 in_span, moment_of)
from kimitui.analysis.level_stats import chunk_times
from kimitui.analysis.log_lines import MergedLine, is_own_polling, merge_ranks, rank_set, split_rank
from kimitui.analysis.window import GpuWindowSummary, Windowed, WindowView, summarize_gpus
from kimitui.events import GpuSample, RequestResult, Straggler
from kimitui.sglang.log import kind_is
BIG_GAP_S = 0.5
BIG_GAP_FRACTION = 0.25
"""Gaps counted in the headline: at least 0.5 s and a quarter of the longest (the rest is ordinary ITL)."""
CONTEXT_S = 5.0
"""Without the request's own times, the time axis shows this much (or the gap's length) either side of it."""

LIFE_PAD_S = 3.0
"""GPU samples looked up this long before the request was sent: the reading in force when it went out."""
LAG_S = 10.0
"""GPU samples are looked up by arrival this much wider than the gap, then placed on the host's clock (a slow
link delivers them late)."""
SAME_SPAN_S = 0.02
"""An attribution's worst stretch within this much (or 5 % of the gap) of both gap ends is the gap itself."""

_COMPONENT = re.compile(r"^\[[A-Za-z][\w .-]*\] ")
_BRACKET_TIME = re.compile(r"^\[\d{4}-\d{2}-\d{2} [\d:.]+\] ?")


@dataclass(frozen=True)
class ShownLine:
    """A log line as the detail view lists it; ``explains`` marks a line worth reading first."""

    line: MergedLine
    explains: bool


@dataclass(frozen=True)
class GapEvidence:
    """Everything the detail view shows of one straggler, on a time axis of wall-clock ``[axis_start, axis_end]``."""

    straggler: Straggler
    result: RequestResult | None
    """The request's own result with its chunk offsets, when the sweep kept it."""
    gap: WindowView | None
    """The slowest gap padded by a second: the GPU table and the log lines."""
    axis_start: float
    axis_end: float
    life: list[GpuSample] = field(default_factory=list)
    """GPU samples across the whole time axis (the utilisation under the token curve)."""
    around: list[GpuSample] = field(default_factory=list)
    """GPU samples from before the gap's contrast span to after it, in host-clock order (:func:`sample_time`)."""
    gpu: GpuFigures | None = None
    """What the GPUs did in the gap: each one's mean inside against the span before (the one computation)."""

    @property
    def gap_span(self) -> tuple[float, float] | None:
        """The gap as seconds since ``axis_start``."""
        s = self.straggler
        if s.gap_start is None:
            return None
        end = s.gap_end if s.gap_end is not None else s.gap_start + (s.max_gap_s or 0.0)
        return s.gap_start - self.axis_start, end - self.axis_start

    def tokens(self) -> list[tuple[float, float]]:
        """(seconds since sent, tokens so far) at the send and at every content chunk; empty without chunks."""
        if self.result is None:
            return []
        points, total = [(self.result.sent - self.axis_start, 0.0)], 0.0
        for t, n in chunk_times(self.result):
            total += n
            points.append((t - self.axis_start, total))
        return points if len(points) > 1 else []

    def mean_util(self) -> list[tuple[float, float]]:
        """(seconds since ``axis_start``, mean utilisation over the GPUs that reported it) per sample."""
        out = []
        for sample in self.life:
            utils = [r.util_pct for r in sample.gpus if r.util_pct is not None]
            if utils:
                out.append((sample_time(sample) - self.axis_start, sum(utils) / len(utils)))
        return out


def gather(s: Straggler, result: RequestResult | None, history: Windowed) -> GapEvidence:
    """Look up the gap's window and the GPUs across the request's life (on demand: when a straggler opens)."""
    gap = None
    if s.gap_start is not None:
        gap = history.window(s.gap_start, s.gap_end if s.gap_end is not None else s.gap_start)
    if result is not None and result.e2e_s is not None:
        last = max(result.chunk_offsets_ms or [0.0]) / 1000.0
        start, end = result.sent, result.sent + max(result.e2e_s, last)
    elif gap is not None:
        g0, g1 = gap.start + 1.0, gap.end - 1.0
        around = max(CONTEXT_S, g1 - g0)
        start, end = g0 - around, g1 + around
    else:
        return GapEvidence(s, result, None, 0.0, 0.0)
    if s.gap_start is not None:
        start, end = min(start, s.gap_start), max(end, s.gap_end or s.gap_start)
    life = history.window(start - LIFE_PAD_S, end, pad_s=0.0).gpu_samples
    nearby: list[GpuSample] = []
    figures = None
    if s.gap_start is not None:
        a, b = _gap_bounds(s)
        b0, _ = before_span(a, b)
        nearby = sorted(history.window(b0 - LAG_S, b + COVER_S + LAG_S, pad_s=0.0).gpu_samples, key=sample_time)
        figures = gpu_figures([moment_of(x.gpus, sample_time(x)) for x in nearby], a, b)
    return GapEvidence(s, result, gap, start, end, life, nearby, figures)


def _gap_bounds(s: Straggler) -> tuple[float, float]:
    g0 = s.gap_start if s.gap_start is not None else 0.0
    return g0, s.gap_end if s.gap_end is not None else g0 + (s.max_gap_s or 0.0)


# --------------------------------------------------------------------------- the gap's log lines

def explains(line: MergedLine) -> bool:
    """EPLB lines, KV-cache pool full / retractions, errors and warnings: what may say why a stream stalled."""
    text = line.text
    return (kind_is(line.kind, "eplb", "error", "warning") or line.severity in ("warning", "error", "critical")
            or "KV cache pool is full" in text or "retract" in text.lower())


def gap_lines(view: WindowView, *, everything: bool = False) -> list[ShownLine]:
    """The gap's lines as an operator reads them: no polling, one line per rank set; ``everything``: as they came."""
    rows = [(ln.t, ln.severity, ln.line_kind, ln.raw) for ln in view.log_lines]
    if everything:
        merged = [MergedLine(t, sev, kind, text) for t, sev, kind, text in rows]
    else:
        merged = merge_ranks(rows)
    return [ShownLine(m, explains(m)) for m in merged]


def fold_quiet(lines: list[ShownLine], around: float | None, keep: int) -> tuple[list[ShownLine], int]:
    """Every explaining line and the ``keep`` other lines nearest ``around`` (the gap's start), in time order,
    and how many others were left out: a busy window still shows why on one screen."""
    quiet = [i for i, s in enumerate(lines) if not s.explains]
    if len(quiet) <= keep:
        return lines, 0
    at = around if around is not None else lines[0].line.t
    kept = set(sorted(quiet, key=lambda i: (abs(lines[i].line.t - at), i))[:keep])
    return [s for i, s in enumerate(lines) if s.explains or i in kept], len(quiet) - keep


def hidden_polling(view: WindowView) -> int:
    """How many of the gap's lines are kimitui's own polling (what the default view leaves out)."""
    return sum(1 for ln in view.log_lines if is_own_polling(ln.line_kind, ln.raw))


def _rank(line: MergedLine) -> int:
    """Which explaining line the headline quotes: the rebalance's end (it carries the time), errors, KV, EPLB."""
    text = line.text
    if kind_is(line.kind, "eplb") and "rebalance end" in text:
        return 0
    if line.severity in ("error", "critical"):
        return 1
    if "KV cache pool is full" in text or "retract" in text.lower():
        return 2
    if kind_is(line.kind, "eplb"):
        return 3
    return 4


def message(line: MergedLine, limit: int = 90) -> str:
    """The line without its timestamp/rank prefix and component tag: ``rebalance end time=35.6 s``."""
    split = split_rank(line.text)
    text = split[2] if split is not None else _BRACKET_TIME.sub("", line.text)
    text = _COMPONENT.sub("", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def display(line: MergedLine) -> str:
    """The line as listed under its clock time: the rank set, then the message (the bracketed timestamp is dropped)."""
    split = split_rank(line.text)
    if split is None:
        return _BRACKET_TIME.sub("", line.text)
    _, tags, text = split
    ranks = line.ranks if line.copies > 1 else {name: {n} for name, n in tags.items()}
    return f"{rank_set(ranks)} {text}"


def explaining_line(lines: list[ShownLine]) -> MergedLine | None:
    marked = [s.line for s in lines if s.explains]
    return min(marked, key=lambda m: (_rank(m), m.t)) if marked else None


# --------------------------------------------------------------------------- the headline

def seconds(value: float) -> str:
    """A duration with the digits it needs: ``35.6 s``, ``0.42 s``, ``0.014 s`` (a 40x clock's gaps are short)."""
    if value >= 1 or value == 0:
        return f"{value:.1f} s"
    return f"{value:.2f} s" if value >= 0.1 else f"{value:.3f} s"


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def _rate_clause(s: Straggler) -> str:
    out = f"{s.request_id} at C={s.concurrency}"
    if s.decode_tok_s is not None:
        out += f" ran at {s.decode_tok_s:.1f} tok/s"
        if s.median_decode_tok_s is not None:
            out += f" (level median {s.median_decode_tok_s:.0f})"
    return out


def _gap_clause(ev: GapEvidence) -> str:
    s = ev.straggler
    if s.max_gap_s is None:
        return ""
    at = f" at {_clock(s.gap_start)}" if s.gap_start is not None else ""
    offs = ev.result.chunk_offsets_ms if ev.result is not None else None
    if not offs:
        return f"its longest gap {seconds(s.max_gap_s)}{at}"
    floor = max(BIG_GAP_S, BIG_GAP_FRACTION * s.max_gap_s)
    big = sum(1 for a, b in zip(offs, offs[1:]) if (b - a) / 1000.0 >= floor)
    if big <= 1:
        return f"one {seconds(s.max_gap_s)} gap{at}"
    return f"{big} gaps over {seconds(floor)}, the longest {seconds(s.max_gap_s)}{at}"


def in_gap_samples(ev: GapEvidence) -> list[GpuSample]:
    """The GPU samples the gap's figures read: those taken in it on the host's clock (or the one just after
    that covers it), without the window's padding."""
    if ev.gap is None or ev.straggler.gap_start is None:
        return []
    g0, g1 = _gap_bounds(ev.straggler)
    return in_span(ev.around, g0, g1, sample_time)


def in_gap_gpus(ev: GapEvidence) -> list[GpuWindowSummary]:
    """Each GPU in the gap against the span before it, from the samples and the figures the headline says:
    the table's mean and "before" columns are the headline's numbers."""
    inside = in_gap_samples(ev)
    if not inside:
        return []
    before = ev.gpu.before if ev.gpu is not None else {}
    return [replace(g, util_before=before.get(g.index)) for g in summarize_gpus(inside)]


def fell_in_gap(g: GpuWindowSummary) -> bool:
    """Its mean utilisation in the gap is ``DROP_PCT`` points or more under the span before it."""
    return g.util_before is not None and g.util_mean is not None and g.util_mean < g.util_before - DROP_PCT


def cause_gpu_note(ev: GapEvidence, cause: Attribution | None) -> str:
    """The attribution's GPU words when its worst stretch is this gap (the same fact, said once); else ""."""
    s = ev.straggler
    if cause is None or not cause.gpu_note or not cause.stretches or s.gap_start is None:
        return ""
    g0, g1 = _gap_bounds(s)
    worst = cause.stretches[0]
    tol = max(SAME_SPAN_S, 0.05 * (g1 - g0))
    return cause.gpu_note if abs(worst.start - g0) <= tol and abs(worst.end - g1) <= tol else ""


def _gpu_clause(ev: GapEvidence, cause: Attribution | None) -> str:
    said = cause_gpu_note(ev, cause)
    if said:
        return said
    if ev.gpu is None:
        return "no GPU samples kept for the gap"
    return gpu_words(ev.gpu) or "the GPUs reported no utilisation"


def headline(ev: GapEvidence, lines: list[ShownLine] | None = None, cause: Attribution | None = None) -> str:
    """One sentence of facts: "s2-c1-r4 at C=1 ran at 7.7 tok/s (level median 63): one 35.6 s gap at 10:21:07,
    during which all 8 GPUs fell from 88–93 % to 8–11 % utilisation; the log says: rebalance end time=35.6 s".
    ``cause``: the straggler's attribution, whose GPU words are quoted where its worst stretch is this gap."""
    s = ev.straggler
    out = _rate_clause(s)
    gap = _gap_clause(ev)
    if not gap:
        return out + (f": {s.reason}" if s.reason else "") + "."
    out += f": {gap}, during which {_gpu_clause(ev, cause)}"
    if ev.gap is not None:
        shown = lines if lines is not None else gap_lines(ev.gap)
        best = explaining_line(shown)
        if best is not None:
            out += f"; the log says: {message(best)}"
        elif shown:
            out += f"; the log has {len(shown)} lines in it, none a warning, error or EPLB line"
        else:
            out += "; the server logged nothing in it"
    return out + "."
