"""Reports as Markdown (tables + Unicode charts), plain text (aligned columns), JSON (stable, see
``docs/report-json.md``) and CSV."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime
from typing import Any, TypeVar

from kimitui import __version__
from kimitui.analysis.causes.tail import SMALL_LOSS, LevelLoss
from kimitui.analysis.causes.words import evidence_lines
from kimitui.analysis.causes.words import headline as cause_headline
from kimitui.analysis.spec import format_speedup
from kimitui.events import Percentiles, Straggler
from kimitui.report.charts import line_chart
from kimitui.report.compare import Comparison, FigureComparison
from kimitui.report.energy_render import (
    cost_dict, energy_cells, energy_dict, energy_header, energy_lines, idle_dict, knee_dict, shows_energy,
)
from kimitui.report.spec_eplb import (
    accept_len, accept_rate_p50, collapsed_levels, eplb_dict, eplb_line, has_eplb, has_spec, run_speedups, spec_dict,
    speedup_rows,
)
from kimitui.report.sweep_summary import LevelRow, RecordingSummary, SweepRun
from kimitui.report.cause_summary import cause_counts, cause_line, count_of
from kimitui.report.verdict import VERDICT_WORDS

JSON_SCHEMA = "kimitui-report"
JSON_VERSION = 2
PCT_FIELDS = ("ttft", "tpot", "itl", "decode_tok_s", "e2e_tok_s")


_V = TypeVar("_V")


def _clean(v: _V) -> _V | None:
    """JSON-safe: non-finite floats become None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _pct(row: LevelRow, name: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in ("p50", "p90", "p99", "mean"):
        vals = [getattr(getattr(r, name), q) for r in row.repeats]
        vals = [v for v in vals if v is not None]
        out[q] = _clean(sum(vals) / len(vals)) if vals else None
    return out


def _straggler_dict(s: Straggler, run: SweepRun | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {k: _clean(v) for k, v in s.model_dump().items()}
    a = run.attributions.get(s.request_id) if run is not None else None
    d["cause"] = a.cause if a is not None else None
    d["confidence"] = a.confidence if a is not None else None
    d["coverage"] = _clean(round(a.coverage, 4)) if a is not None else None
    d["headline"] = cause_headline(a) if a is not None else None
    d["shares"] = [{"cause": x.cause, "share": round(x.share, 4), "lost_s": round(x.lost_s, 3),
                    "evidence": list(x.evidence)} for x in a.shares] if a is not None else []
    return d


def loss_dict(loss: LevelLoss | None) -> dict[str, Any] | None:
    """Where a level's throughput went: the aggregate against its median decode pace, by cause."""
    if loss is None:
        return None
    return {"agg_tok_s": _clean(loss.agg_tok_s), "expected_tok_s": _clean(loss.expected_tok_s),
            "lost_s": round(loss.lost_s, 3), "loss_fraction": round(loss.loss_fraction, 4),
            "by_cause": {k: round(v, 3) for k, v in sorted(loss.by_cause.items())},
            "main_cause": loss.main_cause, "sentence": loss.sentence()}


# --------------------------------------------------------------------------- JSON


def level_dict(row: LevelRow, run: SweepRun | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "concurrency": row.concurrency,
        "repeats": len(row.repeats),
        "requests": row.n_requests,
        "ok": row.n_ok,
        "failed": row.n_failed,
        "failures": dict(sorted(row.failures.items())),
        "agg_tok_s": _clean(row.agg_tok_s),
        "steady_tok_s": _clean(row.steady_tok_s),
    }
    for name in PCT_FIELDS:
        d[name] = _pct(row, name)
    d["stragglers"] = [_straggler_dict(s, run) for s in row.stragglers]
    d["loss"] = loss_dict(run.row_loss(row)) if run is not None else None
    d["stopped"] = row.stopped
    d["status"] = row.status
    d["status_reason"] = row.status_reason
    d["errors"] = row.errors
    d["prompt_tokens"] = _pct(row, "prompt_tokens")
    if d["prompt_tokens"]["p50"] is None:
        d["prompt_tokens"]["p50"] = _clean(row.prompt_tokens_p50)
    clients = [r.client for r in row.repeats if r.client is not None]
    d["client"] = {k: _clean(v) for k, v in clients[0].model_dump().items()} if clients else None
    d["client_distorted"] = row.client_distorted
    d["spec"] = spec_dict(row, collapsed_levels(run)) if run is not None else None
    d["eplb"] = eplb_dict(run, row) if run is not None else None
    d["energy"] = energy_dict(row)
    d["cost"] = cost_dict(row)
    return d


def sweep_dict(run: SweepRun) -> dict[str, Any]:
    peak = run.peak
    return {
        "sweep_id": run.sweep_id,
        "profile": run.profile,
        "host": run.host,
        "started": run.started,
        "outcome": run.outcome,
        "reason": run.reason,
        "spec": run.spec.model_dump(mode="json"),
        "knobs": run.knobs,
        "knobs_source": run.knobs_source or None,
        "peak": {"concurrency": peak[0], "agg_tok_s": _clean(peak[1])} if peak else None,
        "idle_power": idle_dict(run.idle),
        "knee": knee_dict(run.knee),
        "levels": [level_dict(r, run) for r in run.ordered_levels],
    }


def figure_dict(f: FigureComparison) -> dict[str, Any]:
    return {
        "figure": f.figure, "label": f.label, "concurrency": f.concurrency, "a": _clean(f.a), "b": _clean(f.b),
        "ratio": _clean(f.ratio), "low": _clean(f.low), "high": _clean(f.high), "change_pct": _clean(f.change_pct),
        "noise_pct": _clean(f.noise_pct), "noise": f.noise, "verdict": f.verdict,
        "higher_is_better": f.higher_is_better, "primary": f.primary, "note": f.note,
        "why": f.why, "settle": f.settle, "settle_requests": f.settle_requests,
    }


def comparison_dict(cmp: Comparison) -> dict[str, Any]:
    def side(run: SweepRun) -> dict[str, Any]:
        return {"source": run.source, "sweep_id": run.sweep_id, "profile": run.profile}

    return {
        "a": side(cmp.a),
        "b": side(cmp.b),
        "verdict": cmp.verdict,
        "reasons": cmp.reasons,
        "workload_diff": {k: [a, b] for k, (a, b) in cmp.workload_diff.items()},
        "knob_diff": None if cmp.knob_diff is None else {k: [a, b] for k, (a, b) in cmp.knob_diff.items()},
        "knob_note": cmp.knob_note,
        "confounded": cmp.confounded,
        "min_effect": cmp.min_effect,
        "seed": cmp.seed,
        "peak": figure_dict(cmp.peak) if cmp.peak else None,
        "peak_at": None if cmp.peak_at is None else {
            side: {"concurrency": c, "agg_tok_s": _clean(v)} for side, (c, v) in zip(("a", "b"), cmp.peak_at)},
        "levels": [
            {"concurrency": lv.concurrency, "requests": list(lv.requests), "failed": list(lv.failed),
             "stragglers": list(lv.stragglers), "status": list(lv.status), "judged": lv.judged,
             "not_judged": lv.not_judged, "distorted": list(lv.distorted), "client_limited": list(lv.limited),
             "figures": [figure_dict(f) for f in lv.figures]}
            for lv in cmp.levels
        ],
        "compared": cmp.compared,
        "only_in_a": cmp.only_in_a,
        "only_in_b": cmp.only_in_b,
        "noted_diff": {k: [a, b] for k, (a, b) in cmp.noted_diff.items()},
        "speedups": [{"concurrency": c, "decode_p50": _clean(u.decode), "agg_tok_s": _clean(u.aggregate)}
                     for c, u in sorted(run_speedups(cmp.a, cmp.b).items())],
        "client": cmp.client_line(),
        "summary": cmp.summary_lines(),
    }


def report_dict(summaries: list[RecordingSummary], comparison: Comparison | None = None) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "version": JSON_VERSION,
        "generated_by": f"kimitui {__version__}",
        "recordings": [
            {
                "source": s.source,
                "hosts": s.header.hosts,
                "started": s.header.started,
                "skipped_lines": [{"line": k.line_no, "reason": k.reason} for k in s.skipped],
                "notes": [{"t": n.t, "text": n.text} for n in s.notes],
                "markers": [{"t": m.t, "label": m.label} for m in s.markers],
                "sweeps": [sweep_dict(r) for r in s.sweeps],
            }
            for s in summaries
        ],
        "comparison": comparison_dict(comparison) if comparison else None,
    }


def render_json(summaries: list[RecordingSummary], comparison: Comparison | None = None) -> str:
    return json.dumps(report_dict(summaries, comparison), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- CSV

LEVEL_COLUMNS = (
    "source", "sweep_id", "profile", "concurrency", "repeats", "requests", "ok", "failed", "agg_tok_s",
    "steady_tok_s", "decode_tok_s_p50", "decode_tok_s_p90", "decode_tok_s_p99", "ttft_p50", "ttft_p90", "ttft_p99",
    "tpot_p50", "e2e_tok_s_p50", "stragglers", "stopped", "status", "status_reason", "prompt_tokens_p50",
    "client_distorted", "accept_len", "accept_rate_p50", "spec_collapsed", "eplb_rebalances", "eplb_stall_s",
    "expected_tok_s", "loss_main_cause", "loss_main_share", "straggler_causes", "j_per_token", "tokens_per_kj",
    "cost_per_mtok",
)
"""``expected_tok_s`` to ``straggler_causes`` (issue 18): the aggregate the level's median decode pace promised,
the cause behind most of the loss and its share, and its stragglers' causes (``eplb:6;unknown:1``); the last
three (issue 34): J per output token, tokens per kJ (= tok/s per kW) and the configured cost per M tokens."""
COMPARE_COLUMNS = ("concurrency", "figure", "a", "b", "ratio", "low", "high", "change_pct", "noise_pct", "noise",
                   "verdict", "note")


def _num(v: float | None) -> str:
    return "" if v is None or not math.isfinite(v) else f"{v:.6g}"


def render_csv(summaries: list[RecordingSummary], comparison: Comparison | None = None) -> str:
    """Level rows; with a comparison, one row per (level, figure) plus the peak and the overall verdict."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if comparison is None:
        w.writerow(LEVEL_COLUMNS)
        for s in summaries:
            for run in s.sweeps:
                for row in run.ordered_levels:
                    d = level_dict(row, run)
                    spec, eplb = d["spec"] or {}, d["eplb"] or {}
                    w.writerow([s.source, run.sweep_id, run.profile or "", row.concurrency, len(row.repeats),
                                row.n_requests, row.n_ok, row.n_failed, _num(row.agg_tok_s), _num(row.steady_tok_s),
                                _num(d["decode_tok_s"]["p50"]), _num(d["decode_tok_s"]["p90"]),
                                _num(d["decode_tok_s"]["p99"]), _num(d["ttft"]["p50"]), _num(d["ttft"]["p90"]),
                                _num(d["ttft"]["p99"]), _num(d["tpot"]["p50"]), _num(d["e2e_tok_s"]["p50"]),
                                len(row.stragglers), row.stopped or "", row.status, row.status_reason,
                                _num(row.prompt_tokens_p50), row.client_distorted or "",
                                _num(spec.get("accept_len")), _num(spec.get("accept_rate_p50")),
                                "" if not spec else "yes" if spec.get("collapsed") else "no",
                                eplb.get("rebalances", ""), _num(eplb.get("stall_s")), *_loss_cells(run, row),
                                _num(row.j_per_token), _num(row.tokens_per_kj), _num(row.cost_per_mtok)])
        return buf.getvalue()
    w.writerow(COMPARE_COLUMNS)
    figs = ([comparison.peak] if comparison.peak else []) + comparison.rows()
    for f in figs:
        w.writerow(["peak" if f.concurrency is None else f.concurrency, f.figure, _num(f.a), _num(f.b), _num(f.ratio),
                    _num(f.low), _num(f.high), _num(f.change_pct), _num(f.noise_pct), f.noise, f.verdict, f.note])
    w.writerows(_speedup_csv_rows(comparison))
    w.writerow(["", "overall", "", "", "", "", "", "", "", "", comparison.verdict, comparison.levels_line()])
    return buf.getvalue()


def _loss_cells(run: SweepRun, row: LevelRow) -> list[str]:
    loss = run.row_loss(row)
    main = loss.main_cause if loss is not None else None
    counts: dict[str, int] = {}
    for s in row.stragglers:
        a = run.attributions.get(s.request_id)
        if a is not None:
            counts[a.cause] = counts.get(a.cause, 0) + 1
    return [_num(loss.expected_tok_s) if loss is not None else "", main or "",
            _num(round(loss.share(main), 4)) if loss is not None and main else "",
            ";".join(f"{k}:{v}" for k, v in sorted(counts.items()))]


def _speedup_csv_rows(cmp: Comparison) -> list[list[str | int]]:
    """When either side speculates, per C: ``accept_len`` (A, B), ``speedup_decode_p50`` and ``speedup_agg_tok_s``
    (B over A in ``ratio``, :func:`kimitui.analysis.spec.speedups`); no rows otherwise (old reports unchanged)."""
    if not (has_spec(cmp.a) or has_spec(cmp.b)):
        return []
    rows: list[list[str | int]] = []
    blank = ["", "", "", "", "", ""]
    for c, up, acc_a, acc_b in speedup_rows(cmp.a, cmp.b):
        rows.append([c, "accept_len", _num(acc_a), _num(acc_b), "", *blank, "tokens per verify pass, bonus included"])
        rows.append([c, "speedup_decode_p50", "", "", _num(up.decode), *blank, "per-user decode p50, B over A"])
        rows.append([c, "speedup_agg_tok_s", "", "", _num(up.aggregate), *blank, "aggregate tok/s, B over A"])
    return rows


# --------------------------------------------------------------------------- Markdown


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _clock(t: float | None) -> str:
    return datetime.fromtimestamp(t).strftime("%H:%M:%S") if t is not None else "?"


def _f(v: float | None, digits: int = 0) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:,.{digits}f}"


def _p(p: Percentiles | dict[str, float | None], q: str) -> float | None:
    return p.get(q) if isinstance(p, dict) else getattr(p, q)


def _workload(run: SweepRun) -> str:
    s = run.spec
    parts = [s.mode, f"{s.max_tokens} tokens", "ignore_eos" if s.ignore_eos else "eos honoured", f"prompts {s.prompts}",
             f"levels {','.join(map(str, s.levels))}"]
    if s.repeats > 1:
        parts.append(f"{s.repeats} repeats")
    if s.mode == "rate" and s.rate_rps:
        parts.append(f"{s.rate_rps} req/s")
    return ", ".join(parts)


def _knobs_line(run: SweepRun) -> str:
    if run.knobs is None:
        return "knobs: not recorded (no server_info in the recording)"
    if len(run.knobs) <= 12:
        return "knobs: " + ", ".join(f"{k}={v}" for k, v in sorted(run.knobs.items()))
    return f"knobs: {len(run.knobs)} server args recorded (see --format json)"


def sweep_md(run: SweepRun, stragglers: bool = False) -> list[str]:
    """A sweep's section: its level table, peak, curve, where the throughput went and each cause once; with
    ``stragglers`` every straggler with its cause and evidence too (``kimitui report --stragglers``)."""
    out = [f"### {run.profile or 'unknown profile'} — sweep `{run.sweep_id}`", ""]
    out.append(f"host {run.host} · started {_stamp(run.started)} · {_workload(run)} · outcome "
               f"{run.outcome or 'unfinished (recording ends mid-sweep)'}" + (f" ({run.reason})" if run.reason else ""))
    out.append("")
    out.append(_knobs_line(run))
    out.append("")
    if not run.levels:
        out.append("No level finished.")
        return out
    out += _level_table_md(run)
    peak = run.peak
    if peak:
        out += ["", f"Peak (seed-comparable aggregate, ok levels only): **{peak[1]:,.0f} tok/s at C={peak[0]}**."]
    out += [""] + [f"- {_md_text(line, 400)}" for line in energy_lines(run)]
    ok_rows = [r for r in run.ordered_levels if r.valid]
    chart = line_chart({"aggregate": [(r.concurrency, r.agg_tok_s) for r in ok_rows],
                        "steady": [(r.concurrency, r.steady_tok_s) for r in ok_rows]},
                       flagged={r.concurrency: r.status for r in run.ordered_levels if not r.valid})
    if chart:
        out += ["", "```text", *chart, "```"]
    lost = [(r.concurrency, loss) for r in run.ordered_levels if (loss := run.row_loss(r)) is not None
            and loss.loss_fraction >= SMALL_LOSS]
    if lost:
        out += ["", "Where the throughput went (against each level's own median decode pace):", ""]
        out += [f"- C={c}: {_md_text(loss.sentence())}" for c, loss in lost]
    out += causes_md(run)
    strag = [s for r in run.ordered_levels for s in r.stragglers] if stragglers else []
    if strag:
        gap_at = {q.request_id: q.max_gap_at for r in run.ordered_levels for q in r.requests}
        out += ["", "Stragglers:", ""]
        for s in strag:
            med = f" (median {s.median_decode_tok_s:.0f})" if s.median_decode_tok_s is not None else ""
            at = s.gap_start if s.gap_start is not None else gap_at.get(s.request_id)
            gap = f", longest gap {s.max_gap_s:.1f} s at {_clock(at)}" if s.max_gap_s is not None else ""
            decode = f"decode {s.decode_tok_s:.1f} tok/s" if s.decode_tok_s is not None else "decode ?"
            out.append(f"- C={s.concurrency} `{s.request_id}`: {decode}{med}{gap}" + (f" — {s.reason}" if s.reason else ""))
            a = run.attributions.get(s.request_id)
            if a is not None:
                out.append(f"  - **cause: {_md_text(cause_headline(a))}** ({a.confidence} confidence)")
                out += [f"    - {_md_text(line)}" for line in evidence_lines(a)]
    fails = [r for r in run.ordered_levels if r.n_failed]
    if fails:
        out += ["", "Failures (first message per error class):", ""]
        for r in fails:
            first_errors = r.errors
            out.append(f"- C={r.concurrency}: " + ", ".join(
                f"{k} {v}" + (f" ({_md_text(first_errors[k])})" if k in first_errors else "") for k, v in sorted(r.failures.items())))
    stopped = [(r.concurrency, r.stopped) for r in run.ordered_levels if r.stopped]
    for c, why in stopped:
        out += ["", f"Stopped after C={c}: {why}"]
    return out


def causes_md(run: SweepRun, side: str = "") -> list[str]:
    """Each cause once: how many stragglers it explains, at which levels, its worst example; the rebalances."""
    lines = [cause_line(cc, run) for cc in cause_counts(run)]
    reb = None if side else eplb_line(run)  # a comparison's summary says each side's rebalances already
    if reb:
        lines.append(reb)
    if not lines:
        return []
    title = f"Causes ({side}: {run.profile or run.sweep_id}):" if side else "Causes:"
    return ["", title, ""] + [f"- {_md_text(line, 400)}" for line in lines]


def _level_table_md(run: SweepRun) -> list[str]:
    """The level table, its footnotes and the collapse lines; the accept-length and EPLB columns appear only
    when the sweep has speculative figures or rebalances (an old recording's table is unchanged)."""
    spec, eplb = has_spec(run), has_eplb(run)
    energy = energy_header(run) if shows_energy(run) else []
    collapsed = collapsed_levels(run) if spec else {}
    out = ["| C | status | req | ok | failed | prompt tok | agg tok/s | steady tok/s | decode p50 | p90 | p99 | "
           "TTFT p50 | p99 | TPOT p50 | stragglers |" + (" accept len | accept rate |" if spec else "")
           + (" EPLB |" if eplb else "") + "".join(f" {h} |" for h in energy),
           "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|" + ("--:|--:|" if spec else "")
           + ("--:|" if eplb else "") + "--:|" * len(energy)]
    notes: list[str] = []
    for row in run.ordered_levels:
        dec, ttft, tpot = _pct(row, "decode_tok_s"), _pct(row, "ttft"), _pct(row, "tpot")
        status, notes = _status_cell(row, notes)
        strike = (lambda v: v) if row.valid else (lambda v: v if v == "—" else f"~~{v}~~")
        out.append(
            f"| {row.concurrency} | {status} | {row.n_requests} | {row.n_ok} | {row.n_failed} | "
            f"{_f(row.prompt_tokens_p50)} | {strike(_f(row.agg_tok_s))} | "
            f"{strike(_f(row.steady_tok_s))} | {_f(dec['p50'], 1)} | {_f(dec['p90'], 1)} | {_f(dec['p99'], 1)} | "
            f"{_f(ttft['p50'], 2)} s | {_f(ttft['p99'], 2)} s | {_f(None if tpot['p50'] is None else tpot['p50'] * 1000, 1)} ms | "
            f"{len(row.stragglers)} |" + (f" {_spec_cell(row, collapsed)} | {_rate_cell(row)} |" if spec else "")
            + (f" {_eplb_cell(run, row)} |" if eplb else "")
            + ("".join(f" {c} |" for c in energy_cells(run, row)) if energy else ""))
    notes += [f"- {text}" for text in collapsed.values()]
    return out + ([""] + notes if notes else [])


def _spec_cell(row: LevelRow, collapsed: dict[int, str]) -> str:
    acc = accept_len(row)
    return "—" if acc is None else f"{acc:.2f}" + (" ▼ collapsed" if row.concurrency in collapsed else "")


def _rate_cell(row: LevelRow) -> str:
    rate = accept_rate_p50(row)
    return "—" if rate is None else f"{rate:.0%}"


def _eplb_cell(run: SweepRun, row: LevelRow) -> str:
    reb = run.level_rebalances(row)
    return f"{reb.count} ({reb.total_s:.0f} s)" if reb.count else "—"


STATUS_MARK = {"failed": "✗ **failed**", "aborted": "✗ **aborted**", "cut": "✗ **cut**"}


def _md_text(text: str, limit: int = 200) -> str:
    """A message inside a table or list item: no pipes or newlines to break the Markdown."""
    return " ".join(text.replace("|", "\\|").split())[:limit]


def _status_cell(row: LevelRow, notes: list[str]) -> tuple[str, list[str]]:
    """The level's status with numbered footnotes for why it is not ok and for client distortion."""
    parts = [STATUS_MARK.get(row.status, row.status)]
    if not row.valid:
        notes.append(f"{len(notes) + 1}. C={row.concurrency} {row.status}: {_md_text(row.status_reason or 'no reason recorded')}"
                     " — not a peak, not drawn, not judged.")
        parts.append(f"({len(notes)})")
    if row.client_distorted:
        notes.append(f"{len(notes) + 1}. C={row.concurrency} latency figures distorted by the client: "
                     f"{_md_text(row.client_distorted)}.")
        parts.append(f"⚠ client ({len(notes)})")
    return " ".join(parts), notes


def _change(f: FigureComparison) -> str:
    if f.ratio is None:
        return "—"
    return f"{f.change_pct:+.1f} %"


def _noise(f: FigureComparison) -> str:
    if f.note.startswith("not judged"):
        return "—"
    return f"±{f.noise_pct:.1f} %" if f.noise_pct is not None else "unknown"


MD_VERDICT_WORDS = {**VERDICT_WORDS, "regressed": "**worse**"}


def comparison_md(cmp: Comparison, every_figure: bool = True) -> list[str]:
    """The verdict and its evidence; ``every_figure``: a row per (level, figure), else one row per level."""
    headline = VERDICT_WORDS[cmp.verdict].capitalize()
    out = [f"## Verdict: {headline}", "", f"**{cmp.headline()}**", ""]
    out.append(f"A (reference): {cmp.a.label} from `{cmp.a.source}`  ")
    out.append(f"B (candidate): {cmp.b.label} from `{cmp.b.source}`")
    out.append("")
    lines = cmp.summary_lines()[1:] if every_figure or cmp.verdict == "not_comparable" else _brief_summary(cmp)
    out += [f"- {line.strip()}" for line in lines]
    if cmp.verdict == "not_comparable":
        return out
    out += [""] + (_figure_table_md(cmp) if every_figure else _level_table_cmp_md(cmp))
    out += ["", f"Noise: 95 % interval of B/A from {_noise_how(cmp)}, never narrower than the figure's run-to-run "
            f"floor. Better/worse: the interval excludes no change and the change is at least "
            f"{cmp.min_effect * 100:.0f} %; same: the whole interval lies within ±{cmp.min_effect * 100:.0f} %; "
            f"unsure: the data cannot tell (why and what would settle it are listed above). Figures marked (info) "
            f"do not decide the verdict; a level that is not ok on either side, or that the client distorted, "
            f"is not judged."]
    flagged: dict[int, str] = {}
    for side, run in (("A", cmp.a), ("B", cmp.b)):
        for r in run.ordered_levels:
            if not r.valid:
                flagged[r.concurrency] = " and ".join(filter(None, [flagged.get(r.concurrency), f"{side} {r.status}"]))
    chart = line_chart({
        f"A {cmp.a.profile or cmp.a.sweep_id}": [(r.concurrency, r.agg_tok_s) for r in cmp.a.ordered_levels if r.valid],
        f"B {cmp.b.profile or cmp.b.sweep_id}": [(r.concurrency, r.agg_tok_s) for r in cmp.b.ordered_levels if r.valid],
    }, y_label="agg tok/s", flagged=flagged)
    if chart:
        out += ["", "```text", *chart, "```"]
    return out + _speedup_md(cmp)


UNSURE_SHOWN = 3
"""Unsure figures a brief report names (each with why and what would settle it); ``--stragglers`` names all."""


def _brief_summary(cmp: Comparison) -> list[str]:
    """The summary's sentences less what the level table shows row by row (each level's loss, each figure that
    changed): which levels, the client, the rebalances, B's worst level, the peak, what was not judged, the
    first unsure figures, the stragglers and the knobs."""
    lines = [cmp.levels_line()]
    if client := cmp.client_line():
        lines.append(client)
    lines += cmp.spec_and_eplb_lines()
    lines += cmp.energy_lines()
    lost = [loss for loss in cmp.candidate_losses() if loss.loss_fraction >= SMALL_LOSS]
    if lost:
        worst = max(lost, key=lambda x: (x.loss_fraction, -x.concurrency))
        lines.append(f"B's worst level, C={worst.concurrency}: {worst.sentence()}")
    if cmp.peak is not None and cmp.peak.ratio is not None and cmp.peak_at is not None:
        (ca, va), (cb, vb) = cmp.peak_at
        lines.append(f"{cmp.peak.describe()}: {va:,.0f} tok/s at C={ca} -> {vb:,.0f} tok/s at C={cb}")
    lines += [f"not judged: {lv.not_judged}" for lv in cmp.levels if lv.not_judged]
    peak_said = cmp.peak.describe() if cmp.peak is not None else None
    unsure = [u for u in cmp.unsure_lines() if u != peak_said]
    lines += unsure[:UNSURE_SHOWN]
    if len(unsure) > UNSURE_SHOWN:
        lines.append(f"... and {len(unsure) - UNSURE_SHOWN} more figures unsure (`--stragglers` lists every figure)")
    sa, sb = (sum(lv.stragglers[i] for lv in cmp.levels) for i in (0, 1))
    ra, rb = (sum(lv.requests[i] for lv in cmp.levels) for i in (0, 1))
    lines.append(f"stragglers: {count_of(sa, ra)} requests (A), {count_of(sb, rb)} (B)")
    return lines + [cmp.knobs_text]


def _verdict_cell(f: FigureComparison) -> str:
    return "not judged" if f.note.startswith("not judged") else MD_VERDICT_WORDS.get(f.verdict, f.verdict)


def _level_table_cmp_md(cmp: Comparison) -> list[str]:
    """One row per compared level: the aggregate A, B, its change, noise and verdict, the decode p50 A -> B,
    the stragglers of each side as "3 of 64" and the cause behind most of B's loss (the cockpit's loss cell)."""
    out = ["| C | A agg tok/s | B agg tok/s | change | noise (95 %) | verdict | decode p50 A → B | stragglers A | "
           "stragglers B | B lost most to |", "|--:|--:|--:|--:|--:|---|--:|--:|--:|---|"]
    if cmp.peak is not None:
        f = cmp.peak
        out.append(f"| peak | {_f(f.a)} | {_f(f.b)} | {_change(f)} | {_noise(f)} | {_verdict_cell(f)} | | | | |")
    for lv in cmp.levels:
        figs = {f.figure: f for f in lv.figures}
        agg, dec = figs.get("agg_tok_s"), figs.get("decode_tok_s_p50")
        if agg is None:
            continue
        row = cmp.b.levels.get(lv.concurrency)
        loss = cmp.b.row_loss(row) if row is not None else None
        cell = loss.cell() if loss is not None and loss.loss_fraction >= SMALL_LOSS else "–"
        decode = f"{_f(dec.a, 1)} → {_f(dec.b, 1)}" if dec is not None else "—"
        out.append(f"| {lv.concurrency} | {_f(agg.a)} | {_f(agg.b)} | {_change(agg)} | {_noise(agg)} | "
                   f"{_verdict_cell(agg)} | {decode} | {count_of(lv.stragglers[0], lv.requests[0])} | "
                   f"{count_of(lv.stragglers[1], lv.requests[1])} | {cell} |")
    return out


def _digits(figure: str) -> int:
    """Decimals a comparison table gives a figure: seconds 2, decode 1, J/token and cost 3 (0.58 J, 0.79 USD),
    throughputs none."""
    if figure in ("j_per_token", "cost_per_mtok"):
        return 3
    return 2 if figure.startswith("ttft") else 1 if figure.startswith("decode") else 0


def _figure_table_md(cmp: Comparison) -> list[str]:
    out = ["| C | figure | A | B | change | noise (95 %) | verdict |", "|--:|---|--:|--:|--:|--:|---|"]
    figs = ([cmp.peak] if cmp.peak else []) + cmp.rows()
    for f in figs:
        digits = _digits(f.figure)
        verdict = "not judged" if f.note.startswith("not judged") else MD_VERDICT_WORDS[f.verdict]
        flag = ""
        out.append(f"| {'peak' if f.concurrency is None else f.concurrency} | {f.label} | {_f(f.a, digits)} | "
                   f"{_f(f.b, digits)} | {_change(f)} | {_noise(f)} | {verdict}{flag}"
                   f"{'' if f.primary else ' (info)'} |")
    return out


def _speedup_md(cmp: Comparison) -> list[str]:
    """When either side speculates: per C, B over A in per-user decode p50 and aggregate, and each side's
    accept length (▼ where its acceptance collapsed); nothing otherwise."""
    if not (has_spec(cmp.a) or has_spec(cmp.b)):
        return []
    cols = {side: collapsed_levels(run) for side, run in (("A", cmp.a), ("B", cmp.b))}

    def acc(value: float | None, side: str, c: int) -> str:
        return _f(value, 2) + (" ▼" if c in cols[side] else "")

    out = ["", "Speed-up, B over A at the same C (per-user decode p50 and aggregate tok/s; accept length in tokens "
           "per verify pass, bonus included; ▼ acceptance collapsed):", "",
           "| C | decode p50 | aggregate | accept len A | accept len B |", "|--:|--:|--:|--:|--:|"]
    for c, up, acc_a, acc_b in speedup_rows(cmp.a, cmp.b):
        out.append(f"| {c} | {format_speedup(up.decode)} | {format_speedup(up.aggregate)} | {acc(acc_a, 'A', c)} | "
                   f"{acc(acc_b, 'B', c)} |")
    return out


def _noise_how(cmp: Comparison) -> str:
    kinds = {f.noise for f in cmp.rows()}
    parts = []
    if any("repeats" in k for k in kinds):
        parts.append("the spread between repeats")
    if any("bootstrap" in k for k in kinds):
        parts.append(f"a seeded bootstrap over requests (seed {cmp.seed})")
    return " and ".join(parts) or "nothing (no per-request data)"


def render_md(summaries: list[RecordingSummary], comparison: Comparison | None = None, *,
              stragglers: bool = False) -> str:
    """A report to paste: with a comparison, the verdict, one row per level, the curve, each side's causes once
    and a line per source (one screen of a chat for two 8-level sweeps); ``stragglers`` (``--stragglers``) adds
    every figure's row, each sweep's own tables and every straggler with its cause and evidence."""
    out = ["# kimitui report", ""]
    if comparison is not None:
        out += comparison_md(comparison, every_figure=stragglers)
        if not stragglers:
            return "\n".join(out + _brief_md(comparison, summaries)).rstrip() + "\n"
        out.append("")
    for s in summaries:
        out += [f"## `{s.source}`", ""]
        out.append(f"hosts {', '.join(s.header.hosts) or '—'} · recording started {_stamp(s.header.started)} · "
                   f"{len(s.sweeps)} sweep(s)")
        if s.skipped:
            out.append("")
            out.append(f"Skipped {len(s.skipped)} unreadable line(s): " +
                       "; ".join(f"line {k.line_no}: {k.reason}" for k in s.skipped[:5]))
        for n in s.notes:
            out += ["", f"> note {_clock(n.t)}: {n.text}"]
        for run in s.sweeps:
            out += [""] + sweep_md(run, stragglers)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _brief_md(cmp: Comparison, summaries: list[RecordingSummary]) -> list[str]:
    """After a comparison: each side's causes once, then one line per side saying where it came from."""
    out: list[str] = []
    for side, run in (("A", cmp.a), ("B", cmp.b)):
        out += causes_md(run, side)
    out += ["", "Sources (`--stragglers` for every figure, each sweep's tables and every straggler):", ""]
    for side, run in (("A", cmp.a), ("B", cmp.b)):
        peak = run.peak
        out.append(f"- {side}: `{run.source}`: {run.profile or 'unknown profile'}, sweep `{run.sweep_id}` on host "
                   f"{run.host}, started {_stamp(run.started)}, {_workload(run)}, outcome "
                   f"{run.outcome or 'unfinished'}; {_md_text(_knobs_line(run), 300)}"
                   + (f"; peak (seed-comparable aggregate) {peak[1]:,.0f} tok/s at C={peak[0]}" if peak else ""))
    skipped = sum(len(s.skipped) for s in summaries)
    if skipped:
        out.append(f"- {skipped} unreadable line(s) skipped (`--format text` lists them)")
    return out


# --------------------------------------------------------------------------- plain text


def _columns(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows aligned in columns two spaces apart (numbers right-aligned)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for r in [header, *rows]:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def _plain_status(row: LevelRow) -> str:
    return row.status + (" !client" if row.client_distorted else "")


def sweep_text(run: SweepRun, stragglers: bool = False) -> list[str]:
    out = [f"{run.profile or 'unknown profile'} — sweep {run.sweep_id}: host {run.host}, {_workload(run)}, outcome "
           f"{run.outcome or 'unfinished (recording ends mid-sweep)'}" + (f" ({run.reason})" if run.reason else "")]
    if not run.levels:
        return out + ["  no level finished"]
    spec, eplb = has_spec(run), has_eplb(run)
    collapsed = collapsed_levels(run) if spec else {}
    rows = []
    for row in run.ordered_levels:
        dec, ttft, tpot = _pct(row, "decode_tok_s"), _pct(row, "ttft"), _pct(row, "tpot")
        fig = (lambda v: v) if row.valid else (lambda v: v if v == "—" else f"({v})")
        rows.append([str(row.concurrency), _plain_status(row), str(row.n_requests), str(row.n_failed),
                     _f(row.prompt_tokens_p50), fig(_f(row.agg_tok_s)), fig(_f(row.steady_tok_s)), _f(dec["p50"], 1),
                     _f(ttft["p50"], 2), _f(None if tpot["p50"] is None else tpot["p50"] * 1000, 1),
                     str(len(row.stragglers))] + ([_spec_cell(row, collapsed), _rate_cell(row)] if spec else [])
                    + ([_eplb_cell(run, row)] if eplb else [])
                    + (energy_cells(run, row) if shows_energy(run) else []))
    header = ["C", "status", "req", "failed", "prompt tok", "agg tok/s", "steady tok/s", "decode p50", "TTFT p50 s",
              "TPOT p50 ms", "stragglers"] + (["accept len", "accept rate"] if spec else []) + (["EPLB"] if eplb else [])
    header += energy_header(run) if shows_energy(run) else []
    out += ["  " + line for line in _columns(header, rows, right=set(range(len(header))) - {1})]
    out += [f"  {text}" for text in collapsed.values()]
    for row in run.ordered_levels:
        if not row.valid:
            out.append(f"  C={row.concurrency} {row.status}: {row.status_reason or 'no reason recorded'} "
                       "(figures in parentheses: not a peak, not judged)")
        if row.client_distorted:
            out.append(f"  C={row.concurrency} latency figures distorted by the client: {row.client_distorted}")
        if row.n_failed:
            errors = row.errors
            out.append(f"  C={row.concurrency} failures: " + ", ".join(
                f"{k} {v}" + (f" ({errors[k]})" if k in errors else "") for k, v in sorted(row.failures.items())))
    peak = run.peak
    if peak:
        out.append(f"  peak (seed-comparable aggregate, ok levels only): {peak[1]:,.0f} tok/s at C={peak[0]}")
    out += [f"  {line}" for line in energy_lines(run)]
    lines = [cause_line(cc, run) for cc in cause_counts(run)] + ([reb] if (reb := eplb_line(run)) else [])
    out += [f"  cause: {line}" for line in lines]
    if stragglers:
        for row in run.ordered_levels:
            for s in row.stragglers:
                a = run.attributions.get(s.request_id)
                out.append(f"  straggler C={s.concurrency} {s.request_id}: "
                           + (f"{cause_headline(a)} ({a.confidence} confidence)" if a is not None else s.reason))
    return out


def comparison_text(cmp: Comparison) -> list[str]:
    out = [cmp.summary_lines()[0], f"A {cmp.a.label} from {cmp.a.source}", f"B {cmp.b.label} from {cmp.b.source}"]
    out += [f"  {line.strip()}" for line in cmp.summary_lines()[1:]]
    if cmp.verdict == "not_comparable":
        return out
    rows = []
    for f in ([cmp.peak] if cmp.peak else []) + cmp.rows():
        digits = _digits(f.figure)
        verdict = "not judged" if f.note.startswith("not judged") else VERDICT_WORDS[f.verdict]
        rows.append(["peak" if f.concurrency is None else str(f.concurrency), f.label, _f(f.a, digits),
                     _f(f.b, digits), _change(f), _noise(f),
                     verdict + ("" if f.primary else " (info)")])
    out += [""] + ["  " + line for line in _columns(["C", "figure", "A", "B", "change", "noise (95 %)", "verdict"],
                                                     rows, right={0, 2, 3, 4, 5})]
    if has_spec(cmp.a) or has_spec(cmp.b):
        ups = [[str(c), format_speedup(up.decode), format_speedup(up.aggregate), _f(acc_a, 2), _f(acc_b, 2)]
               for c, up, acc_a, acc_b in speedup_rows(cmp.a, cmp.b)]
        out += ["", "  speed-up, B over A:"] + ["  " + line for line in _columns(
            ["C", "decode p50", "aggregate", "accept len A", "accept len B"], ups, right={0, 1, 2, 3, 4})]
    return out


def render_text(summaries: list[RecordingSummary], comparison: Comparison | None = None, *,
                stragglers: bool = False) -> str:
    """What a terminal or a chat shows: the verdict and the level tables in aligned columns."""
    out: list[str] = []
    if comparison is not None:
        out += comparison_text(comparison) + [""]
    for s in summaries:
        out.append(f"{s.source}: hosts {', '.join(s.header.hosts) or '—'}, {len(s.sweeps)} sweep(s)")
        if s.skipped:
            out.append(f"  skipped {len(s.skipped)} unreadable line(s): " +
                       "; ".join(f"line {k.line_no}: {k.reason}" for k in s.skipped[:5]))
        for run in s.sweeps:
            out += [""] + sweep_text(run, stragglers)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


RENDERERS = {"md": render_md, "json": render_json, "csv": render_csv, "text": render_text}
STRAGGLER_DETAIL = {"md": render_md, "text": render_text}
"""The formats that list every straggler only when asked (``--stragglers``); json and csv always hold them all."""
