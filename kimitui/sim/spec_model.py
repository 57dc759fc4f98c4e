"""How many drafted tokens a verify pass accepts: the simulated drafter.

A verify pass proposes ``window - 1`` draft tokens per request and the target accepts the
longest correct prefix, plus one bonus token of its own (SGLang counts that bonus in its
``accept len``, so 1.0 means nothing drafted was ever accepted).  Each draft position is
accepted with probability ``alpha`` given the one before it was:

- **the drafter**: DFLASH drafts the whole block in one parallel pass of a block-diffusion
  model and keeps a high per-token acceptance deep into the block; the EAGLE family chains
  ``speculative_num_steps`` autoregressive draft steps.
- **the prompt**: code is more predictable than prose (the seeds' "Write a Python quicksort"
  vs "Explain the theory of relativity"), so it accepts more.
- **the load**: with DFLASH the simulated server runs SGLang's ragged verify with a budget of
  verify tokens per forward pass (``speculative/ragged_verify.py``: each row gets a *cap*,
  reported as ``cap len`` on the Decode line and ``spec_cap_length`` per request).  At C=1 a
  row verifies its whole block of 16; as the running batch grows past the budget the cap
  shrinks (16 -> 8 -> 4 -> 2), so fewer drafted tokens can be accepted per pass and the accept
  length falls with concurrency (16 up to C=16, 8 at C=32, 4 at C=64, 2 from C=96 with the
  default budget of 256): the accept length collapses (kimitui.analysis.spec's rule) from C=64
  and the speed-up operators see at C=1 shrinks to ~1.1x by C=256.  At C=8, verifying 128
  tokens per pass touches nearly every expert on a PCIe MoE (``perf_model.experts_touched``):
  prose then gains nothing, which is the MoE caveat of speculative decoding.  EAGLE runs no
  ragged verify here: its accept length holds at every C and its speed-up fades only with the
  cost of verifying its 4-token window, more gently.

Calibration (an assumption, stated): DFlash's authors report up to 6x lossless acceleration
on Qwen3-8B and ~2.5x EAGLE-3's speed-up (dflash.z-lab.ai, "DFlash: Block Diffusion for Flash
Speculative Decoding", Chen, Liang, Liu, 2026); no published figure exists for Kimi K2.6 on
PCIe GPUs.  Here a block of 16 accepts ~7 tokens per pass on code and ~4.7 on prose at C=1
(alpha 0.88 / 0.80), EAGLE-3 with 4 draft tokens ~2.9 / ~2.5 (alpha 0.78 / 0.68).  On a
PCIe MoE the verify pass of 16 tokens touches ~14 experts per GPU instead of 1
(``perf_model.experts_touched``), so the per-user speed-up at C=1 lands near 2x, well below the
dense 6x: decode is expert-weight-bound there.  ``[sim.tuning]`` overrides ``spec_alpha_code``,
``spec_alpha_prose`` and ``spec_verify_budget`` by name.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kimitui.sim.settings import ServerSettings

CODE_MARKERS = ("python", "code", "function", "implement", "parser", "def ", "class ", "```", "json", "sql")
"""Words that make a prompt code-like (more predictable continuations, higher acceptance)."""

ALPHA: dict[str, tuple[float, float]] = {
    "DFLASH": (0.88, 0.80),
    "EAGLE3": (0.78, 0.68),
    "EAGLE": (0.74, 0.64),
    "NEXTN": (0.80, 0.72),
    "STANDALONE": (0.70, 0.60),
    "NGRAM": (0.62, 0.35),
}
"""Per-token acceptance (code, prose) by algorithm at C=1; unknown algorithms get EAGLE's."""

VERIFY_BUDGET_TOKENS = 256
"""Verify tokens one DFLASH forward pass may spend across the batch before rows are capped."""
MIN_CAP = 2


def is_code(prompt: str) -> bool:
    """Does the prompt ask for code (decides which acceptance the request gets)?"""
    low = prompt.lower()
    return any(marker in low for marker in CODE_MARKERS)


@dataclass
class SpecTally:
    """One request's (or one log interval's) speculative counts, as SGLang keeps them."""

    verify_ct: int = 0
    accepted_tokens: int = 0
    """Tokens emitted by verify passes (accepted drafts + the bonus of each pass)."""
    correct_drafts: int = 0
    proposed_drafts: int = 0
    cap_tokens: int = 0
    correct_hist: list[int] = field(default_factory=list)
    cap_hist: list[int] = field(default_factory=list)

    def add(self, accepted: int, proposed: int, cap: int | None) -> None:
        self.verify_ct += 1
        self.accepted_tokens += accepted + 1
        self.correct_drafts += accepted
        self.proposed_drafts += proposed
        _bump(self.correct_hist, accepted)
        if cap is not None:
            self.cap_tokens += cap
            _bump(self.cap_hist, cap)

    @property
    def accept_length(self) -> float:
        return self.accepted_tokens / self.verify_ct if self.verify_ct else 0.0

    @property
    def accept_rate(self) -> float:
        return self.correct_drafts / self.proposed_drafts if self.proposed_drafts else 0.0

    @property
    def cap_length(self) -> float:
        return self.cap_tokens / self.verify_ct if self.verify_ct else 0.0


def _bump(hist: list[int], i: int) -> None:
    while len(hist) <= i:
        hist.append(0)
    hist[i] += 1


class SpecModel:
    """The drafter of one simulated server: windows, caps and accepted drafts, seeded."""

    def __init__(self, s: ServerSettings) -> None:
        self.s = s
        algo = (s.speculative_algorithm or "EAGLE").upper()
        code, prose = ALPHA.get(algo, ALPHA["EAGLE"])
        self.alpha_code = float(s.tuning.get("spec_alpha_code", code))
        self.alpha_prose = float(s.tuning.get("spec_alpha_prose", prose))
        self.budget = int(s.tuning.get("spec_verify_budget", VERIFY_BUDGET_TOKENS))
        self.ragged = algo == "DFLASH"
        """DFLASH runs ragged verify here: rows are capped under load (``cap len`` is printed)."""

    @property
    def window(self) -> int:
        """Tokens one verify pass runs per request: the block (DFLASH) or the draft tokens (EAGLE)."""
        return max(2, self.s.speculative_num_draft_tokens)

    def drafts_per_round(self) -> int:
        """As 0.5.23's metrics_reporter divides by: ``num_draft_tokens - 1`` (else ``num_steps``)."""
        return self.window - 1

    def cap(self, batch: int) -> int | None:
        """The per-row verify window under ragged verify with a token budget (None: not capped)."""
        if not self.ragged:
            return None
        fair = self.budget // max(1, batch)
        cap = self.window
        while cap > MIN_CAP and cap > fair:
            cap //= 2
        return max(MIN_CAP, cap)

    def alpha(self, code: bool) -> float:
        return self.alpha_code if code else self.alpha_prose

    def verify(self, rng: random.Random, code: bool, cap: int | None) -> tuple[int, int]:
        """One pass for one request: (accepted drafts, proposed drafts) within its window or cap."""
        window = cap if cap is not None else self.window
        proposed = window - 1
        alpha = self.alpha(code)
        accepted = 0
        while accepted < proposed and rng.random() < alpha:
            accepted += 1
        return accepted, self.drafts_per_round()

    def verify_tokens(self, batch: int) -> int:
        """Tokens the target runs in one verify pass over ``batch`` requests."""
        cap = self.cap(batch)
        return batch * (cap if cap is not None else self.window)
