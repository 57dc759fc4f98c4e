"""Which GPU each layer's routed tokens land on: the simulated expert load and its balance.

Kimi K2.6 routes every token to 8 of 384 experts in each of its MoE layers (61 layers, the
first one dense: ``first_k_dense_replace = 1``, so layer 0 carries no expert load).  With EP8 each
GPU holds 48 experts of every layer, placed statically (expert ``e`` on GPU ``e // 48``) until
EPLB rebalances.

- **Routing skew.**  Each layer's experts have a popularity (log-normal, seeded): a GPU's share
  of a layer's tokens is the popularity of its 48 experts.  Popularity drifts slowly (a random
  walk on its log every :data:`DRIFT_EVERY` forward passes), so a placement that was even goes
  uneven again.
- **Balancedness**, as SGLang computes it (0.5.23 ``eplb/expert_distribution.py``
  ``compute_utilization_rate``): per layer the mean over GPUs of the tokens they ran, over the
  max; averaged over the MoE layers.  1.0 = even; the static placement of skewed experts gives
  ~0.8.
- **A rebalance** (``rebalance()``, called by the scheduler after its stall) places experts again
  by their current popularity, heaviest first on the least-loaded GPU (48 per GPU), so balance
  jumps to ~0.97 and then drifts down until the next one.

Cheap by design: GPU shares are recomputed only when popularity or placement change; a pass's
counts are its tokens x 8 x the shares, with a little per-cell noise only when asked for
(``counts(..., jitter=True)``, on the passes the server reports).
"""

from __future__ import annotations

import math
import random

NUM_LAYERS = 61
FIRST_MOE_LAYER = 1
NUM_EXPERTS = 384
TOP_K = 8
SKEW_SIGMA = 0.9
"""Spread of log-popularity across a layer's experts."""
DRIFT_SIGMA = 0.27
DRIFT_EVERY = 250
"""Forward passes between two drift steps of the popularity random walk."""


class ExpertRouting:
    """Popularity, placement and per-GPU shares of every MoE layer of one simulated server."""

    def __init__(self, ep_size: int, seed: int) -> None:
        self.ep = max(1, ep_size)
        self.rng = random.Random(seed * 104729 + 3)
        self.log_pop = [[self.rng.gauss(0.0, SKEW_SIGMA) for _ in range(NUM_EXPERTS)] for _ in range(NUM_LAYERS)]
        per_gpu = NUM_EXPERTS // self.ep
        self.place = [[e // per_gpu for e in range(NUM_EXPERTS)] for _ in range(NUM_LAYERS)]
        self.passes = 0
        self._shares: list[list[float]] = []
        self._refresh()

    # ------------------------------------------------------------------ state
    def _refresh(self) -> None:
        shares: list[list[float]] = []
        for layer in range(NUM_LAYERS):
            if layer < FIRST_MOE_LAYER:
                shares.append([0.0] * self.ep)
                continue
            weights = [math.exp(v) for v in self.log_pop[layer]]
            total = sum(weights)
            row = [0.0] * self.ep
            for e, w in enumerate(weights):
                row[self.place[layer][e]] += w / total
            shares.append(row)
        self._shares = shares

    def advance(self, passes: int = 1) -> None:
        """Count forward passes; popularity takes a drift step every :data:`DRIFT_EVERY` of them."""
        before = self.passes // DRIFT_EVERY
        self.passes += passes
        steps = self.passes // DRIFT_EVERY - before
        if steps <= 0:
            return
        sigma = DRIFT_SIGMA * math.sqrt(steps)
        for layer in range(FIRST_MOE_LAYER, NUM_LAYERS):
            row = self.log_pop[layer]
            for e in range(NUM_EXPERTS):
                row[e] += self.rng.gauss(0.0, sigma)
        self._refresh()

    def rebalance(self) -> None:
        """EPLB: place each layer's experts by current popularity, heaviest first on the lightest GPU."""
        cap = NUM_EXPERTS // self.ep
        for layer in range(FIRST_MOE_LAYER, NUM_LAYERS):
            order = sorted(range(NUM_EXPERTS), key=lambda e: -self.log_pop[layer][e])
            load = [0.0] * self.ep
            used = [0] * self.ep
            for e in order:
                g = min((g for g in range(self.ep) if used[g] < cap), key=lambda g: load[g])
                self.place[layer][e] = g
                load[g] += math.exp(self.log_pop[layer][e])
                used[g] += 1
        self._refresh()

    # ------------------------------------------------------------------ readings
    def counts(self, tokens: int, *, jitter: bool = False) -> list[list[int]]:
        """Per layer, per GPU: the token-expert assignments one pass of ``tokens`` tokens made."""
        routed = tokens * TOP_K
        out: list[list[int]] = []
        for row in self._shares:
            if jitter and routed:
                out.append([max(0, round(routed * s * (1.0 + self.rng.gauss(0.0, 0.04)))) for s in row])
            else:
                out.append([round(routed * s) for s in row])
        return out

    def balancedness(self, counts: list[list[int]] | None = None) -> float:
        """SGLang's balancedness of ``counts`` (default: the expected shares now)."""
        rows = counts if counts is not None else self._shares
        rates = [sum(r) / len(r) / max(r) for r in rows if r and max(r) > 0]
        return sum(rates) / len(rates) if rates else 1.0
