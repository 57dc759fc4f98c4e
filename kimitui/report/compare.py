"""A/B comparison of two recorded sweeps: per-level ratios with noise, a verdict per figure, and overall.

``compare(a, b)`` is what both ``kimitui report A --vs B`` and the TUI's
compare view use.  A is the reference (baseline), B the candidate: ratios are
B/A, "regressed" means B is worse.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from kimitui.analysis.causes.tail import SMALL_LOSS, LevelLoss, explained
from kimitui.recording import Recording
from kimitui.report import noise
from kimitui.report.sweep_summary import LevelRow, RecordingSummary, SweepRun, pick_sweep, summarize
from kimitui.report.unsure import Side, explain
from kimitui.report.verdict import (
    CLIENT_TIMED,
    DEFAULT_MIN_EFFECT,
    ENERGY_FIGURES,
    FIGURES,
    Figure,
    VERDICT_WORDS,
    Overall,
    Verdict,
    describe_knobs,
    judge,
    knob_diff,
    knob_families,
    levels_text,
    noted_diff,
    workload_diff,
)

Source = SweepRun | RecordingSummary | Recording | str | os.PathLike[str]


@dataclass
class FigureComparison:
    """One figure at one level (or the peak): A, B, B/A with its 95 % interval, and the verdict."""

    figure: str
    label: str
    concurrency: int | None
    """None for the peak (which may sit at a different level on each side)."""
    a: float | None
    b: float | None
    ratio: float | None
    low: float | None
    high: float | None
    noise: str
    """``repeats``, ``bootstrap`` or ``unknown``."""
    verdict: Verdict
    higher_is_better: bool = True
    primary: bool = True
    """Whether this figure counts toward the overall verdict."""
    note: str = ""
    """Why it is not judged (``not judged: B's C=256 failed (...)``), or what to distrust about it
    (``distorted by the client: loop lag 730 ms``)."""
    why: str = ""
    """For *unsure*: why the data cannot tell (``one request holds 67 % of the level's time (B)``)."""
    settle: str = ""
    """For *unsure*: what would settle it (``about 40 requests per level would settle it``)."""
    settle_requests: int | None = None
    """For *unsure*: the requests per level that would settle it, when more requests can."""

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    @property
    def noise_pct(self) -> float | None:
        """Half-width of the 95 % interval, in % of the ratio."""
        if self.ratio is None or self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2.0 / self.ratio * 100.0

    def describe(self) -> str:
        where = f"C={self.concurrency} " if self.concurrency is not None else ""
        if self.ratio is None or self.verdict == "n/a":
            return f"{where}{self.label}: " + (self.note or "n/a")
        noise = f"±{self.noise_pct:.0f} %" if self.noise_pct is not None else "noise unknown"
        word = VERDICT_WORDS[self.verdict]
        if self.verdict == "unsure":
            span = (f"95 % interval {(self.low - 1) * 100:+.0f} % to {(self.high - 1) * 100:+.0f} %"
                    if self.low is not None and self.high is not None else noise)
            return f"{where}{self.label} {self.change_pct:+.0f} % ({span}): unsure, {self.unsure_text}"
        return f"{where}{self.label} {self.change_pct:+.0f} % ({word}, {noise})"

    @property
    def unsure_text(self) -> str:
        """``one request holds 67 % of the level's time (B); about 40 requests per level would settle it``."""
        return f"{self.why}; {self.settle}" if self.settle else self.why


@dataclass
class LevelComparison:
    concurrency: int
    figures: list[FigureComparison]
    stragglers: tuple[int, int]
    """(A, B) straggler counts."""
    requests: tuple[int, int]
    failed: tuple[int, int]
    status: tuple[str, str] = ("ok", "ok")
    """Each side's level status; the level is judged only when both are ``ok``."""
    not_judged: str = ""
    """Why this level's figures are not judged (``B's C=256 failed (512/512 failed)``); empty if judged."""
    distorted: tuple[str | None, str | None] = (None, None)
    """Each side's client distortion (why the load process skewed its latency figures), if any."""
    limited: tuple[bool, bool] = (False, False)
    """Whether the load process held back each side's throughput too (then every figure is unsure)."""

    @property
    def throughput_distorted(self) -> bool:
        return any(self.limited)

    @property
    def judged(self) -> bool:
        return not self.not_judged

    @property
    def distortion(self) -> str:
        """``C=64 latency figures distorted by the client: loop lag 730 ms (B)``; empty if neither side."""
        da, db = self.distorted
        if not (da or db):
            return ""
        if da and db:
            why = da if da == db else f"{da} (A), {db} (B)"
        else:
            why = f"{da} (A)" if da else f"{db} (B)"
        return f"C={self.concurrency} latency figures distorted by the client: {why}"


@dataclass
class Comparison:
    a: SweepRun
    b: SweepRun
    verdict: Overall
    reasons: list[str] = field(default_factory=list)
    """Why it is not comparable (empty otherwise)."""
    workload_diff: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    knob_diff: dict[str, tuple[Any, Any]] | None = None
    knob_note: str = ""
    levels: list[LevelComparison] = field(default_factory=list)
    peak: FigureComparison | None = None
    only_in_a: list[int] = field(default_factory=list)
    only_in_b: list[int] = field(default_factory=list)
    min_effect: float = DEFAULT_MIN_EFFECT
    seed: int = 0
    noted_diff: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Measurement settings that differ without refusing the comparison (``requests_per_level``...)."""
    peak_at: tuple[tuple[int, float], tuple[int, float]] | None = None
    """Each side's peak (C, agg tok/s) over the levels judged in both: the peak figure's evidence."""

    @property
    def compared(self) -> list[int]:
        """Levels with results on both sides (judged or not)."""
        return [lv.concurrency for lv in self.levels]

    @property
    def judged_levels(self) -> list[int]:
        return [lv.concurrency for lv in self.levels if lv.judged]

    def levels_line(self) -> str:
        """``compared at C=1, 8, 64; only in A: 256`` — which levels the verdict speaks for."""
        parts = [f"compared at C={levels_text(self.compared)}"]
        if self.only_in_a:
            parts.append(f"only in A: {levels_text(self.only_in_a)}")
        if self.only_in_b:
            parts.append(f"only in B: {levels_text(self.only_in_b)}")
        return "; ".join(parts)

    @property
    def confounded(self) -> bool:
        return self.knob_diff is not None and len(knob_families(self.knob_diff)) >= 2

    @property
    def knobs_text(self) -> str:
        return describe_knobs(self.knob_diff, self.knob_note)

    def rows(self) -> list[FigureComparison]:
        """Every per-level figure comparison, level by level."""
        return [f for lv in self.levels for f in lv.figures]

    def level(self, concurrency: int) -> LevelComparison | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    @property
    def regressions(self) -> list[FigureComparison]:
        """Primary figures (and the peak) that regressed: these make the overall verdict."""
        return [f for f in ([self.peak] if self.peak else []) + self.rows() if f.primary and f.verdict == "regressed"]

    @property
    def improvements(self) -> list[FigureComparison]:
        return [f for f in ([self.peak] if self.peak else []) + self.rows() if f.primary and f.verdict == "improved"]

    def candidate_losses(self) -> list[LevelLoss]:
        """B's level losses at the compared levels (where its throughput went, by cause)."""
        return self._losses(self.b)

    def _losses(self, run: SweepRun) -> list[LevelLoss]:
        return [loss for c in self.compared if (row := run.levels.get(c)) is not None for loss in run.row_losses(row)]

    def explanation(self) -> str | None:
        """What the slower side lost most of its time to: for a regression B's (``explained by 3 EPLB
        rebalances, 71 s in all``), for an improvement A's (``A's loss explained by ...``: what B no longer
        loses); None when no cause holds half of it, or without a verdict either way."""
        if self.verdict == "regressed":
            return explained(self.candidate_losses())
        why = explained(self._losses(self.a)) if self.verdict == "improved" else None
        return f"A's loss {why}" if why else None

    def loss_lines(self) -> list[str]:
        """Per compared level, B's loss sentence where it delivered 5 % or more under its median pace (and
        A's too unless B regressed: what B gained back, or where an unsure side lost)."""
        sides = (("B", self.b),) if self.verdict == "regressed" else (("A", self.a), ("B", self.b))
        return [f"{side} at C={loss.concurrency}: {loss.sentence()}" for side, run in sides
                for loss in self._losses(run) if loss.loss_fraction >= SMALL_LOSS]

    def span(self, cs: list[int]) -> str:
        """``128–256`` for a run of three or more adjacent compared levels, else ``1, 8, 64``."""
        order = self.compared
        idx = [order.index(c) for c in cs if c in order]
        if len(idx) >= 3 and idx == list(range(idx[0], idx[0] + len(idx))):
            return f"{cs[0]}–{cs[-1]}"
        return levels_text(cs)

    @property
    def distorted_levels(self) -> list[int]:
        """Levels where the load process held back the throughput: no figure of theirs is judged."""
        return [lv.concurrency for lv in self.levels if lv.judged and lv.throughput_distorted]

    @property
    def late_stamp_levels(self) -> list[int]:
        """Levels where the load process only stamped latencies late: their latency figures are not judged."""
        return [lv.concurrency for lv in self.levels if lv.judged and lv.distortion and not lv.throughput_distorted]

    def client_line(self) -> str:
        """Said once per comparison, with its meaning for this verdict (``C=128–256 not judged: the client
        could not keep up``); empty when the client kept up everywhere."""
        cs, late = self.distorted_levels, self.late_stamp_levels
        if not cs and not late:
            return ""
        parts = []
        if cs:
            judged = [c for c in self.judged_levels if c not in cs]
            rest = (f"; the verdict rests on C={levels_text(judged)}" if judged
                    else "; no level is left to judge: sweep again at a lower time scale")
            parts.append(f"C={self.span(cs)} not judged: the client could not keep up{rest}")
        if late:
            parts.append(f"C={self.span(late)}: latency figures not judged (the client stamped them late); "
                         "throughput judged")
        return "⚠ client: " + "; ".join(parts)

    def headline(self) -> str:
        """One line for a title bar, one clause per fact: the verdict (and its cause), the peak, the lowest
        level's decode rate, the stragglers, what was not judged, the knobs."""
        if self.verdict == "not_comparable":
            return "not comparable: " + "; ".join(self.reasons)
        word = VERDICT_WORDS[self.verdict]
        why = self.explanation()
        parts: list[str] = [f"{word}, {why}" if why else word]
        if self.peak is not None and self.peak.ratio is not None:
            pk = self.peak
            why = (f": {pk.why.split('; ')[0]}" if pk.verdict == "unsure" and pk.why and not pk.note.startswith("distorted")
                   else "")  # a distorted peak's level is named in the client clause below
            parts.append(f"peak {pk.change_pct:+.0f} % ({VERDICT_WORDS[pk.verdict]}{why})")
        judged = [lv for lv in self.levels if lv.judged and not lv.distortion]
        if judged:
            first = judged[0]
            dec = next((f for f in first.figures if f.figure == "decode_tok_s_p50" and f.ratio is not None), None)
            if dec is not None:
                parts.append(f"C={first.concurrency} p50 decode {dec.change_pct:+.0f} % ({VERDICT_WORDS[dec.verdict]})")
        worst = max(self.levels, key=lambda lv: (lv.stragglers[0] + lv.stragglers[1], -lv.concurrency), default=None)
        if worst is not None and worst.stragglers[0] + worst.stragglers[1]:
            parts.append(f"stragglers at C={worst.concurrency}: {worst.stragglers[0]} of {worst.requests[0]} "
                         f"-> {worst.stragglers[1]} of {worst.requests[1]}")
        skipped = [lv.concurrency for lv in self.levels if not lv.judged]
        if skipped:
            parts.append(f"C={levels_text(skipped)} not judged (a level not ok)")
        if self.distorted_levels:
            parts.append(f"C={self.span(self.distorted_levels)} not judged (the client could not keep up)")
        if self.late_stamp_levels:
            parts.append(f"C={self.span(self.late_stamp_levels)} latencies not judged (the client stamped them late)")
        if self.knob_diff is None:
            parts.append("knobs unknown")
        elif not self.knob_diff:
            parts.append("no knob changed")
        elif len(self.knob_diff) == 1:
            parts.append(f"one knob changed: {next(iter(self.knob_diff))}")
        elif len(families := knob_families(self.knob_diff)) == 1:
            parts.append(f"one knob family changed: {next(iter(families))} ({', '.join(self.knob_diff)})")
        else:
            parts.append(f"confounded: {len(self.knob_diff)} knobs changed ({', '.join(self.knob_diff)})")
        return "; ".join(parts)

    def unsure_lines(self) -> list[str]:
        """The unsure primary figures of the levels, grouped by their reason so each reason is said once
        (``C=1 aggregate tok/s -41 %, C=1 steady tok/s -6 %: unsure, too few requests ...``); the peak is said
        on its own line, the client's levels once by :meth:`client_line`."""
        groups: dict[str, list[str]] = {}
        for lv in self.levels:
            if not lv.judged:
                continue
            for f in lv.figures:
                if (f.primary and f.verdict == "unsure" and f.ratio is not None and f.change_pct is not None
                        and not f.note.startswith("distorted")):
                    groups.setdefault(f.unsure_text, []).append(f"C={f.concurrency} {f.label} {f.change_pct:+.0f} %")
        return [f"{', '.join(figs)}: unsure, {text}" for text, figs in groups.items()]

    def spec_and_eplb_lines(self) -> list[str]:
        """Speculative decoding's speed-up and collapse, and the EPLB rebalances of each side, when there are any."""
        from kimitui.report.spec_eplb import eplb_line, speedup_lines  # spec_eplb builds on this module's runs

        out = speedup_lines(self.a, self.b)
        out += [line for side, run in (("A", self.a), ("B", self.b)) if (line := eplb_line(run, side)) is not None]
        return out

    def energy_lines(self) -> list[str]:
        """Per figure (J/token, cost/Mtok), B against A at every judged level, with each verdict: how much more
        (or less) energy and money a token costs on B, beyond noise or not; nothing when neither side has it."""
        out = []
        for name, label in (("j_per_token", "energy per token (J/token)"), ("cost_per_mtok", "cost per M tokens")):
            figs = [f for lv in self.levels if lv.judged for f in lv.figures if f.figure == name]
            if not figs:
                continue
            said = [f"C={f.concurrency} {f.change_pct:+.0f} % ({VERDICT_WORDS[f.verdict]})" for f in figs
                    if f.change_pct is not None]
            if said:
                out.append(f"{label}, B vs A: " + ", ".join(said))
            else:
                out.append(f"{label}: {figs[0].note or 'not judged'}")
        return out

    def summary_lines(self) -> list[str]:
        """Plain sentences, most important first (the compare view's and the report's headline)."""
        head = f"{self.a.label} vs {self.b.label}"
        if self.verdict == "not_comparable":
            lines = [f"not comparable: {head}"] + [f"  {r}" for r in self.reasons]
            lines.append(self.knobs_text)
            return lines
        word = VERDICT_WORDS[self.verdict]
        why = self.explanation()
        lines = [f"{word}: {head}" + (f", {why}" if why else ""), self.levels_line()]
        if client := self.client_line():
            lines.append(client)
        lines += self.spec_and_eplb_lines()
        lines += self.energy_lines()
        lines += self.loss_lines()
        if self.peak is not None and self.peak.ratio is not None and self.peak_at is not None:
            (ca, va), (cb, vb) = self.peak_at
            lines.append(f"{self.peak.describe()}: {va:.0f} tok/s at C={ca} -> {vb:.0f} tok/s at C={cb}")
            for side, run, at in (("A", self.a, ca), ("B", self.b, cb)):
                own = run.peak
                if own is not None and own[0] != at:
                    lines.append(f"  {side}'s own peak, {own[1]:.0f} tok/s at C={own[0]}, is at a level not compared")
        for lv in self.levels:
            if lv.not_judged:
                lines.append(f"not judged: {lv.not_judged}")
        if self.noted_diff:
            lines.append("measured differently (not refused): " + ", ".join(
                f"{k} {va!r} vs {vb!r}" for k, (va, vb) in self.noted_diff.items()))
        notable = [f for f in self.rows() if f.primary and f.verdict in ("regressed", "improved")]
        first = next((lv for lv in self.levels if lv.judged and not lv.distortion), None)
        if first is not None:  # the lowest level's decode rate: the per-request health figure
            dec = next((f for f in first.figures if f.figure == "decode_tok_s_p50"), None)
            if dec is not None and dec not in notable and dec.verdict != "unsure":  # an unsure one: with its reason
                notable.insert(0, dec)
        for f in notable[:8]:
            lines.append(f.describe())
        if len(notable) > 8:
            lines.append(f"... and {len(notable) - 8} more figures changed beyond noise")
        unsure = self.unsure_lines()
        lines += unsure[:6]
        if len(unsure) > 6:
            lines.append(f"... and {len(unsure) - 6} more reasons for unsure figures")
        sa = sum(lv.stragglers[0] for lv in self.levels)
        sb = sum(lv.stragglers[1] for lv in self.levels)
        ra = sum(lv.requests[0] for lv in self.levels)
        rb = sum(lv.requests[1] for lv in self.levels)
        lines.append(f"stragglers: {sa} of {ra} requests (A), {sb} of {rb} (B)")
        fa = sum(lv.failed[0] for lv in self.levels)
        fb = sum(lv.failed[1] for lv in self.levels)
        if fa or fb:
            lines.append(f"failed requests: {fa} of {ra} (A), {fb} of {rb} (B)")
        lines.append(self.knobs_text)
        return lines


# --------------------------------------------------------------------------- building


def _run_of(source: Source, sweep: str | None) -> SweepRun:
    if isinstance(source, SweepRun):
        return source
    summary = source if isinstance(source, RecordingSummary) else summarize(source)
    return pick_sweep(summary, sweep)


PER_THROUGHPUT = {"j_per_token": "agg_tok_s", "tokens_per_kj": "agg_tok_s", "cost_per_mtok": "agg_tok_s"}
"""Figures whose per-request noise is the aggregate throughput's (see ``ENERGY_FIGURES``)."""


def _noise(row: LevelRow, fig: Figure, *, seed: int, key: str, use_repeats: bool) -> tuple[float | None, str]:
    if use_repeats and fig.name in ("agg_tok_s", "steady_tok_s", *PER_THROUGHPUT):
        se = noise.log_se_of_repeats(row.repeat_figure(fig.name))
        if se is not None:
            return se, "repeats"
    how = noise.request_statistic(PER_THROUGHPUT.get(fig.name, fig.name), row.requests)
    if how is None:
        return None, "unknown"
    n, stat = how
    se = noise.log_se_bootstrap(n, stat, seed=seed, key=key)
    return se, ("bootstrap" if se is not None else "unknown")


def _floor(fig: Figure, row: LevelRow, value: float) -> float:
    """The figure's run-to-run floor, shrinking as 1/√repeats when a level was swept several times; for
    latencies also the client's own timing jitter (the level's dispatch delay p99), relative to the value."""
    floor = fig.noise_floor / math.sqrt(max(1, len(row.repeats)))
    if fig.unit == "s" and value > 0:
        jitter_ms = max((r.dispatch_delay_p99_ms or 0.0 for r in row.repeats), default=0.0)
        floor = max(floor, jitter_ms / 1000.0 / value)
    return floor


def _figure(fig: Figure, ra: LevelRow, rb: LevelRow, *, seed: int, min_effect: float,
            concurrency: int | None, a_key: str, b_key: str, value_a: float | None = None,
            value_b: float | None = None, distorted: bool = False) -> FigureComparison:
    """One figure judged; a level the client distorted is *unsure* whatever its ratio (never better or worse)."""
    va = ra.figure(fig.name) if value_a is None else value_a
    vb = rb.figure(fig.name) if value_b is None else value_b
    use_repeats = len(ra.repeats) >= 2 and len(rb.repeats) >= 2
    if va is None or vb is None or va <= 0 or vb < 0:
        return FigureComparison(fig.name, fig.label, concurrency, va, vb, None, None, None, "unknown", "n/a",
                                fig.higher_is_better, fig.primary)
    se_a, src_a = _noise(ra, fig, seed=seed, key=f"A:{a_key}:{fig.name}", use_repeats=use_repeats)
    se_b, src_b = _noise(rb, fig, seed=seed, key=f"B:{b_key}:{fig.name}", use_repeats=use_repeats)
    floor_a, floor_b = _floor(fig, ra, va), _floor(fig, rb, vb)
    ratio, low, high = noise.ratio_interval(va, vb, None if se_a is None else max(se_a, floor_a),
                                            None if se_b is None else max(se_b, floor_b))
    source = src_a if src_a == src_b else "unknown" if "unknown" in (src_a, src_b) else f"{src_a}+{src_b}"
    verdict = "unsure" if distorted else judge(ratio, low, high, fig.higher_is_better, min_effect)
    out = FigureComparison(fig.name, fig.label, concurrency, va, vb, ratio, low, high, source, verdict,
                           fig.higher_is_better, fig.primary)
    if distorted:
        out.note = "distorted by the client"
    if verdict == "unsure":
        side_a = Side(ra.requests, ra.n_requests, frozenset(s.request_id for s in ra.stragglers),
                      se_a, floor_a, ra.client_distorted)
        side_b = Side(rb.requests, rb.n_requests, frozenset(s.request_id for s in rb.stragglers),
                      se_b, floor_b, rb.client_distorted)
        why = explain(ratio, side_a, side_b, min_effect=min_effect, figure_floor=fig.noise_floor,
                      level_distorted=distorted)
        out.why, out.settle, out.settle_requests = why.why, why.settle, why.requests
    return out


def _steady_note(noted: dict[str, tuple[Any, Any]]) -> str:
    if "steady_ratio" not in noted:
        return ""
    va, vb = noted["steady_ratio"]
    return f"not judged: steady_ratio differs ({va} vs {vb}), so the steady window is not the same"


def _not_judged(c: int, la: LevelRow, lb: LevelRow) -> str:
    """``B's C=256 failed (512/512 failed)``; both sides named when both are not ok."""
    bad = []
    for side, row in (("A", la), ("B", lb)):
        if not row.valid:
            why = f" ({row.status_reason})" if row.status_reason else ""
            bad.append(f"{side}'s C={c} {row.status}{why}")
    return " and ".join(bad)


def _level(c: int, la: LevelRow, lb: LevelRow, *, seed: int, min_effect: float, steady_note: str) -> LevelComparison:
    """One common level: judged figure by figure when both sides are ok, else shown with why not."""
    lv = LevelComparison(c, [], (len(la.stragglers), len(lb.stragglers)), (la.n_requests, lb.n_requests),
                         (la.n_failed, lb.n_failed), status=(la.status, lb.status), not_judged=_not_judged(c, la, lb),
                         distorted=(la.client_distorted, lb.client_distorted),
                         limited=(la.client_limited, lb.client_limited))
    energy = [fig for fig in ENERGY_FIGURES if la.figure(fig.name) is not None or lb.figure(fig.name) is not None]
    for fig in FIGURES + tuple(energy):
        if lv.not_judged or (fig.name == "steady_tok_s" and steady_note):
            lv.figures.append(FigureComparison(fig.name, fig.label, c, la.figure(fig.name), lb.figure(fig.name), None,
                                               None, None, "unknown", "n/a", fig.higher_is_better, fig.primary,
                                               note=f"not judged: {lv.not_judged}" if lv.not_judged else steady_note))
            continue
        distorted = bool(lv.distortion) if fig.name in CLIENT_TIMED else lv.throughput_distorted
        judged = _figure(fig, la, lb, seed=seed, min_effect=min_effect, concurrency=c, a_key=str(c), b_key=str(c),
                         distorted=distorted)
        if fig in energy and judged.verdict == "n/a":
            judged.note = _missing(fig.name, la, lb)
        lv.figures.append(judged)
    return lv


def _missing(name: str, la: LevelRow, lb: LevelRow) -> str:
    """Why an energy or cost figure is not judged: which side lacks it, and why."""
    out = []
    for side, row in (("A", la), ("B", lb)):
        if row.figure(name) is None:
            cost = row.cost
            why = (cost.reason if name == "cost_per_mtok" and cost is not None and cost.reason else row.energy_reason)
            out.append(f"{side}: {why or 'no figure'}")
    return "not judged: " + "; ".join(out)


EFFICIENCY_FIGURES: dict[str, Figure] = {
    "tokens_per_kj": Figure("tokens_per_kj", "best tokens per kJ", True, "tok/kJ", 0.03, primary=False),
    "cost_per_mtok": Figure("cost_per_mtok", "lowest cost/Mtok", False, "/Mtok", 0.03, primary=False),
}
"""The efficiency objectives (``kimitui tune --objective tokens_per_kj|cost_per_mtok``): each side's best level by
the figure among the levels judged on both, compared as the peak is (noise: the J/token's, ``ENERGY_FIGURES``)."""


def best_level_figure(cmp: Comparison, name: str) -> FigureComparison | None:
    """Each side's best judged level by an efficiency figure (most tokens per kJ, lowest cost), B against A;
    None when no judged level has the figure on both sides (no GPU power samples, no ``[cost]``)."""
    fig = EFFICIENCY_FIGURES[name]
    judged = [lv for lv in cmp.levels if lv.judged and not lv.throughput_distorted]

    def best(run: SweepRun) -> int | None:
        vals = [(v, lv.concurrency) for lv in judged
                if (row := run.levels.get(lv.concurrency)) is not None and (v := row.figure(name)) is not None]
        if not vals:
            return None
        return (max(vals) if fig.higher_is_better else min(vals))[1]

    ca, cb = best(cmp.a), best(cmp.b)
    if ca is None or cb is None:
        return None
    out = _figure(fig, cmp.a.levels[ca], cmp.b.levels[cb], seed=cmp.seed, min_effect=cmp.min_effect,
                  concurrency=None, a_key=f"{ca}", b_key=f"{cb}")
    out.note = out.note or f"A at C={ca}, B at C={cb}"
    return out


def compare(a: Source, b: Source, *, sweep_a: str | None = None, sweep_b: str | None = None,
            min_effect: float = DEFAULT_MIN_EFFECT, seed: int = 0) -> Comparison:
    """Compare sweep B against reference sweep A (recordings, paths, summaries or sweeps).

    ``sweep_a``/``sweep_b`` pick a sweep by id or profile (default: the last one with results).
    """
    ra, rb = _run_of(a, sweep_a), _run_of(b, sweep_b)
    knobs, note = knob_diff(ra, rb)
    out = Comparison(a=ra, b=rb, verdict="unsure", knob_diff=knobs, knob_note=note, min_effect=min_effect, seed=seed)
    out.workload_diff = workload_diff(ra, rb)
    if out.workload_diff:
        out.verdict = "not_comparable"
        out.reasons = [f"the workload differs: {k} {va!r} vs {vb!r}" for k, (va, vb) in out.workload_diff.items()]
        return out
    out.noted_diff = noted_diff(ra, rb)
    common = sorted(set(ra.levels) & set(rb.levels))
    out.only_in_a = sorted(set(ra.levels) - set(rb.levels))
    out.only_in_b = sorted(set(rb.levels) - set(ra.levels))
    if not common:
        out.verdict = "not_comparable"
        out.reasons = [f"no concurrency level has results in both sweeps (A: C={levels_text(sorted(ra.levels))}; "
                       f"B: C={levels_text(sorted(rb.levels))})"]
        return out
    for c in common:
        out.levels.append(_level(c, ra.levels[c], rb.levels[c], seed=seed, min_effect=min_effect,
                                 steady_note=_steady_note(out.noted_diff)))
    judged = out.judged_levels
    if not judged:
        out.verdict = "not_comparable"
        out.reasons = ["no level is ok in both sweeps: " + "; ".join(lv.not_judged for lv in out.levels)]
        return out
    pa, pb = ra.peak_among(judged), rb.peak_among(judged)
    if pa is not None and pb is not None:
        agg = FIGURES[0]
        distorted = any(run.levels[c].client_limited for run in (ra, rb) for c in (pa[0], pb[0]))
        out.peak = _figure(agg, ra.levels[pa[0]], rb.levels[pb[0]], seed=seed, min_effect=min_effect,
                           concurrency=None, a_key=str(pa[0]), b_key=str(pb[0]), distorted=distorted)
        out.peak.label = "peak aggregate tok/s"
        out.peak_at = (pa, pb)
    if out.regressions:
        out.verdict = "regressed"
    elif out.improvements:
        out.verdict = "improved"
    else:
        primary = [f for f in ([out.peak] if out.peak else []) + out.rows() if f.primary and f.verdict != "n/a"]
        out.verdict = "same" if primary and all(f.verdict == "same" for f in primary) else "unsure"
    return out
