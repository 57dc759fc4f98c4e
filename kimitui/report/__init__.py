"""Reports and A/B verdicts from recordings (no Textual; the TUI's compare view uses these too).

* :func:`summarize` — a recording's sweeps (profile, knobs, workload, level rows, requests);
  :func:`sweeps_of` does the same for a list of events (a live session's history);
* :func:`compare` — sweep B vs reference sweep A: per-level ratios with a noise
  estimate and a verdict per figure; ``not_comparable`` when the workloads differ;
* :mod:`kimitui.report.render` — Markdown (with Unicode charts), JSON and CSV.
"""

from kimitui.report.compare import Comparison, FigureComparison, LevelComparison, compare
from kimitui.report.sweep_summary import LevelRow, RecordingSummary, SweepRun, pick_sweep, summarize, sweeps_of
from kimitui.report.verdict import FIGURES, WORKLOAD_FIELDS

__all__ = [
    "FIGURES",
    "WORKLOAD_FIELDS",
    "Comparison",
    "FigureComparison",
    "LevelComparison",
    "LevelRow",
    "RecordingSummary",
    "SweepRun",
    "compare",
    "pick_sweep",
    "summarize",
    "sweeps_of",
]
