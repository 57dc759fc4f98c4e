"""A level shared by several load processes (``SweepSpec.workers``), merged as one process's.

One core of uvloop reads ~40-55k SSE events a second here (issue 33); a router or a fleet streams more.
With ``workers = N`` the load process that runs the sweep (the coordinator) starts N helpers for each level,
each a :mod:`kimitui.loadgen.worker` with a ``shard`` in its config: share i gets C // N slots (one more for
the first C % N), the same split of the level's measured and warm-up requests, and request index i, i + N,
i + 2N, ... (ids and prompts as one process would give them).  Every helper stamps on the coordinator's
clock (the same ``perf_counter`` to wall offset), so their times are one clock.

The coordinator relays each helper's ``RequestStarted`` and ``RequestResult`` as its own, counts them for the
in-level stop rule, and builds the level's :class:`~kimitui.events.LevelResult` with the same
``level_result`` over the union of the results: percentiles, steady state and stragglers over every request,
exactly as one process's.  The client's health is the worst of the processes' (each is one core).
Abort, the level's time limit and the stop rule reach the helpers over their stdin.  A helper that exits
before its share ended cuts the level with an error that names it, its exit code and its last stderr lines
(never a hang: the other helpers are cancelled and what arrived is kept).

Modes: ``sustained`` and ``burst`` (each helper bursts its share at its own start); ``rate`` is refused,
because a Poisson stream split in N would need N seeds the spec does not have.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

import kimitui
from kimitui.events import (
    ClientSummary,
    ErrorEvent,
    InFlight,
    LevelResult,
    RequestResult,
    RequestStarted,
    SweepProgress,
    SweepSpec,
    parse_event,
)

if TYPE_CHECKING:
    from kimitui.loadgen.sweep import SweepEngine

_LINE_LIMIT = 64 * 1024 * 1024
_BOOT = "import sys; sys.path.append(sys.argv.pop(1)); from kimitui.loadgen.worker import main; sys.exit(main())"


@dataclass(frozen=True)
class Share:
    """One helper's part of a level."""

    index: int
    of: int
    concurrency: int
    budget: int | None
    """Measured requests (None: the level runs for ``duration_s``)."""
    warmup: int


def split(n: int, parts: int) -> list[int]:
    """``n`` in ``parts`` as even as can be, the first ones one larger."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def shares(spec: SweepSpec, concurrency: int) -> list[Share]:
    """The level's shares: ``min(workers, C)`` of them (every helper keeps at least one slot)."""
    n = max(1, min(spec.workers, concurrency))
    budget = spec.level_requests(concurrency)
    cs, ws = split(concurrency, n), split(spec.warmup_requests, n)
    bs: list[int | None] = list(split(budget, n)) if budget is not None else [None] * n
    return [Share(i, n, cs[i], bs[i], ws[i]) for i in range(n)]


def unfit(spec: SweepSpec) -> str | None:
    """Why ``spec`` cannot be shared among processes, or None."""
    if spec.workers > 1 and spec.mode == "rate":
        return "workers > 1 runs sustained and burst levels; mode 'rate' needs one load process (workers = 1)"
    return None


def shard_spec(spec: SweepSpec, share: Share, model: str) -> SweepSpec:
    """The spec a helper runs: its share of the requests, one level, nothing the coordinator does itself."""
    return spec.model_copy(update={
        "workers": 1, "model": model, "warmup_requests": share.warmup, "requests_per_level": share.budget,
        "flush_cache": False, "repeats": 1, "level_time_limit_s": None, "stop_on_oversaturation": False})


def merge_client(summaries: list[ClientSummary | None]) -> ClientSummary | None:
    """The worst of each figure over the processes (each process is one core; one saturated one is enough)."""
    have = [s for s in summaries if s is not None]
    if not have:
        return None

    def worst(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return ClientSummary(
        samples=max(s.samples for s in have),
        loop_lag_max_ms=worst([s.loop_lag_max_ms for s in have]),
        loop_lag_p50_ms=worst([s.loop_lag_p50_ms for s in have]),
        cpu_max_pct=worst([s.cpu_max_pct for s in have]),
        dispatch_delay_max_p99_ms=worst([s.dispatch_delay_max_p99_ms for s in have]),
    )


class _Helper:
    """One helper process and what it reported."""

    def __init__(self, share: Share, proc: asyncio.subprocess.Process) -> None:
        self.share = share
        self.proc = proc
        self.level: LevelResult | None = None
        self.progress: SweepProgress | None = None
        self.stderr: deque[str] = deque(maxlen=8)
        self.done_tokens = 0
        """Measured tokens of the results relayed so far (what its progress counts beyond them is in flight)."""

    def tell(self, command: str) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError, RuntimeError):
                stdin.write(command.encode() + b"\n")


class ShardedLevel:
    """Runs one level of ``engine`` on ``workers`` helper processes and feeds their results to it."""

    def __init__(self, engine: SweepEngine, concurrency: int, repeat: int, prompt_words: int | None) -> None:
        self.engine = engine
        self.concurrency = concurrency
        self.repeat = repeat
        self.prompt_words = prompt_words
        self.helpers: list[_Helper] = []
        self.failures: list[str] = []
        self._cancelled: str | None = None
        self._stopped = False

    async def run(self) -> None:
        """Start the helpers, relay until each has ended; a helper that died cuts the level (``engine``'s)."""
        engine = self.engine
        for share in shares(engine.spec, self.concurrency):
            self.helpers.append(await self._spawn(share))
            if self._cancelled:  # aborted while they started
                self.helpers[-1].tell("abort" if self._cancelled == "aborted" else "cancel")
        await asyncio.gather(*(self._relay(h) for h in self.helpers))
        if self.failures:
            message = "; ".join(self.failures)
            engine.emit(ErrorEvent(host=engine.host, source="sweep", message=message[:2000]))
            engine.cut(message[:2000])

    def client(self, own: ClientSummary | None) -> ClientSummary | None:
        return merge_client([own, *(h.level.client if h.level is not None else None for h in self.helpers)])

    def cancel(self, why: str) -> None:
        """Abort (``aborted``) or cut (``cancelled``) what the helpers have in flight; they stop sending."""
        self._cancelled = why
        for h in self.helpers:
            h.tell("abort" if why == "aborted" else "cancel")

    def stop_dispatch(self) -> None:
        """The stop rule tripped on the union: the helpers send nothing more (in flight goes on)."""
        if not self._stopped:
            self._stopped = True
            for h in self.helpers:
                h.tell("stop")

    def snapshot(self) -> tuple[list[InFlight], list[tuple[float, float, int]], int, int]:
        """(listed, cloud, running, in-flight tokens) over the helpers' latest progress (a live view only)."""
        listed: list[InFlight] = []
        cloud: list[tuple[float, float, int]] = []
        running = tokens = 0
        for h in self.helpers:
            p = h.progress
            if p is None or h.level is not None:
                continue
            listed.extend(p.in_flight)
            cloud.extend(p.cloud)
            running += p.running if p.running is not None else len(p.in_flight)
            tokens += max(0, p.level_tokens - h.done_tokens)
        listed.sort(key=lambda f: -f.elapsed_s)
        return listed[:SweepProgress.IN_FLIGHT_DETAIL], cloud, running, tokens

    # -- one helper --------------------------------------------------------------------
    async def _spawn(self, share: Share) -> _Helper:
        engine = self.engine
        config = {
            "spec": shard_spec(engine.spec, share, engine.model).model_dump(mode="json"),
            "sweep_id": engine.sweep_id, "host": engine.host, "profile": engine.profile,
            "progress_hz": engine.progress_hz,
            "shard": {"index": share.index, "of": share.of, "concurrency": self.concurrency,
                      "share": share.concurrency, "repeat": self.repeat, "clock_offset_s": engine.clock.offset_s,
                      "prompt_words": self.prompt_words},
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-P", "-c", _BOOT, str(Path(kimitui.__file__).resolve().parents[1]),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=_LINE_LIMIT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        return _Helper(share, proc)

    async def _relay(self, h: _Helper) -> None:
        proc = h.proc
        assert proc.stdout is not None and proc.stderr is not None
        errs = asyncio.get_running_loop().create_task(self._drain(h, proc.stderr))
        engine = self.engine
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:
                    continue  # a line beyond the limit (never a result): skipped
                if not line:
                    break
                try:
                    ev = parse_event(line)
                except (ValidationError, ValueError) as exc:
                    self._died(h, f"a bad event line ({exc})")
                    continue
                if isinstance(ev, RequestResult):
                    if not ev.warmup:
                        h.done_tokens += ev.completion_tokens
                    engine.take_result(ev)
                elif isinstance(ev, RequestStarted):
                    engine.emit(ev)
                elif isinstance(ev, SweepProgress):
                    h.progress = ev
                elif isinstance(ev, LevelResult):
                    h.level = ev
                elif isinstance(ev, ErrorEvent):
                    engine.emit(ev)
            rc = await proc.wait()
            await errs
        finally:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                rc = await proc.wait()
        if h.level is None:
            self._died(h, f"exited with code {rc}")

    def _died(self, h: _Helper, what: str) -> None:
        tail = " | ".join(h.stderr)
        self.failures.append(f"load process {h.share.index + 1} of {h.share.of} (C={self.concurrency}, "
                             f"{h.share.concurrency} slots) {what} before its share of the level ended"
                             + (f": {tail}" if tail else ""))
        for other in self.helpers:  # the level cannot be whole: end it now, keep what arrived
            if other is not h and other.level is None:
                other.tell("cancel")

    @staticmethod
    async def _drain(h: _Helper, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            h.stderr.append(line.decode("utf-8", "replace").rstrip())
