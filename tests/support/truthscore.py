"""Scoring an attribution against the simulator's ground truth (``KIMITUI_SIM_TRUTH``, kimitui/sim/truth.py).

Shared by tests/test_causes_sim.py and bench/attribution_accuracy.py: a straggler's true cause is the truth
record that overlaps its slow stretches most (per-request records only for the requests they name), and
none when no record covers a fifth of its slow time (ordinary unevenness, not scored).  An injected
per-request stall shows nowhere a host would show it, so the right answer for it is ``unknown``.
"""

from __future__ import annotations

import json
from pathlib import Path

from kimitui.analysis.causes.attribute import Attribution

EXPECTED = {"injected_stall": "unknown"}
NOT_STALLS = frozenset({"eplb_skipped"})


def read_truth(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def truth_of(a: Attribution, records: list[dict]) -> str | None:
    """The truth record that overlaps the straggler's slow stretches most, or None (ordinary unevenness)."""
    best, best_s = None, 0.0
    for rec in records:
        if rec["cause"] in NOT_STALLS:
            continue
        ids = rec.get("request_ids")
        if ids is not None and a.request_id not in ids:
            continue
        s = sum(max(0.0, min(st.end, rec["end"]) - max(st.start, rec["start"])) for st in a.stretches)
        if s > best_s:
            best, best_s = rec["cause"], s
    lost = sum(st.duration_s for st in a.stretches)
    return best if best is not None and best_s >= 0.2 * lost else None


def right_answer(true: str) -> str:
    return EXPECTED.get(true, true)
