"""The simulated GPUs' power draw: what each kind of work in a forward pass costs, in watts.

A decode pass is the sum of its parts (:meth:`PerfModel.decode_phases_ms`): kernel launches
and collective latency, TP's all-reduce, EP's all-to-all, the experts' weights, per-token
compute, attention over the KV, speculative verify and draft work, EPLB's recorder.  Each part
draws its own power above the GPU's idle-with-weights draw; a pass draws the time-weighted mean
of its parts.  So:

- power rises with the batch: at C=1 a pass is mostly launches and collective latency (SMs
  waiting) and a GEMV over one expert's weights (memory-bound); a big batch spends its pass on
  many experts' GEMMs with several tokens each (compute-heavy) and on per-token work;
- TP8 spends a third of a small pass in its all-reduce over PCIe (NCCL's copy kernels and
  the links busy, the tensor cores not), so it draws less per GPU than EP8 for a pass that
  lasts longer: more joules per token;
- a drafter adds its own passes and the verify work of every drafted token (compute);
- a GPU that waits draws little: between passes, during an EPLB rebalance (expert weights
  copied over PCIe while no kernel runs), in a stuck collective.

What is known and what is modelled (docs/power-model.md says it at length): the 600 W board
power limit of the RTX PRO 6000 Blackwell Server Edition is the datasheet's
(/work/shared/reference/gpu-anchors.md, section 3.5); the idle draws and every watt figure
per part are modelled, chosen so a busy GPU lands between ~250 W (C=1) and ~500 W (C=256)
and only a hot rank or a big speculative batch reaches the cap.  ``[sim.tuning]`` overrides
any of them by name (``power_<part>_w``, ``power_idle_w``, ``power_loaded_idle_w``,
``power_experts_compute_w``, ``power_rebalance_w``).
"""

from __future__ import annotations

from kimitui.sim.gpustate import GPU_POWER_LIMIT_W, IDLE_POWER_W
from kimitui.sim.perf_model import TOP_K, PerfModel, experts_touched

POWER_CAP_W = GPU_POWER_LIMIT_W
"""The board power limit (datasheet: 600 W for the Workstation and the Server Edition)."""
IDLE_W = IDLE_POWER_W
"""Modelled: an idle card with nothing in its memory (P8)."""
LOADED_IDLE_W = 92.0
"""Modelled: an idle card holding ~85 GB of weights and KV pool, clocks up (P2)."""

PART_W: dict[str, float] = {
    "launch": 90.0,      # launch gaps, collective latency, host sync: the SMs mostly wait
    "allreduce": 150.0,  # an all-reduce's latency: NCCL kernels spinning on the PCIe round trips
    "allreduce_bytes": 300.0,  # its bytes: copy/reduce kernels and the links busy, tensor cores idle
    "a2a": 230.0,        # EP dispatch and combine over PCIe
    "experts": 330.0,    # expert weights streamed from GDDR7 (memory-bound); rises to power_experts_compute_w
    "tokens": 480.0,     # per-token GEMMs, MLA projections, sampling: compute
    "attention": 380.0,  # reading the KV in use: memory-bound
    "verify": 460.0,     # drafted tokens' logits, sampling, KV writes
    "draft": 430.0,      # the drafter's own passes
    "eplb": 340.0,       # the expert-load recorder's gathers and counts over every token's top-k
}
"""Modelled watts above :data:`LOADED_IDLE_W` while a GPU does only that part of a pass."""
EXPERTS_COMPUTE_W = 480.0
"""Modelled: the experts' part once each expert multiplies many tokens (compute-bound GEMMs)."""
EXPERT_TOKENS_HALF = 8.0
"""Tokens per touched expert at which the experts' part is half-way from memory- to compute-bound."""
REBALANCE_W = 40.0
"""Modelled, above loaded idle: an EPLB rebalance copies expert weights over PCIe while no kernel runs."""


class PowerModel:
    """The power a GPU of one profile draws doing a decode pass, or waiting."""

    def __init__(self, perf: PerfModel) -> None:
        self.perf = perf
        tune = perf.s.tuning
        self.idle_w = float(tune.get("power_idle_w", IDLE_W))
        self.loaded_idle_w = float(tune.get("power_loaded_idle_w", LOADED_IDLE_W))
        self.part_w = {k: float(tune.get(f"power_{k}_w", v)) for k, v in PART_W.items()}
        self.experts_compute_w = float(tune.get("power_experts_compute_w", EXPERTS_COMPUTE_W))
        self.rebalance_w = float(tune.get("power_rebalance_w", REBALANCE_W))
        self.cap_w = POWER_CAP_W

    def experts_w(self, tokens: int) -> float:
        """The experts' part: a GEMV over one token is memory-bound; many tokens per expert make it compute."""
        touched = experts_touched(tokens)
        per_expert = tokens * TOP_K / touched if touched else 0.0
        share = per_expert / (per_expert + EXPERT_TOKENS_HALF)
        return self.part_w["experts"] + (self.experts_compute_w - self.part_w["experts"]) * share

    def pass_w(self, batch: int, kv_tokens: int, graph: bool | None = None) -> float:
        """Mean power of one GPU over a decode pass of ``batch`` requests holding ``kv_tokens``, uncapped."""
        if batch <= 0:
            return self.loaded_idle_w
        parts = self.perf.decode_phases_ms(batch, kv_tokens, graph)
        total = sum(parts.values())
        spec = self.perf.spec
        weights = dict(self.part_w, experts=self.experts_w(spec.verify_tokens(batch) if spec else batch))
        return self.loaded_idle_w + sum(ms * weights[k] for k, ms in parts.items()) / total

    def pass_joules(self, batch: int, kv_tokens: int) -> float:
        """Energy of one decode pass over all the server's GPUs (capped power times the pass's length)."""
        watts = min(self.cap_w, self.pass_w(batch, kv_tokens))
        return watts * self.perf.s.gpus_per_node * self.perf.decode_step_s(batch, kv_tokens)

    def waiting_w(self, rebalancing: bool) -> float:
        """A loaded GPU between passes (or in a stuck collective), or copying experts during a rebalance."""
        return self.loaded_idle_w + (self.rebalance_w if rebalancing else 0.0)
