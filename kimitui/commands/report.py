"""``kimitui report FILE [--vs FILE2] [--format md|text|json|csv] [--stragglers] [--fail-on-regression]``.

``--sweep A --vs-sweep B`` without ``--vs`` compares two sweeps of one recording
(the cockpit records both sides of a swap in one file).

Exit codes: 0 done; 1 ``--fail-on-regression`` and the verdict is a regression;
2 a file is not a readable recording, has no sweep, or (with
``--fail-on-regression``) the runs are not comparable.
"""

from __future__ import annotations

import argparse
import sys

from kimitui.analysis.cost import CostRates
from kimitui.config import ConfigError, load_config
from kimitui.recording import RecordingError
from kimitui.report.compare import compare
from kimitui.report.sweep_summary import RecordingSummary, pick_sweep, summarize
from kimitui.report.render import RENDERERS, STRAGGLER_DETAIL
from kimitui.report.verdict import DEFAULT_MIN_EFFECT

EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("report", help="level tables, curves and A/B verdicts from recordings")
    p.add_argument("file", metavar="FILE", help="a recording (.jsonl or .jsonl.gz); with --vs, the reference (A)")
    p.add_argument("--vs", metavar="FILE2", help="compare against this recording (the candidate, B)")
    p.add_argument("--format", choices=sorted(RENDERERS), default="md", help="output format (default md)")
    p.add_argument("--sweep", metavar="ID|PROFILE", help="report/compare only this sweep of FILE (default: every sweep; compare the last with results)")
    p.add_argument("--vs-sweep", metavar="ID|PROFILE",
                   help="which sweep of FILE2 (default: the last with results); without --vs, a second sweep "
                        "of FILE to compare with --sweep")
    p.add_argument("--min-effect", type=float, default=DEFAULT_MIN_EFFECT, metavar="FRACTION",
                   help=f"smallest change that counts, beyond noise (default {DEFAULT_MIN_EFFECT})")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0; results are deterministic)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 if B regressed against A (2 if they are not comparable)")
    p.add_argument("--stragglers", action="store_true",
                   help="md and text: every straggler with its cause and evidence, every figure's row and each "
                        "sweep's own tables (default: each cause once, with its counts and worst example)")
    p.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout")
    p.set_defaults(func=run)


def cost_rates(args: argparse.Namespace) -> CostRates | None:
    """The config's ``[cost]`` prices (None: none configured); a bad config raises ConfigError (file:line: field)."""
    return load_config(getattr(args, "config", None)).cost.rates()


def priced(summary: RecordingSummary, rates: CostRates | None) -> RecordingSummary:
    """Every sweep of the summary priced with ``rates`` (cost per million tokens per level)."""
    for sweep in summary.sweeps:
        sweep.set_cost(rates)
    return summary


def run(args: argparse.Namespace) -> int:
    try:
        rates = cost_rates(args)
    except ConfigError as exc:
        print(f"kimitui report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        summaries = [priced(summarize(args.file), rates)]
        comparison = None
        if args.vs is None and args.vs_sweep:  # two sweeps of one recording (e.g. before and after a swap)
            if not args.sweep:
                raise ValueError("--vs-sweep without --vs compares two sweeps of FILE: name the first with --sweep")
            a, b = pick_sweep(summaries[0], args.sweep), pick_sweep(summaries[0], args.vs_sweep)
            summaries[0].sweeps = [a, b]
            comparison = compare(a, b, min_effect=args.min_effect, seed=args.seed)
        else:
            if args.vs:
                summaries.append(priced(summarize(args.vs), rates))
            chosen = [pick_sweep(s, sel) if sel else None for s, sel in zip(summaries, (args.sweep, args.vs_sweep))]
            for s, run_ in zip(summaries, chosen):
                if run_ is not None:  # --sweep / --vs-sweep: report only that sweep
                    s.sweeps = [run_]
            if args.vs:
                comparison = compare(chosen[0] or pick_sweep(summaries[0]), chosen[1] or pick_sweep(summaries[1]),
                                     min_effect=args.min_effect, seed=args.seed)
    except (RecordingError, ValueError) as exc:
        print(f"kimitui report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    detail = STRAGGLER_DETAIL.get(args.format)
    text = (detail(summaries, comparison, stragglers=args.stragglers) if detail is not None
            else RENDERERS[args.format](summaries, comparison))
    if args.output:
        from kimitui.private_files import private_opener

        with open(args.output, "w", encoding="utf-8", opener=private_opener) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    for s in summaries:
        for k in s.skipped:
            print(f"kimitui report: {s.source}: line {k.line_no} skipped: {k.reason}", file=sys.stderr)
    if comparison is not None:
        for line in comparison.summary_lines()[:2]:  # the verdict, and which levels it speaks for (or why not)
            print(f"kimitui report: {line.strip()}", file=sys.stderr)
        if comparison.verdict == "unsure":  # why the data cannot tell, and what would settle it
            peak = comparison.peak
            why = ([peak.describe()] if peak is not None and peak.verdict == "unsure" else []) + comparison.unsure_lines()
            client = comparison.client_line()
            for line in ([client] if client else []) + why[:1]:
                print(f"kimitui report: {line}", file=sys.stderr)
        if args.fail_on_regression:
            if comparison.verdict == "regressed":
                return EXIT_REGRESSION
            if comparison.verdict == "not_comparable":
                return EXIT_BAD_INPUT
    return 0
