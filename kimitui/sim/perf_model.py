"""The scheduler-loop performance model: how long each forward pass takes.

Times are in *simulated* seconds (time-scale 1).  The shape follows what makes
a big MoE decode step expensive on PCIe-only GPUs:

    step(b) = t0 + tx * experts_per_gpu(b) + tt * b (+ attention over the KV in use)

- ``t0``: fixed per-step cost (kernel launches, all-to-all or all-reduce latency
  over PCIe); large for pure TP (an all-reduce per layer), small for EP.
- ``experts_per_gpu(b)``: distinct experts a batch of ``b`` tokens touches
  (top-8 of 384), per GPU; expert weights are read once per step, so decode is
  memory-bound until every expert is touched.
- ``tt``: per-token cost (dispatch/combine bytes, MLA attention, sampling).

Calibrated to the seeds (see ``bench/calibrate_sim.py``): ep8-tuned 65 tok/s at
C=1, ~345 aggregate at C=16, ~1538 at C=256; tp8 26 tok/s at C=1.  EPLB adds a
per-token recorder/dispatch cost and synchronous rebalances every
``eplb_rebalance_num_iterations`` forward passes whose stall is heavy-tailed.
``num_continuous_decode_steps`` is read nowhere (a no-op in SGLang).

Everything random comes from a ``random.Random`` the caller seeds, so a run is
reproducible for a given seed and request order.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from kimitui.sim.settings import ServerSettings
from kimitui.sim.spec_model import SpecModel

NUM_EXPERTS = 384
TOP_K = 8
NUM_LAYERS = 61
HIDDEN = 7168
KV_BYTES_PER_TOKEN = (512 + 64) * NUM_LAYERS * 2  # MLA latent + rope, bf16
WEIGHTS_GB_PER_GPU = 68.1  # INT4 experts + bf16 dense, spread over 8 GPUs
GPU_TOTAL_GB = 95.59


@dataclass(frozen=True)
class ModelParams:
    t0_ms: float
    tx_ms: float
    tt_ms: float
    attn_ms_per_ktok: float
    prefill_fixed_ms: float
    prefill_tok_per_s: float
    eager_factor: float
    eager_fixed_ms: float
    eplb_tok_ms: float
    eplb_fixed_ms: float
    spec_step_factor: float
    spec_draft_ms: float
    spec_tok_ms: float


def tp_share(s: ServerSettings) -> float:
    """Fraction of the MoE that still needs a TP all-reduce: 0 for EP == TP, 1 for pure TP."""
    moe_tp = max(1, s.tp_size // max(1, s.ep_size))
    return 0.0 if s.tp_size <= 1 else (moe_tp - 1) / (s.tp_size - 1)


def default_params(s: ServerSettings) -> ModelParams:
    """Per-profile constants; ``[sim.tuning]`` in a profile overrides any of them by name."""
    f = tp_share(s)
    p = dict(
        t0_ms=12.8 + 23.2 * f,
        tx_ms=2.25,
        tt_ms=0.125 + 0.31 * f,
        attn_ms_per_ktok=0.12,
        prefill_fixed_ms=35.0 + 25.0 * f,
        prefill_tok_per_s=9000.0 - 3000.0 * f,
        eager_factor=1.6,
        eager_fixed_ms=18.0,
        eplb_tok_ms=0.46 if s.enable_eplb else 0.0,
        eplb_fixed_ms=0.4 if s.enable_eplb else 0.0,
        spec_step_factor=1.0 + 0.12 * s.speculative_num_steps,
        spec_draft_ms=1.5 if (s.speculative_algorithm or "").upper() == "DFLASH" else 0.0,
        spec_tok_ms=0.2,
    )
    for key, value in s.tuning.items():
        if key in p:
            p[key] = float(value)
    return ModelParams(**p)


def experts_touched(tokens: int) -> float:
    """Expected distinct experts hit by ``tokens`` tokens routing top-8 of 384."""
    if tokens <= 0:
        return 0.0
    return NUM_EXPERTS * (1.0 - (1.0 - TOP_K / NUM_EXPERTS) ** tokens)


class PerfModel:
    """Forward-pass durations and the KV pool for one profile."""

    def __init__(self, settings: ServerSettings) -> None:
        self.s = settings
        self.p = default_params(settings)
        self.spec = SpecModel(settings) if settings.speculative else None

    # ------------------------------------------------------------------ memory
    @property
    def weights_gb(self) -> float:
        return WEIGHTS_GB_PER_GPU * 8 / max(1, self.s.tp_size)

    @property
    def kv_gb(self) -> float:
        budget = GPU_TOTAL_GB * self.s.mem_fraction_static - self.weights_gb
        return max(0.5, budget - 0.6)

    @property
    def max_total_num_tokens(self) -> int:
        """The KV pool in tokens; ``[sim.tuning] kv_tokens`` makes it small (a test of KV retraction)."""
        forced = self.s.tuning.get("kv_tokens")
        return int(forced) if forced else int(self.kv_gb * 1024**3 / KV_BYTES_PER_TOKEN)

    @property
    def graph_gb(self) -> float:
        return 0.0 if self.s.disable_cuda_graph else 0.35 + self.s.cuda_graph_max_bs * 0.0022

    @property
    def max_running_requests(self) -> int:
        """SGLang caps the requested value by what the token pool can hold."""
        return max(1, min(self.s.max_running_requests, self.max_total_num_tokens // 2))

    def uses_cuda_graph(self, batch: int) -> bool:
        return not self.s.disable_cuda_graph and batch <= self.s.cuda_graph_max_bs

    # ------------------------------------------------------------------ timing
    def decode_step_s(self, batch: int, kv_tokens: int, graph: bool | None = None) -> float:
        """One decode forward pass over ``batch`` running requests holding ``kv_tokens``.

        With speculative decoding it is a verify pass: every request runs its verify window
        (capped under load for DFLASH, see :mod:`kimitui.sim.spec_model`) through the target, so
        the experts touched, the per-token dispatch and the draft tokens' own verify work
        (``spec_tok_ms`` each: logits, sampling, KV writes) grow with the verified tokens, plus the
        drafter's own pass (EAGLE's steps as ``spec_step_factor``, DFLASH's one block pass as
        ``spec_draft_ms``).  ``graph``: whether the step runs as a CUDA graph (default: when the batch fits one).
        The pass is the sum of :meth:`decode_phases_ms` (the power model weighs the same parts).
        """
        return sum(self.decode_phases_ms(batch, kv_tokens, graph).values()) / 1000.0

    def decode_phases_ms(self, batch: int, kv_tokens: int, graph: bool | None = None) -> dict[str, float]:
        """What one decode pass spends its time on, in simulated ms, by kind of work (the parts of
        :meth:`decode_step_s`): ``launch`` (kernel launches, collective latency, eager gaps), ``allreduce``
        (the latency of TP's all-reduce of the MoE, and the network of a multi-node pass), ``allreduce_bytes``
        (its per-token bytes over PCIe), ``a2a`` (EP's dispatch and
        combine), ``experts`` (expert weights read and multiplied), ``tokens`` (per-token compute),
        ``attention`` (the KV in use), ``verify`` and ``draft`` (speculative decoding: the target's check of
        the drafted tokens, the drafter's own passes), ``eplb`` (its
        recorder).  Splits of ``t0_ms`` and ``tt_ms`` into communication and compute follow the TP share
        of the MoE (``default_params``' ``f``); half of EP's per-token cost is its all-to-all."""
        p = self.p
        tokens = self.spec.verify_tokens(batch) if self.spec is not None else batch
        per_gpu = experts_touched(tokens) / max(1, self.s.tp_size)
        f = tp_share(self.s)
        ar_t0 = 23.2 * f / (12.8 + 23.2 * f)  # the all-reduce's part of the fixed cost at the default constants
        ar_tt = 0.31 * f / (0.125 + 0.31 * f)
        tt = p.tt_ms * tokens
        ph = {
            "launch": p.t0_ms * (1.0 - ar_t0),
            "allreduce": p.t0_ms * ar_t0,
            "allreduce_bytes": tt * ar_tt,
            "a2a": tt * (1.0 - ar_tt) * (0.5 if self.s.ep_size > 1 else 0.0),
            "experts": p.tx_ms * per_gpu,
            "tokens": tt * (1.0 - ar_tt) * (0.5 if self.s.ep_size > 1 else 1.0),
            "attention": p.attn_ms_per_ktok * kv_tokens / 1000.0,
            "verify": p.spec_tok_ms * (tokens - batch),  # each drafted token verified: logits, sampling, KV writes
            "eplb": p.eplb_fixed_ms + p.eplb_tok_ms * batch,
            "draft": 0.0,
        }
        if self.spec is not None:  # the drafter's own passes: EAGLE's steps (a share of the target's), DFLASH's block
            ph["draft"] = sum(ph.values()) * (p.spec_step_factor - 1.0) + p.spec_draft_ms
        if not (self.uses_cuda_graph(batch) if graph is None else graph):
            ph = {k: v * p.eager_factor for k, v in ph.items()}
            ph["launch"] += p.eager_fixed_ms
        ph["allreduce"] += 1000.0 * self.internode_s(tokens)
        return ph

    def prefill_s(self, new_tokens: int) -> float:
        p = self.p
        return (p.prefill_fixed_ms + 1000.0 * new_tokens / p.prefill_tok_per_s) / 1000.0 + self.internode_s(new_tokens)

    def internode_s(self, tokens: int) -> float:
        """Multi-node: every layer's all-reduce crosses the network once per pass.  A fixed latency per layer
        plus the hidden states over a ~25 GB/s (200 Gb/s) link; 0 on one node.  ``[sim.tuning]
        internode_ms_per_layer`` and ``internode_gb_s`` tune it."""
        if self.s.nnodes <= 1:
            return 0.0
        per_layer_ms = float(self.s.tuning.get("internode_ms_per_layer", 0.02))
        gb_s = float(self.s.tuning.get("internode_gb_s", 25.0))
        hops = self.s.nnodes - 1
        data_gb = tokens * HIDDEN * 2 * NUM_LAYERS * 2 / 1024**3
        return hops * (NUM_LAYERS * per_layer_ms / 1000.0 + data_gb / gb_s)

    def eplb_stall_s(self, rng: random.Random) -> float:
        """A synchronous EPLB rebalance: usually ~1-3 s, sometimes tens of seconds (heavy tail)."""
        if rng.random() < 0.6:
            return min(6.0, rng.lognormvariate(math.log(1.2), 0.45))
        return min(95.0, max(8.0, rng.lognormvariate(math.log(30.0), 0.55)))

    # ------------------------------------------------------------------ start-up
    def startup_plan(self) -> dict[str, float]:
        """Simulated seconds of each start-up phase (time-scale 1): about 45 s in all."""
        total = self.s.startup_s
        graph = 0.0 if self.s.disable_cuda_graph else 12.5
        plan = {"dist": 3.6, "weights": 24.0, "kv": 1.6, "graph": graph, "draft_graph": 0.4 * graph if self.s.speculative else 0.0, "warmup": 2.2}
        if total is not None:
            k = total / max(1e-9, sum(plan.values()))
            plan = {key: v * k for key, v in plan.items()}
        return plan


def capture_batch_sizes(max_bs: int) -> list[int]:
    """SGLang's CUDA graph capture list, capped at ``cuda_graph_max_bs``."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    out = [b for b in sizes if b <= max_bs]
    if not out or out[-1] != max_bs and max_bs not in out:
        out.append(max_bs)
    return out
