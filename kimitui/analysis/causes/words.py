"""An attribution in words: the headline sentence first, then the evidence, each cause with its share."""

from __future__ import annotations

import re

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.catalogue import label
from kimitui.analysis.causes.tail import pct
from kimitui.analysis.gap_evidence import seconds

LEAD = {"high": "", "medium": "Likely ", "low": "Possibly ", "none": ""}




def _what(a: Attribution) -> str:
    """``the 35.6 s gap`` / ``the 12.4 s slow stretch`` / ``its 3 slow stretches (41.2 s)``."""
    if not a.stretches:
        return "its slow time"
    if len(a.stretches) == 1:
        st = a.stretches[0]
        return f"the {seconds(st.duration_s)} {'gap' if st.gap else 'slow stretch'}"
    total = sum(st.duration_s for st in a.stretches)
    return f"its {len(a.stretches)} slow stretches ({seconds(total)})"


def headline(a: Attribution) -> str:
    """``EPLB rebalance, 35.6 s, covers 99 % of the 35.6 s gap (all 8 GPUs fell from 88–93 % to 8–11 % utilisation,
    PCIe 21 GB/s)``."""
    what = _what(a)
    main = a.share_of(a.cause) if a.known else None
    if main is None:
        near = next((s for s in a.shares if s.cause != "unknown"), None)
        out = f"Unknown: nothing kimitui saw covers {what}"
        if near is not None:
            out = f"Unknown: {label(near.cause)} covers only {pct(near.share)} of {what}, too little to call it the cause"
    else:
        dur = ""
        if len(main.episodes) == 1 and main.episode_s > 0:
            dur = f", {seconds(main.episode_s)}" + (" so far" if main.episode_open else "")
        elif len(main.episodes) > 1:
            dur = f" ×{len(main.episodes)}"
        out = f"{LEAD[a.confidence]}{label(a.cause)}{dur}, covers {pct(main.share)} of {what}"
    if a.gpu_note:
        out += f" ({a.gpu_note})"
    others = [s for s in a.shares if s.cause not in (a.cause, "unknown") and s.share >= 0.1]
    if others:
        out += "; also " + ", ".join(f"{label(s.cause)} {pct(s.share)}" for s in others)
    return out


_FIGURE = re.compile(r"\d+(?:\.\d+)?")


def _largest(said: str) -> float:
    found = _FIGURE.search(said)
    return float(found.group()) if found else 0.0


def fold_alike(evidence: tuple[str, ...], episodes: int = 0) -> list[str]:
    """Evidence worded alike but for its figures is said once, the largest, with how many (issue 32: a client
    that stalled four times read "the load process's event loop ran … s late" four times over).  ``episodes``:
    how many episodes the cause had (the evidence keeps at most four); counted when all are worded alike."""
    groups: dict[str, list[str]] = {}
    for said in evidence:
        groups.setdefault(_FIGURE.sub("#", said), []).append(said)
    out = []
    for same in groups.values():
        many = max(len(same), episodes) if len(groups) == 1 else len(same)
        out.append(same[0] if many == 1 else f"{many} times, the worst: {max(same, key=_largest)}")
    return out


def evidence_lines(a: Attribution) -> list[str]:
    """One line per cause with its share and what showed it, then the notes."""
    out = []
    for s in a.shares:
        if s.cause == "unknown":
            if s.share < 0.05 and len(a.shares) > 1:
                continue  # the edges of a covered gap, not worth a line
            out.append(f"{pct(s.share)} unexplained: no event kimitui received overlaps it")
            continue
        said = "; ".join(fold_alike(s.evidence, len(s.episodes))) if s.evidence else "no detail kept"
        out.append(f"{label(s.cause)} {pct(s.share)}: {said}")
    out.extend(a.notes)
    return out
