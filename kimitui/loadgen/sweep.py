"""A concurrency sweep: levels, load modes, stop rules, live progress.

Runs inside the load process (:mod:`kimitui.loadgen.worker`) and reports only
through ``emit(event)``.  How a level's requests are launched is its mode's
(:mod:`kimitui.loadgen.modes`, one object per mode); the engine gives the mode
:class:`~kimitui.loadgen.modes.Level`, its surface for one level, and a
:class:`~kimitui.loadgen.modes.LevelPlan` (how many measured requests,
:meth:`kimitui.events.SweepSpec.level_requests`, or for how long).

Requests go out through :mod:`kimitui.loadgen.h1client`, one connection pool per
level.  A burst opens its C connections and builds every request's bytes
before its clock starts, then writes them back to back without yielding, each
stamped just before its write (connection set-up is not dispatch).

``random:N`` prompts are fitted to N tokens as the server counts them before
the first level (:meth:`SweepEngine._calibrate_prompts`).

Stop rules (checked after each level; the level that tripped one says so in
``LevelResult.stopped``): failed fraction above ``max_error_rate`` (also
checked while a level runs, counted the moment each request ends, after
max(10, C) requests, to stop dispatching; a slot whose request failed sends
nothing while that check cannot yet decide, so C failures at once are C, not 2C),
over-saturation (:func:`kimitui.analysis.level_stats.oversaturation`), a level running
past ``level_time_limit_s`` (what is in flight is cancelled and kept as
incomplete), and abort.  Whatever finished is always reported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import json
import math
import os
import time
import uuid
from collections import deque
from collections.abc import Callable

from kimitui.loadgen import h1client, modes, shards
from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, build_body, to_result
from kimitui.loadgen.client_health import HealthMonitor
from kimitui.loadgen.modes import LevelPlan, mode_for
from kimitui.loadgen.prompts import PromptError, fit_words, prompt_source, random_prompt, random_tokens
from kimitui.analysis.level_stats import error_rate_exceeded, level_result, oversaturation, peak_level, seed_comparable
from kimitui.sglang.server_caps import is_header_name
from kimitui.events import (
    SweepOutcome,
    ErrorEvent,
    Event,
    InFlight,
    LevelResult,
    LevelStarted,
    RequestResult,
    RequestStarted,
    SweepProgress,
    SweepResult,
    SweepSpec,
    SweepStarted,
)

_perf_ns = time.perf_counter_ns
"""How a sweep ended (:attr:`kimitui.events.SweepResult.outcome`)."""
FLUSH_CACHE_MISSING = "this server has no /flush_cache: levels run with the prefix cache warm"


CLOUD_BINS = (16, 12)
"""(elapsed, tok/s) grid of a progress snapshot's cloud: at most 192 cells whatever C is."""


def _rate_of(row: tuple[str, float, int, float | None]) -> float:
    return row[3] or 0.0


def _minus_elapsed(row: tuple[str, float, int, float | None]) -> float:
    return -row[1]


def compact_in_flight(rows: list[tuple[str, float, int, float | None]], keep: int = SweepProgress.IN_FLIGHT_DETAIL,
                      bins: tuple[int, int] = CLOUD_BINS) -> tuple[list[InFlight], list[tuple[float, float, int]]]:
    """(request_id, elapsed_s, tokens, tok_s) of every in-flight request -> (listed, cloud) of a SweepProgress.

    Listed in full: the ``keep // 2`` slowest with a rate, then the oldest (a stalled or crawling
    request is in one of the two); the rest are binned so a snapshot's size does not grow with C.
    """
    if len(rows) <= keep:
        chosen = rows
        rest: list[tuple[str, float, int, float | None]] = []
    else:
        # heapq.nsmallest(n, ...) is sorted(...)[:n] without sorting all C rows; the oldest needed are at most
        # ``keep`` (the slowest already picked are among them or not, either way ``keep`` suffice).
        rated = heapq.nsmallest(keep // 2, (r for r in rows if r[3] is not None), key=_rate_of)
        picked = {r[0] for r in rated}
        for r in heapq.nsmallest(keep, rows, key=_minus_elapsed):
            if len(picked) >= keep:
                break
            picked.add(r[0])
        chosen = [r for r in rows if r[0] in picked]
        rest = [r for r in rows if r[0] not in picked]
    listed = [InFlight(request_id=rid, elapsed_s=round(el, 3), tokens=n,
                       tok_s=round(rate, 2) if rate is not None else None) for rid, el, n, rate in chosen]
    isfinite = math.isfinite
    rated_rest = [(el, rate) for _, el, _, rate in rest if rate is not None and isfinite(rate)]
    if not rated_rest:
        return listed, []
    ex = max(el for el, _ in rated_rest) or 1.0
    ry = max(rate for _, rate in rated_rest) or 1.0
    bx, by = bins
    cells: dict[tuple[int, int], list[float]] = {}
    for el, rate in rated_rest:  # the same arithmetic as ever (el / ex * bx): a cell's edge must not move
        kx, ky = int(el / ex * bx), int(rate / ry * by)
        key = (kx if kx < bx else bx - 1, ky if ky < by else by - 1)
        cell = cells.get(key)
        if cell is None:
            cells[key] = [el, rate, 1]
        else:
            cell[0] += el
            cell[1] += rate
            cell[2] += 1
    # a cell is a sixteenth of the spread wide: 0.1 s and three digits of tok/s say where it is
    cloud = [(round(e / n, 1), float(f"{r / n:.3g}"), int(n)) for e, r, n in (cells[k] for k in sorted(cells))]
    return listed, cloud


def progress_period(hz: float, concurrency: int) -> float:
    """Seconds between progress snapshots: ``1/hz`` up to C=256, twice that to C=1024, four times above.

    A snapshot walks every request in flight (~1.9 us each: 3.8 ms at C=2048), so its cost a second stays
    at ~4 ms at any C instead of growing with it; at C=2048 that is 1 % of the worker's CPU, not 2 %
    (py-spy beside the bare client).  A cloud of 2,048 requests redrawn once a second is still live.
    """
    return (1.0 if concurrency <= 256 else 2.0 if concurrency <= 1024 else 4.0) / hz


def new_sweep_id() -> str:
    return time.strftime("sw-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def base_url(url: str) -> str:
    """``http://h:p``, ``http://h:p/`` and ``http://h:p/v1`` all mean the same server."""
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


MODEL_LOOKUP_TIMEOUT_S = 10.0
"""How long ``/v1/models`` may take to answer before the sweep says so."""


class ModelLookupError(ValueError):
    """``/v1/models`` did not name a model; the message says what happened (never empty)."""


def _root_cause(exc: BaseException) -> str:
    """The OS's own words under httpx's wrappers ("connection refused", not "All connection attempts failed")."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno:
            return os.strerror(seen.errno).lower()
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__


async def resolve_model(url: str, timeout_s: float | None = None) -> str:
    """The first model the server lists at ``/v1/models`` (control plane: httpx).

    Raises :class:`ModelLookupError` saying what happened: a timeout and its
    length, a refused connection, the HTTP status and body, or what the
    answer held instead of a model (an httpx timeout's own text is empty).
    """
    import httpx  # control plane only: ~0.3 s of imports kept out of the load process's start-up

    timeout_s = MODEL_LOOKUP_TIMEOUT_S if timeout_s is None else timeout_s
    where = base_url(url) + "/v1/models"
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        try:
            resp = await client.get(where)
        except httpx.ConnectTimeout:
            raise ModelLookupError(f"{where}: could not connect within {timeout_s:g} s") from None
        except httpx.TimeoutException:
            raise ModelLookupError(f"{where}: connected, but no answer within {timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            raise ModelLookupError(f"{where}: cannot connect: {_root_cause(exc)}") from None
        except httpx.HTTPError as exc:
            raise ModelLookupError(f"{where}: {type(exc).__name__}" + (f": {exc}" if str(exc) else "")) from None
    if resp.status_code != 200:
        body = " ".join(resp.text.split())[:200]
        raise ModelLookupError(f"{where}: HTTP {resp.status_code}" + (f": {body}" if body else ""))
    try:
        doc = resp.json()
    except ValueError:
        raise ModelLookupError(f"{where}: the answer is not JSON: {resp.text[:120]!r}") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict) or not data[0].get("id"):
        raise ModelLookupError(f"{where}: the answer lists no model: {resp.text[:120]!r}")
    return str(data[0]["id"])


class SweepEngine:
    """Runs one sweep; ``abort()`` may be called at any time from the same loop."""

    def __init__(self, spec: SweepSpec, emit: Callable[[Event], None], *, sweep_id: str | None = None,
                 host: str = "sim", profile: str | None = None, progress_hz: float = 4.0) -> None:
        self.spec = spec
        self.emit = emit
        self.sweep_id = sweep_id or new_sweep_id()
        self.host = host
        self.profile = profile
        self.progress_hz = progress_hz
        self.clock = Clock()
        self.levels: list[LevelResult] = []
        self.health = HealthMonitor(self.sweep_id, host, emit)
        self.deadlines = Deadlines(spec.connect_timeout_s, spec.stall_timeout_s, spec.request_timeout_s)
        self._endpoint = base_url(spec.url) + "/v1/chat/completions"
        self._setup_error: str | None = None
        self.mode = mode_for(spec.mode)
        try:
            self._prompt = prompt_source(spec.prompts, spec.seed)
        except PromptError as exc:  # reported by run() as a failed sweep, like any other bad setting
            self._setup_error = str(exc)
            self._prompt = prompt_source("seed")
        self._aborted: str | None = None
        self._cut: str | None = None
        self._stop_dispatch = False
        self._inflight: dict[str, tuple[RequestTrace, asyncio.Task[object]]] = {}
        self._unfinished: deque[RequestTrace] = deque()
        self._wakers: set[asyncio.Future[None]] = set()
        self._held: list[asyncio.Future[None]] = []
        self._results: list[RequestResult] = []
        self._n_ok = self._n_failed = self._tokens_done = 0
        self._level_start_ns = 0
        self._c = 0
        self._repeat = 0
        self._model = spec.model
        self._pool: h1client.Pool | None = None
        self._no_flush_cache = False
        """The server answered 404 to /flush_cache: said once, not asked again this sweep."""
        self._labels_for: int | None = None
        self._labels_bytes = b""
        self._prompt_words: int | None = None
        """The calibrated word count of ``random:N`` prompts (helpers of a shared level are told it)."""
        self._sharded: shards.ShardedLevel | None = None
        """The helper processes of a level shared by ``spec.workers`` processes, while it runs."""
        self._shard: tuple[int, int, int] | None = None
        """This process as a helper: (its index, of how many, its slots); request i is index + i x of."""

    # -- control -----------------------------------------------------------------
    def abort(self, reason: str = "aborted by operator") -> None:
        """Stop dispatching and cancel in-flight requests (kept as incomplete, class ``aborted``)."""
        if self._aborted is None:
            self._aborted = reason
        self._cancel_inflight("aborted")

    def cancel_level(self) -> None:
        """Cut the running level: stop dispatching, cancel what is in flight (class ``cancelled``)."""
        self._cancel_inflight("cancelled")

    def cut(self, reason: str) -> None:
        """Cut the running level for ``reason`` (the sweep stops after it, saying so)."""
        if self._cut is None:
            self._cut = reason
        self._cancel_inflight("cancelled")

    def stop_dispatch(self) -> None:
        """Send nothing more this level; what is in flight goes on (a shared level's stop rule)."""
        self._stop_dispatch = True
        for waiter in [*self._wakers, *self._held]:
            if not waiter.done():
                waiter.set_result(None)

    def _cancel_inflight(self, why: str) -> None:
        self._stop_dispatch = True
        if self._sharded is not None:
            self._sharded.cancel(why)
        for waiter in list(self._wakers):
            if not waiter.done():
                waiter.set_result(None)
        for trace, task in list(self._inflight.values()):
            if trace.cancel_reason is None and trace.end_ns is None:
                trace.cancel_reason = why
                task.cancel()

    # -- the sweep ---------------------------------------------------------------
    async def run(self) -> SweepResult:
        spec = self.spec
        self.emit(SweepStarted(host=self.host, sweep_id=self.sweep_id, spec=spec, profile=self.profile))
        outcome: SweepOutcome = "completed"
        reason = ""
        await self.health.start()
        try:
            if self._setup_error:
                raise ValueError(self._setup_error)
            unfit = self.mode.check(spec) or shards.unfit(spec)
            if unfit:
                raise ValueError(unfit)
            if not self._model or self._model == "auto":
                self._model = await resolve_model(spec.url)
            await self._calibrate_prompts()
            for repeat in range(spec.repeats):
                prev: LevelResult | None = None
                for c in spec.levels:
                    if self._aborted:
                        break
                    level = await self._run_level(c, repeat)
                    ended = self._ends_after(prev, level)
                    if ended:
                        level = level.model_copy(update={"stopped": ended[1]})
                    self.levels.append(level)
                    self.emit(level)
                    prev = level
                    if ended:
                        outcome, reason = ended
                        break
                if outcome != "completed":
                    break
            if self._aborted and outcome == "completed":
                outcome, reason = "aborted", self._aborted
        except Exception as exc:  # the sweep reports, never crashes its parent
            outcome, reason = "failed", f"{type(exc).__name__}: {exc}"
            self.emit(ErrorEvent(host=self.host, source="sweep", message=reason))
        finally:
            await self.health.stop()
        peak = peak_level(self.levels, seed_comparable)  # failed, aborted and cut levels are never the peak
        result = SweepResult(host=self.host, sweep_id=self.sweep_id, levels=[lv.concurrency for lv in self.levels],
                             outcome=outcome, reason=reason,
                             peak_tok_s=seed_comparable(peak) if peak is not None else None)
        self.emit(result)
        return result

    def _ends_after(self, prev: LevelResult | None, level: LevelResult) -> tuple[SweepOutcome, str] | None:
        """Whether the sweep ends after ``level``: aborted, or stopped by a rule (with why); None: go on."""
        if self._aborted:
            return "aborted", self._aborted
        spec = self.spec
        stop = (self._cut or error_rate_exceeded(level, spec.max_error_rate)
                or (oversaturation(prev, level) if spec.stop_on_oversaturation else None))
        return ("stopped", stop) if stop else None

    async def _run_level(self, c: int, repeat: int) -> LevelResult:
        spec = self.spec
        self._c, self._repeat = c, repeat
        self._results = []
        self._n_ok = self._n_failed = self._tokens_done = 0
        self._cut = None
        self._stop_dispatch = False
        if self._shard is None:  # a helper's level is announced by its coordinator
            self.emit(LevelStarted(host=self.host, sweep_id=self.sweep_id, concurrency=c, repeat=repeat))
        if spec.flush_cache and not self._no_flush_cache:
            await self._flush_cache()
        if self._aborted:  # aborted while the cache was flushed: send nothing
            self._stop_dispatch = True
        self._level_start_ns = _perf_ns()
        self.health.begin_level()
        loop = asyncio.get_running_loop()
        timer = None
        if spec.level_time_limit_s:
            timer = loop.call_later(spec.level_time_limit_s, self._level_time_up)
        progress = loop.create_task(self._progress_loop())
        plan = LevelPlan.of(spec, c)
        if self._shard is not None:
            plan = dataclasses.replace(plan, concurrency=self._shard[2])
        try:
            if spec.workers > 1:
                self._sharded = shards.ShardedLevel(self, c, repeat, self._prompt_words)
                await self._sharded.run()
            else:
                self._pool = h1client.Pool(self._endpoint, self.deadlines)  # one per level: no carry-over
                await self.mode.run(self, plan)
        finally:
            if self._pool is not None:
                self._pool.close()
            self._pool = None
            if timer is not None:
                timer.cancel()
            progress.cancel()
            self._finish_pending()
        self._publish_progress()
        client = self.health.end_level()
        modes.thaw_level()  # after the level's client figures: nothing in flight, no stamp waits on it
        if self._sharded is not None:
            client, self._sharded = self._sharded.client(client), None
        return level_result(self.sweep_id, c, repeat, spec, self._results, host=self.host, t=time.time(),
                            aborted=self._aborted, cut=self._cut, client=client)

    async def run_shard(self, index: int, of: int, concurrency: int, share: int, repeat: int,
                        clock_offset_s: float, prompt_words: int | None = None) -> LevelResult:
        """As helper ``index`` of ``of`` (:mod:`kimitui.loadgen.shards`): ``share`` slots of one level at C=``concurrency``.

        Its requests, results and its own LevelResult (for its client figures) go out through ``emit``;
        stamped on the coordinator's clock (``clock_offset_s``), with the coordinator's calibrated prompts."""
        self.clock.offset_s = clock_offset_s
        self._shard = (index, of, share)
        if self._model == "auto" or not self._model:
            raise ValueError("a helper needs its coordinator's model")
        if prompt_words is not None:
            self._prompt = prompt_source(self.spec.prompts, self.spec.seed, words=prompt_words)
        await self.health.start()
        try:
            level = await self._run_level(concurrency, repeat)
        finally:
            await self.health.stop()
        self.emit(level)
        return level

    @property
    def model(self) -> str:
        """The model the requests name (resolved from ``/v1/models`` when the spec says ``auto``)."""
        return self._model

    def take_result(self, result: RequestResult) -> None:
        """A helper's finished request, taken as this process's own (counted, kept, published)."""
        self._results.append(result)
        if not result.warmup:
            self._tokens_done += result.completion_tokens
            self._count(result.ok)
            if self._stop_dispatch and self._sharded is not None:
                self._sharded.stop_dispatch()
        self.emit(result)

    def _level_time_up(self) -> None:
        self._cut = f"level time limit {self.spec.level_time_limit_s:g} s reached at C={self._c}"
        self._cancel_inflight("cancelled")

    # -- what a mode uses (modes.Level) --------------------------------------------
    @property
    def repeat(self) -> int:
        return self._repeat

    @property
    def pool(self) -> h1client.Pool:
        assert self._pool is not None, "a level opens its pool first"
        return self._pool

    @property
    def stopped(self) -> bool:
        return self._stop_dispatch

    async def sleep_unless_stopped(self, seconds: float) -> None:
        """Sleep until the next arrival, but wake at once on abort or a stop rule."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._wakers.add(waiter)
        handle = loop.call_later(seconds, _wake, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._wakers.discard(waiter)

    # -- one request ---------------------------------------------------------------
    def prepare(self, idx: int, warm: bool, intended_ns: int) -> tuple[RequestTrace, bytes]:
        """The trace and whole request bytes of one request, built before its send is due."""
        spec = self.spec
        if self._shard is not None:  # a helper's i-th request is the level's index + i x of
            idx = self._shard[0] + idx * self._shard[1]
        trace = RequestTrace(f"{self.sweep_id}-c{self._c}-r{self._repeat}-{idx}", self._c, warm, intended_ns)
        max_tokens = min(spec.max_tokens, 32) if warm else spec.max_tokens
        body = build_body(self._model, self._prompt(idx), max_tokens, temperature=spec.temperature,
                          ignore_eos=spec.ignore_eos, extra=spec.extra_body, spec_details=spec.spec_details)
        assert self._pool is not None
        return trace, self._pool.request_bytes(body, trace.request_id, self._label_header())

    def _label_header(self) -> bytes:
        """The custom-labels header for this level's requests (sweep id, level), if the server takes them.

        Built once per level.  Only the labels the server allows are sent (0.5.23
        ``entrypoints/openai/serving_base.py`` ``extract_custom_labels`` drops the others anyway), and a
        header name that is no HTTP token (a spec from a recording or a caller, not from server_caps)
        sends nothing rather than break the request's bytes.
        """
        spec = self.spec
        if not spec.labels_header or not spec.labels:
            return b""
        if self._labels_for != self._c:
            values = {"kimitui_sweep": self.sweep_id, "kimitui_level": str(self._c)}
            labels = {k: values[k] for k in spec.labels if k in values}
            self._labels_bytes = b""
            if labels and is_header_name(spec.labels_header):
                self._labels_bytes = b"%s: %s\r\n" % (spec.labels_header.encode("ascii"),
                                                       json.dumps(labels, separators=(",", ":")).encode())
            self._labels_for = self._c
        return self._labels_bytes

    async def one(self, idx: int, warm: bool, intended_ns: int,
                   prepared: tuple[RequestTrace, bytes] | None = None,
                   conn: h1client.Conn | None = None) -> RequestTrace:
        trace, data = prepared or self.prepare(idx, warm, intended_ns)
        rid = trace.request_id
        task = asyncio.current_task()
        assert task is not None and self._pool is not None
        self._inflight[rid] = (trace, task)
        loop = asyncio.get_running_loop()
        # Announced after the send (its time is the send's stamp): in a burst every task sends before any
        # announcement is built; a request that opens its connection first is announced once it is written.
        announced: list[asyncio.Handle] = []

        def sent() -> None:
            announced.append(loop.call_soon(self._announce, trace))

        if conn is not None:
            sent()
        try:
            await h1client.run_request(self._pool, data, trace, self.deadlines, conn, sent)
        finally:
            self._inflight.pop(rid, None)
        if not announced:  # never written (its connect failed, or it was cancelled first): announced at its end
            self._announce(trace)
        if not trace.warmup:
            self._count(trace.ok)
        # Results are built after this slot's next send, so their cost never shows as dispatch delay.
        self._unfinished.append(trace)
        loop.call_soon(self._finish_pending)
        return trace

    def _finish_pending(self) -> None:
        """Turn finished traces into RequestResult events (idempotent; also run at each level's end)."""
        while self._unfinished:
            trace = self._unfinished.popleft()
            result = to_result(trace, self.sweep_id, self.clock, host=self.host)
            self._results.append(result)
            if not trace.warmup:
                self._tokens_done += result.completion_tokens
            self.emit(result)
        modes.freeze_with_level()

    def _count(self, ok: bool) -> None:
        """Count a measured request the moment it ends and apply the in-level stop rule there.

        Counting later (with the result, after call_soon) let every slot whose
        request had failed send again first: a level whose C requests all
        failed sent a second round of C.
        """
        if ok:
            self._n_ok += 1
        else:
            self._n_failed += 1
        n = self._n_ok + self._n_failed
        if not self._stop_dispatch and n >= max(10, self._c) and self._n_failed / n > self.spec.max_error_rate:
            self._stop_dispatch = True
        held, self._held = self._held, []
        for waiter in held:  # slots held after a failure look again
            if not waiter.done():
                waiter.set_result(None)

    def _rule_undecided(self) -> bool:
        """Failures are over the rate, but too few requests have ended for the rule, and more will end."""
        n = self._n_ok + self._n_failed
        return (not self._stop_dispatch and bool(self._inflight) and n < max(10, self._c)
                and self._n_failed > self.spec.max_error_rate * n)

    async def hold_after_failure(self) -> bool:
        """After a failed request, send nothing while the stop rule cannot yet decide; True if it held.

        Failures that come together (a stall, a dead server) would otherwise each
        free a slot that sends again before the max(10, C)-th failure is counted.
        A healthy level waits here only for a failure among its first requests,
        and then only until the next one ends (its failed fraction falls back
        under the rate).
        """
        held = False
        loop = asyncio.get_running_loop()
        while self._rule_undecided():
            held = True
            waiter = loop.create_future()
            self._held.append(waiter)
            await waiter
        return held

    def _announce(self, trace: RequestTrace) -> None:
        """Runs just after the request's send (scheduled before it, run after the task first yields)."""
        self.health.dispatched(trace.sent_ns - trace.intended_ns)
        self.emit(RequestStarted(host=self.host, t=self.clock.wall(trace.sent_ns), sweep_id=self.sweep_id,
                                 request_id=trace.request_id, concurrency=trace.concurrency, warmup=trace.warmup))

    # -- prompt calibration -------------------------------------------------------
    CALIBRATION_TOLERANCE = 0.02
    """A probe this close to N (a fraction of it) ends the fit; prompts vary by a few % around it."""

    async def _calibrate_prompts(self) -> None:
        """For ``random:N``: find the word count the server counts as N prompt tokens, before the first level.

        Probes are streaming requests for one token, read back through the
        load client (usage ``prompt_tokens``, chat template included), on the
        sweep's own bag of words in their own order (no shared prefix).  Said
        as information (``kimitui sweep`` prints it once); a server that reports
        no prompt tokens is said as a warning and the prompts stay N words.
        """
        spec = self.spec
        target = random_tokens(spec.prompts)
        if target is None or self._setup_error:
            return
        deadlines = Deadlines(spec.connect_timeout_s, spec.stall_timeout_s, min(spec.request_timeout_s, 120.0))
        pool = h1client.Pool(self._endpoint, deadlines)
        points: list[tuple[int, int]] = []

        async def probe(words: int) -> int:
            trace = RequestTrace(f"{self.sweep_id}-calibrate-{len(points)}", 0, True, _perf_ns())
            body = build_body(self._model, random_prompt(words, spec.seed, 100 + len(points)), 1,
                              temperature=spec.temperature, ignore_eos=spec.ignore_eos, extra=spec.extra_body)
            await h1client.run_request(pool, pool.request_bytes(body, trace.request_id), trace, deadlines)
            if trace.prompt_tokens is None:
                why = f"{trace.error_class}: {trace.error}" if trace.error_class else "no usage.prompt_tokens in the stream"
                raise LookupError(why)
            points.append((words, trace.prompt_tokens))
            return trace.prompt_tokens

        try:
            await probe(max(2, target // 2))
            await probe(target)
            words = fit_words(target, points)
            for _ in range(3):
                if abs(await probe(words) - target) <= self.CALIBRATION_TOLERANCE * target:
                    break
                words = fit_words(target, points)
        except LookupError as exc:
            self.emit(ErrorEvent(host=self.host, source="sweep",
                                 message=f"prompt calibration: the server did not count {spec.prompts}'s prompt "
                                         f"tokens; prompts are {target} words (about a token each on a large "
                                         "vocabulary), check the levels' prompt_tokens", detail=str(exc),
                                 severity="warning"))
            return
        finally:
            pool.close()
        self._prompt = prompt_source(spec.prompts, spec.seed, words=words)
        self._prompt_words = words
        probes = ", ".join(f"{w}->{t}" for w, t in points)
        self.emit(ErrorEvent(host=self.host, source="sweep", severity="info",
                             message=f"prompt calibration: {spec.prompts} = {words} words per prompt",
                             detail=f"the server's prompt_tokens per probe, words->tokens: {probes}"))

    # -- progress and control plane ------------------------------------------------
    async def _progress_loop(self) -> None:
        period = progress_period(self.progress_hz, self._c)
        while True:
            await asyncio.sleep(period)
            self._publish_progress()

    def _publish_progress(self) -> None:
        if self._sharded is not None:
            self._publish_shared_progress()
            return
        now = _perf_ns()
        rows: list[tuple[str, float, int, float | None]] = []
        append = rows.append
        tokens = self._tokens_done
        for tr, _ in self._inflight.values():  # one pass over every request in flight
            n, first, last = tr.tokens, tr.first_ns, tr.last_ns
            if not tr.warmup:
                tokens += n
            append((tr.request_id, (now - tr.sent_ns) / 1e9, n,
                    (n - 1) * 1e9 / (last - first) if n > 1 and first is not None and last is not None
                    and last > first else None))
        listed, cloud = compact_in_flight(rows)
        self.emit(SweepProgress(
            host=self.host, sweep_id=self.sweep_id, concurrency=self._c,
            done=self._n_ok, failed=self._n_failed,
            in_flight=listed, level_tokens=tokens,
            level_elapsed_s=round((now - self._level_start_ns) / 1e9, 3),
            running=len(rows), cloud=cloud,
        ))

    def _publish_shared_progress(self) -> None:
        """A shared level's snapshot: the counts here, the in-flight requests from the helpers' latest ones."""
        assert self._sharded is not None
        listed, cloud, running, in_flight_tokens = self._sharded.snapshot()
        self.emit(SweepProgress(
            host=self.host, sweep_id=self.sweep_id, concurrency=self._c, done=self._n_ok, failed=self._n_failed,
            in_flight=listed, level_tokens=self._tokens_done + in_flight_tokens,
            level_elapsed_s=round((_perf_ns() - self._level_start_ns) / 1e9, 3), running=running, cloud=cloud))

    async def _flush_cache(self) -> None:
        """POST /flush_cache between levels so the prefix cache does not carry over."""
        import httpx  # control plane only: ~0.3 s of imports kept out of the load process's start-up

        try:
            async with httpx.AsyncClient(timeout=30.0) as client:
                resp = await client.post(base_url(self.spec.url) + "/flush_cache")
            if resp.status_code in (404, 405):
                self._no_flush_cache = True
                self.emit(ErrorEvent(host=self.host, source="sweep", message=FLUSH_CACHE_MISSING,
                                     detail=f"POST /flush_cache -> HTTP {resp.status_code}"))
                return
            if resp.status_code != 200:
                raise RuntimeError(f"HTTP {resp.status_code}: {resp.text.strip()[:200]}")
        except Exception as exc:
            self.emit(ErrorEvent(host=self.host, source="sweep", message=f"flush_cache before C={self._c} failed",
                                 detail=str(exc)))


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
