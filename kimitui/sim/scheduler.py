"""One scheduler loop drives every request, like SGLang's: prefill, then decode steps.

A single asyncio task runs forward passes back to back.  Each pass takes the
time :class:`PerfModel` gives it (divided by the time-scale) and, when it ends,
hands every request in the batch its new token(s).  HTTP handlers only wait on
their request's buffer, so 1000 streams cost one loop, not 1000 tasks ticking.

Continuous batching: waiting requests are admitted by a prefill pass (up to
``chunked_prefill_size`` new tokens, up to ``max_running_requests`` running; a
prompt longer than the budget left is cut and goes on in the next passes, which
run ahead of decode), which also yields their first token; decode passes advance
all running requests.  EPLB rebalances every ``eplb_rebalance_num_iterations`` forward
passes and blocks the loop while it runs, as SGLang's does.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kimitui.sim.balance_report import BalanceReport
from kimitui.sim.episodes import Episode, Episodes
from kimitui.sim.gpustate import NUM_GPUS
from kimitui.sim.logfmt import PdDecodeCounts, PdPrefillCounts, SimLog, decode_line, prefill_line
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.settings import ServerSettings
from kimitui.sim.spec_model import SpecTally, is_code
from kimitui.sim.textgen import TokenStream
from kimitui.sim.truth import Truth


INIT_NEW_TOKEN_RATIO = 0.7  # SGLang's defaults: the share of max_new_tokens reserved per request
MIN_NEW_TOKEN_RATIO = 0.1
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600
CLIP_MAX_NEW_TOKENS_ESTIMATION = 4096
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS


class SimClock:
    """Simulated time: wall time since start, times the time-scale."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._t0 = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.scale

    def real(self, sim_s: float) -> float:
        return sim_s / self.scale

    async def sleep(self, sim_s: float) -> None:
        await asyncio.sleep(max(0.0, sim_s / self.scale))


@dataclass(eq=False)
class Req:
    """One generation request as the scheduler sees it."""

    rid: str
    prompt_text: str
    prompt_tokens: int
    max_new_tokens: int
    target: int
    """Tokens until it ends: the natural answer length, or ``max_new_tokens`` if smaller / ignore_eos."""
    tokens: TokenStream
    stop: tuple[str, ...] = ()
    drop_at: int | None = None
    """Fault: the connection is cut after this many tokens."""
    stall_at: int | None = None
    stall_s: float = 0.0
    client_id: str | None = None
    """The client's ``X-Request-ID`` (the ground truth names requests by it)."""
    phantom: bool = False
    """Another client's request nobody reads (a prefill surge's long prompts)."""
    bootstrap_room: int | None = None
    """PD: the room the router gave it (a prefill server prefills it only, a decode server pulls its KV)."""
    # -- filled in while it runs
    generated: int = 0
    pending: list[str] = field(default_factory=list)
    pending_tokens: int = 0
    text_tail: str = ""
    finished: bool = False
    finish_reason: str | None = None
    matched_stop: str | int | None = None
    dropped: bool = False
    aborted: bool = False
    stalled_until: float = 0.0
    retracted_at: float | None = None
    """Wall time it was sent back to the queue (KV pool full), until its prefill again ends."""
    prefilled: int = 0
    """Tokens of ``kv_tokens`` already prefilled while its prefill runs in chunks."""
    spec: SpecTally = field(default_factory=SpecTally)
    """This request's speculative counts (``sglext.spec_tokens_details``)."""
    code: bool | None = None
    """Does the prompt ask for code (higher draft acceptance)? Decided when submitted."""
    t_arrival: float = field(default_factory=time.monotonic)
    t_first: float | None = None
    t_queued: float | None = None
    """monotonic() it was last sent back to the queue (a retraction); its arrival otherwise."""
    _waiter: asyncio.Future[None] | None = None

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.generated

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_chunk(self) -> tuple[list[str], int, bool]:
        """Wait for new tokens: (pieces, token count, finished)."""
        while not self.pending and not self.finished:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        pieces, n = self.pending, self.pending_tokens
        self.pending, self.pending_tokens = [], 0
        return pieces, n, self.finished and not self.pending

    def abort(self) -> None:
        """The client went away: stop generating for it."""
        self.aborted = True


@dataclass
class SchedStats:
    """What the scheduler is doing now, for /metrics, /v1/loads and the GPU state."""

    running: int = 0
    queue: int = 0
    kv_tokens: int = 0
    token_usage: float = 0.0
    last_gen_throughput: float = 0.0
    cuda_graph: bool = True
    batch: int = 0
    in_rebalance: bool = False
    rebalances: int = 0
    forward_passes: int = 0
    busy_until: float = 0.0
    """monotonic() until which the GPUs are computing (a pass in flight)."""
    tok_per_s_real: float = 0.0
    prefill_tokens_total: int = 0
    generated_total: int = 0
    spec_accept_length: float = 0.0
    spec_accept_rate: float = 0.0
    spec_cap_length: float = 0.0
    spec_verify_total: int = 0
    """Verify passes since start (all requests): the denominator of the lifetime accept length."""
    spec_accepted_total: int = 0
    retracted_reqs: int = 0
    """Requests retracted (KV pool full) in the last stats-log interval: 0.5.18 ``metrics_reporter`` sets
    ``sglang:num_retracted_reqs`` to this at each Decode line and starts counting again."""
    prefill_passes: int = 0
    decode_passes: int = 0
    decode_graph_passes: int = 0
    """Decode passes that ran a CUDA graph (``sglang:cuda_graph_passes_total{mode="decode_cuda_graph"}``)."""
    busy_real_s: float = 0.0
    """Real seconds spent in forward passes since start (``sglang:fwd_occupancy`` is its share of a window)."""
    new_token_ratio: float = 0.0
    balancedness: float | None = None
    """Expert balance now (expected, 1.0 = even), where the server tracks it."""
    hung: bool = False
    frozen: bool = False
    """The loop is stuck for a while (episode ``server_unhealthy``): /health fails, the GPUs idle."""
    frozen_since: float = 0.0
    """Wall time the loop stuck (the last output the server's front end received)."""
    episode: str | None = None
    """The episode fault running now (kimitui/sim/episodes.py), for the GPU model."""
    episode_gpu: int = 0
    episode_slowdown: float = 1.0


class Scheduler:
    """The single loop that advances every request."""

    def __init__(
        self,
        settings: ServerSettings,
        model: PerfModel,
        log: SimLog,
        clock: SimClock,
        on_fatal: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.s = settings
        self.model = model
        self.log = log
        self.clock = clock
        self.on_fatal = on_fatal
        self.rng = random.Random(settings.seed * 7919 + 17)
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.stats = SchedStats()
        self.max_running = model.max_running_requests
        self.max_total = model.max_total_num_tokens
        self._wake = asyncio.Event()
        self._decode_iters = 0
        self._log_tokens = 0
        self._log_t = time.monotonic()
        self._log_spec = SpecTally()
        self.balance = BalanceReport(settings) if settings.reports_balance else None
        self.new_token_ratio = INIT_NEW_TOKEN_RATIO
        self.hang_at: float | None = None
        """Sim time from which the loop hangs (fault ``hang``)."""
        self.truth = Truth()
        self.episodes = Episodes(settings)
        self.chunked: Req | None = None
        """The request whose prefill runs in chunks (SGLang's ``chunked_req``): in no queue meanwhile."""
        self._prefill_log_t = time.perf_counter()
        self._surges: list[tuple[float, list[Req]]] = []
        """Prefill surges under way: (wall start, their phantom requests)."""
        self.pd_prefill_counts: Callable[[], PdPrefillCounts] | None = None
        """A PD prefill server's queues for its Prefill lines (set by kimitui/sim/pd.py)."""
        self.pd_decode_counts: Callable[[], PdDecodeCounts] | None = None
        """A PD decode server's queues for its Decode lines (set by kimitui/sim/pd.py)."""
        self.on_queue_wait: Callable[[float], None] | None = None
        """Told each request's wait in the queue (seconds) as it leaves it (``sglang:queue_time_seconds``)."""
        self._retracted_since_log = 0

    # ------------------------------------------------------------------ requests
    def submit(self, req: Req) -> None:
        if req.code is None:
            req.code = is_code(req.prompt_text)
        self.waiting.append(req)
        self.stats.queue = len(self.waiting)
        self._wake.set()

    def submit_prefilled(self, req: Req) -> None:
        """PD decode: a request whose KV came from the prefill server joins the running batch with the
        first token the prefill server computed (the next decode step makes the second)."""
        if req.code is None:
            req.code = is_code(req.prompt_text)
        self.running.append(req)
        self._give(req, 1)
        self._retire()
        self._update_stats(batch=self.stats.batch)
        self._wake.set()

    def drop_all(self) -> None:
        """The server is going away: every request's connection is cut (as when SGLang dies)."""
        for req in [*self.running, *self.waiting, *([self.chunked] if self.chunked is not None else [])]:
            req.dropped = req.finished = True
            req.finish_reason = "abort"
            req._wake()
        self.running, self.waiting, self.chunked = [], deque(), None

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running and self.chunked is None

    # ------------------------------------------------------------------ the loop
    async def run(self) -> None:
        deadline = time.monotonic()
        while True:
            self._drop_aborted()
            if self.idle:
                self._wake.clear()
                self._update_stats(batch=0)
                self.stats.last_gen_throughput = 0.0  # 0.5.23's idle metrics zero the gauge (metrics_reporter.py)
                await self._wake.wait()
                deadline = time.monotonic()
                continue
            if self.hang_at is not None and self.clock.now() >= self.hang_at:
                await self._hang()
                return
            if self.episodes.enabled and await self._episode():
                deadline = time.monotonic()
            work = self._plan_prefill()
            if work:
                formed = self._prefill_stats(work)
                deadline = await self._pass(deadline, self.model.prefill_s(sum(n for _, n in work)))
                self.stats.prefill_passes += 1
                self._finish_prefill(work)
                self._log_prefill(formed)  # after the pass, as SGLang's process_batch_result_prefill
            else:
                self._retract_if_full()
                batch = [r for r in self.running if r.stalled_until <= self.clock.now()]
                if not batch:
                    await self._wait_stalled()
                    deadline = time.monotonic()
                    continue
                kv = sum(r.kv_tokens for r in self.running)
                duration = self._decode_s(len(batch), kv)
                self.stats.batch = len(batch)
                deadline = await self._pass(deadline, duration)
                self.stats.decode_passes += 1
                self.stats.decode_graph_passes += int(self.stats.cuda_graph)
                self._finish_decode(batch)
                self._report_balance(len(batch))
            self.stats.forward_passes += 1
            if self.s.enable_eplb and self.stats.forward_passes % self.s.eplb_rebalance_num_iterations == 0:
                deadline = await self._rebalance()

    async def _pass(self, deadline: float, sim_s: float) -> float:
        """Let one forward pass's time go by; returns the next deadline (no drift, bounded debt)."""
        now = time.monotonic()
        deadline = max(deadline, now - 0.2) + self.clock.real(sim_s)
        self.stats.busy_real_s += self.clock.real(sim_s)
        self.stats.busy_until = deadline
        delay = deadline - now
        await asyncio.sleep(delay if delay > 0 else 0)
        return deadline

    async def _wait_stalled(self) -> None:
        until = min(r.stalled_until for r in self.running)
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, self.clock.real(until - self.clock.now())))
        except TimeoutError:
            pass

    def _drop_aborted(self) -> None:
        if any(r.aborted for r in self.running):
            self.running = [r for r in self.running if not r.aborted]
        if any(r.aborted for r in self.waiting):
            self.waiting = deque(r for r in self.waiting if not r.aborted)
        if self.chunked is not None and self.chunked.aborted:
            self.chunked = None

    # ------------------------------------------------------------------ prefill
    def _plan_prefill(self) -> list[tuple[Req, int]]:
        """The next prefill batch, (request, tokens this pass), as 0.5.23 ``managers/schedule_policy.py``
        ``PrefillAdder`` forms it: the request being chunked first (``add_chunked_req``), then waiting ones
        while the ``chunked_prefill_size`` budget lasts; one longer than the budget left is cut to it
        (``add_one_req``) and goes on in the next batch, ahead of any decode."""
        batch: list[tuple[Req, int]] = []
        size = self.s.chunked_prefill_size
        budget = size if size > 0 else self.max_total  # -1: chunked prefill off, each prompt whole
        # Like SGLang: admit while the pool holds what is in use plus an estimate of what the
        # running requests will still write (remaining max_new_tokens x new_token_ratio).
        reserved = sum(self._reservation(r) for r in self.running)
        if self.chunked is not None:
            req = self.chunked
            n = min(budget, req.kv_tokens - req.prefilled)
            batch.append((req, n))
            budget -= n
            reserved += self._reservation(req)
        while budget > 0 and self.waiting and len(self.running) + len(batch) < self.max_running:
            req = self.waiting[0]
            if reserved + self._reservation(req) > self.max_total and (self.running or batch):
                break  # would not fit in the KV pool: wait for others to finish
            self.waiting.popleft()
            if self.on_queue_wait is not None:
                self.on_queue_wait(time.monotonic() - (req.t_queued or req.t_arrival))
            n = min(budget, req.kv_tokens)
            batch.append((req, n))
            budget -= n
            reserved += self._reservation(req)
            if n < req.kv_tokens:
                self.chunked = req
        return batch

    def _reservation(self, req: Req) -> int:
        remaining = min(req.max_new_tokens - req.generated, CLIP_MAX_NEW_TOKENS_ESTIMATION)
        return req.kv_tokens + int(remaining * self.new_token_ratio)

    def _retract_if_full(self) -> None:
        """KV pool full: send the latest-admitted requests back to the queue (they re-prefill later)."""
        kv = sum(r.kv_tokens for r in self.running)
        if kv + len(self.running) <= self.max_total:
            self._decay_ratio()
            return
        retracted: list[Req] = []
        while self.running and kv + len(self.running) > self.max_total * 0.9 and len(self.running) > 1:
            req = self.running.pop()
            kv -= req.kv_tokens
            retracted.append(req)
        now = time.time()
        self._retracted_since_log += len(retracted)
        for req in retracted:
            req.retracted_at, req.prefilled = now, 0  # its KV is freed: it prefills all over again
            req.t_queued = time.monotonic()
        self.waiting.extendleft(retracted)  # reversed back: the oldest retracted goes first
        old = self.new_token_ratio
        # 0.5.23 scheduler_components/new_token_ratio_tracker.py estimate_new_token_ratio_after_retract
        kept = self.running
        self.new_token_ratio = min(1.0, (sum(r.generated for r in kept) + RETRACT_DECODE_STEPS * len(kept))
                                   / (sum(r.max_new_tokens for r in kept) + 1))
        self.log.line(
            f"KV cache pool is full. Retract requests. #retracted_reqs: {len(retracted)}, "
            f"#new_tokens_gained: {sum(r.kv_tokens for r in retracted)}, #new_token_ratio: {old:.4f} -> {self.new_token_ratio:.4f}",
            rank=0,
        )

    def _decay_ratio(self) -> None:
        self.new_token_ratio = max(MIN_NEW_TOKEN_RATIO, self.new_token_ratio - NEW_TOKEN_RATIO_DECAY)

    def _prefill_stats(self, batch: list[tuple[Req, int]]) -> dict[str, int]:
        """What 0.5.23 ``managers/scheduler.py`` ``get_new_batch_prefill`` keeps for the Prefill line as it
        forms the batch (``PrefillStats.from_adder``): the running count, the tokens still to prefill
        (``_get_num_pending_tokens``: the queue plus what the chunked request has left after this chunk)."""
        left = self.chunked.kv_tokens - self.chunked.prefilled if self.chunked is not None else 0
        left -= next((n for r, n in batch if r is self.chunked), 0)
        return {"new_seq": len(batch), "new_token": sum(n for _, n in batch), "running": len(self.running),
                "pending_token": sum(r.kv_tokens for r in self.waiting) + left}

    def _log_prefill(self, formed: dict[str, int]) -> None:
        """0.5.23 ``scheduler_components/metrics_reporter.py`` ``report_prefill_stats``: printed when the
        batch's result is processed (``process_batch_result_prefill``), i.e. after its forward pass; the
        queue and token usage as they are then, the input throughput over the time since the last Prefill
        line (``gap_latency``)."""
        now = time.perf_counter()
        gap, self._prefill_log_t = now - self._prefill_log_t, now
        kv = sum(r.kv_tokens for r in self.running) + (self.chunked.prefilled if self.chunked is not None else 0)
        self.log.line(
            prefill_line(
                new_seq=formed["new_seq"],
                new_token=formed["new_token"],  # a retracted request recomputes its output too
                cached_token=0,
                token_usage=kv / self.max_total,
                running=formed["running"],
                queue=len(self.waiting),
                pending_token=formed["pending_token"],
                cuda_graph=False,
                input_throughput=formed["new_token"] / gap if gap > 0 else 0.0,
                pd=self.pd_prefill_counts() if self.pd_prefill_counts is not None else None,
            ),
            rank=0,
        )

    def _finish_prefill(self, batch: list[tuple[Req, int]]) -> None:
        """The pass is over: requests whose prompt is all in take their first token and join the running
        batch; the chunked one waits for its next chunk."""
        done: list[Req] = []
        for req, n in batch:
            req.prefilled += n
            self.stats.prefill_tokens_total += n
            if req.prefilled >= req.kv_tokens:
                done.append(req)
                if self.chunked is req:
                    self.chunked = None
        self.running.extend(done)
        now = time.time()
        for req in done:
            req.prefilled = 0
            if req.retracted_at is not None:
                self.truth.record("kv_retract", req.retracted_at, now, [req.client_id or req.rid])
                req.retracted_at = None
            self._give(req, 1)
        self._retire()
        self._end_surges(now)
        self._update_stats(batch=len(batch))

    # ------------------------------------------------------------------ decode
    def _finish_decode(self, batch: list[Req]) -> None:
        made = 0
        spec = self.model.spec
        cap = spec.cap(len(batch)) if spec is not None else None
        for req in batch:
            if req.finished:
                continue
            n = 1
            if spec is not None:
                accepted, proposed = spec.verify(self.rng, bool(req.code), cap)
                n = accepted + 1
                req.spec.add(accepted, proposed, cap)
                self._log_spec.add(accepted, proposed, cap)
                self.stats.spec_verify_total += 1
                self.stats.spec_accepted_total += n
            made += self._give(req, n)
        self._log_tokens += made
        self._decode_iters += 1
        self._retire()
        self._update_stats(batch=len(batch))
        if self._decode_iters % self.s.decode_log_interval == 0:
            self._log_decode()

    def _give(self, req: Req, n: int) -> int:
        """Append up to ``n`` tokens to ``req``; returns how many it took."""
        n = min(n, req.target - req.generated)
        start = req.generated
        made = 0
        for i in range(start, start + n):
            piece = req.tokens.piece(i)
            req.pending.append(piece)
            made += 1
            if req.stop:
                req.text_tail = (req.text_tail + piece)[-64:]
                hit = next((s for s in req.stop if s in req.text_tail), None)
                if hit is not None:
                    req.finished, req.finish_reason, req.matched_stop = True, "stop", hit
                    break
        req.generated += made
        req.pending_tokens += made
        self.stats.generated_total += made
        if req.t_first is None:
            req.t_first = time.monotonic()
        if not req.finished and req.generated >= req.target:
            req.finished = True
            req.finish_reason = "length" if req.target >= req.max_new_tokens else "stop"
        if req.drop_at is not None and req.generated >= req.drop_at and not req.finished:
            req.dropped = req.finished = True
            req.finish_reason = "abort"
        if req.stall_at is not None and req.generated >= req.stall_at and not req.finished:
            req.stall_at = None
            req.stalled_until = self.clock.now() + req.stall_s
            now = time.time()
            self.truth.record("injected_stall", now, now + self.clock.real(req.stall_s), [req.client_id or req.rid])
        req._wake()
        return made

    def _retire(self) -> None:
        if any(r.finished for r in self.running):
            self.running = [r for r in self.running if not r.finished]

    def _log_decode(self) -> None:
        now = time.monotonic()
        dt = max(1e-9, now - self._log_t)
        throughput = self._log_tokens / dt
        tally = self._log_spec
        accept_len = accept_rate = cap_len = None
        if self.s.speculative and tally.verify_ct:
            accept_len, accept_rate = tally.accept_length, tally.accept_rate
            cap_len = tally.cap_length or None
            self.stats.spec_accept_length, self.stats.spec_accept_rate = accept_len, accept_rate
            self.stats.spec_cap_length = tally.cap_length
        self.stats.last_gen_throughput = throughput
        kv = sum(r.kv_tokens for r in self.running)
        self.log.line(
            decode_line(
                running=len(self.running),
                kv_tokens=kv,
                token_usage=kv / self.max_total,
                cuda_graph=self.stats.cuda_graph,
                gen_throughput=throughput,
                queue=len(self.waiting),
                accept_len=accept_len,
                accept_rate=accept_rate,
                cap_len=cap_len,
                pd=self.pd_decode_counts() if self.pd_decode_counts is not None else None,
            ),
            rank=0,
        )
        self._log_t, self._log_tokens, self._log_spec = now, 0, SpecTally()
        self.stats.retracted_reqs, self._retracted_since_log = self._retracted_since_log, 0

    def _update_stats(self, batch: int) -> None:
        st = self.stats
        st.running = len(self.running)
        st.queue = len(self.waiting)
        st.kv_tokens = sum(r.kv_tokens for r in self.running)
        st.token_usage = st.kv_tokens / self.max_total
        st.batch = batch
        st.new_token_ratio = self.new_token_ratio

    # ------------------------------------------------------------------ episodes (kimitui/sim/episodes.py)
    def _decode_s(self, batch: int, kv: int) -> float:
        """One decode step as the running episode makes it: eager without CUDA graphs, slower clocks or links."""
        st = self.stats
        ep = st.episode
        graph = self.model.uses_cuda_graph(batch) and ep != "graph_off"
        st.cuda_graph = graph
        duration = self.model.decode_step_s(batch, kv, graph=graph)
        if ep == "graph_off":
            duration *= float(self.s.tuning.get("graph_off_factor", 1.5))
        elif ep in ("gpu_throttle", "slow_gpu", "pcie_saturation"):
            duration *= st.episode_slowdown
        return duration

    async def _episode(self) -> bool:
        """Start, act out or end the episode due now; True when the loop stood still (its deadline moves)."""
        ep, began = self.episodes.at(self.clock.now())
        st = self.stats
        st.episode = ep.kind if ep is not None else None
        if ep is None:
            return False
        st.episode_gpu, st.episode_slowdown = ep.gpu, self.episodes.slowdown
        if not began:
            return False
        now, length = time.time(), self.clock.real(ep.end - ep.start)
        if ep.kind == "prefill_surge":
            self._surges.append((now, self._surge(ep)))  # recorded when their prefill is over (_end_surges)
            return False
        detail: dict[str, object] | None = {"gpu": ep.gpu} if ep.kind == "slow_gpu" else None
        if ep.kind == "gpu_throttle":
            detail = {"gpus": list(range(min(self.s.tp_size, NUM_GPUS)))}  # kimitui/sim/gpus.py throttles them all
        self.truth.record(ep.kind, now, now + length, detail=detail)
        if ep.kind == "server_unhealthy":
            await self._freeze(ep)
            return True
        return False

    def _surge(self, ep: Episode) -> list[Req]:
        """Another client's long prompts arrive (``max_new_tokens`` 1, nobody here reads them): their chunked
        prefill starves decode for about the episode's length (prefill runs ahead of decode)."""
        size = max(1024, min(32768, self.max_total // 8))
        want = (ep.end - ep.start) * self.model.p.prefill_tok_per_s
        phantoms = [Req(rid=f"surge-{ep.start:.0f}-{k}", prompt_text="", prompt_tokens=size, max_new_tokens=1,
                        target=1, tokens=TokenStream("", self.s.seed), phantom=True)
                    for k in range(max(1, round(want / size)))]
        self.waiting.extend(phantoms)
        self.stats.queue = len(self.waiting)
        return phantoms

    def _end_surges(self, now: float) -> None:
        """A surge is over when the last of its prompts is prefilled: its truth runs from their arrival."""
        for surge in [x for x in self._surges if all(r.finished for r in x[1])]:
            self._surges.remove(surge)
            start, phantoms = surge
            self.truth.record("prefill_surge", start, now,
                              detail={"prompts": len(phantoms), "tokens": sum(r.prompt_tokens for r in phantoms)})

    async def _freeze(self, ep: Episode) -> None:
        """A stuck collective that recovers: no pass runs, /health fails, the GPUs idle."""
        self.stats.frozen, self.stats.frozen_since = True, time.time()
        try:
            await self.clock.sleep(ep.end - ep.start)
        finally:
            self.stats.frozen = False

    # ------------------------------------------------------------------ EPLB and faults
    def _report_balance(self, tokens: int) -> None:
        if self.balance is not None:
            line = self.balance.on_pass(tokens)
            self.stats.balancedness = self.balance.balancedness_now
            if line is not None:
                self.log.line(line, rank=0)

    async def _rebalance(self) -> float:
        """0.5.23 ``eplb/eplb_manager.py`` ``rebalance``: "rebalance start" on every rank, then either
        "Skipped ep rebalancing: ..." (the window's balance is above the threshold) or the stall and
        "rebalance end time=...", after which experts sit where the recent load says.

        The time is the stall on the wall clock, as a real server measures it on its own clock: the clock of
        this log's timestamps and of everything kimitui measures (README: the simulator divides what it times
        by the time scale), so the attribution reads it on the same axis (issue 32: a time in modelled seconds,
        20x too long at time scale 20, back-dated each rebalance over what came before it).  It is taken when
        the stall ends, before the experts are re-placed (that computation made it read up to 4x the stall)."""
        self.log.all_ranks("[EPLBManager] rebalance start")
        threshold = self.s.eplb_min_rebalancing_utilization_threshold
        if self.balance is not None and self.balance.window_average() > threshold:
            self.log.all_ranks(f"[EPLBManager] Skipped ep rebalancing: current GPU utilization "
                               f"{self.balance.window_average():.2f} > minimum rebalance threshold {threshold:.2f}")
            self.truth.record("eplb_skipped", time.time(), time.time())
            return time.monotonic()
        stall = self.model.eplb_stall_s(self.rng)
        self.stats.in_rebalance = True
        self.stats.rebalances += 1
        t0, wall0 = time.monotonic(), time.time()
        await self.clock.sleep(stall)
        took = time.monotonic() - t0
        self.truth.record("eplb", wall0, time.time())
        self.stats.in_rebalance = False
        if self.balance is not None:
            self.balance.rebalanced()
        self.log.all_ranks(f"[EPLBManager] rebalance end time={took:.3f}s")
        return time.monotonic()

    async def _hang(self) -> None:
        """Fault ``hang``: the forward pass never returns; the watchdog kills the server."""
        self.stats.hung = True
        await self.clock.sleep(self.s.watchdog_timeout)
        timeout = self.s.watchdog_timeout if self.s.watchdog_timeout_given else int(self.s.watchdog_timeout)
        self.log.line("Scheduler debug info:", rank=0)
        self.log.raw(
            "Thread 0x7f3a2c1ff740 (active): \"MainThread\"\n"
            "    synchronize (torch/cuda/__init__.py:985)\n"
            "    forward_decode (sglang/srt/model_executor/model_runner.py:2204)\n"
            "    event_loop_overlap (sglang/srt/managers/scheduler.py:1187)\n"
        )
        self.log.line(f"Scheduler watchdog timeout (self.watchdog_timeout={timeout}, self.soft=False)", rank=0)
        await self.clock.sleep(5.0)
        self.log.line(
            "SIGQUIT received. signum=3, frame=<frame at 0x7f3b10a2c040, file '/usr/lib/python3.11/selectors.py', "
            "line 468, code select>. It usually means one child failed."
        )
        if self.on_fatal is not None:
            await self.on_fatal(1)
