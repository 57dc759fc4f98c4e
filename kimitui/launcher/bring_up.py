"""Bringing one server up and following it to serving: its log's progress, ``/health``, one warm-up.

A swap brings up its target and, after a failure, the previous server the same way
(:class:`SwapContext.bring_up` with a :class:`StartSpec`).  A start that does not reach serving
raises :class:`SwapFailed` with the reason and the log lines that show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from kimitui.events import Event, ProfileState, SwapProgress
from kimitui.host.base import Host, HostError, HostUnavailable, Stream
from kimitui.launcher.base import LaunchError, Launcher, RunRecord
from kimitui.launcher.http_ready import NotHealthy, client, served_model, wait_healthy, warmup
from kimitui.launcher.reach import reach_server
from kimitui.launcher.readiness import PHASE_LABELS, PHASES, Readiness, Step
from kimitui.launcher.supervisor import Supervisor
from kimitui.session import Session

LIVENESS_INTERVAL_S = 0.5
AFTER_FATAL_S = 0.3
"""After a fatal line, keep reading this long so the excerpt holds the traceback that follows."""

ServerState = Literal["unknown", "stopped", "starting", "serving", "failed", "rolled_back", "stopping"]


class SwapFailed(Exception):
    """A start did not reach serving; ``reason`` and ``lines`` say why."""

    def __init__(self, reason: str, lines: list[str] | None = None, record: RunRecord | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lines = lines or []
        self.record = record


def log_excerpt(readiness: Readiness, limit: int = 30) -> list[str]:
    """The log in order around the first fatal line, then any later fatal line; at most ``limit``."""
    out = list(readiness.around_fatal)
    for line in readiness.fatal_lines:
        if line not in out:
            out.append(line)
    # a tqdm bar rewrites itself with \r: keep only its last state
    return [line.rsplit("\r", 1)[-1] for line in out[:limit]]


class Phases:
    """Phase -> seconds, measured as time from a phase's first step to the next one's."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.durations: dict[str, float] = {}
        self._current: str | None = None
        self._since = time.monotonic()

    def enter(self, phase: str) -> None:
        now = time.monotonic()
        if phase == self._current:
            return
        self.close(now)
        self._current, self._since = phase, now

    def close(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._current is not None:
            key = self.prefix + self._current
            self.durations[key] = round(self.durations.get(key, 0.0) + now - self._since, 4)
        self._current = None


@dataclass(frozen=True)
class StartSpec:
    """One server to bring up: how it starts and where it will answer."""

    name: str
    launch: Callable[[], Awaitable[RunRecord]]
    launcher: Launcher
    """Follows its log and tells whether it still runs."""
    bind_host: str | None
    port: int | None
    model: str | None = None
    """The model the warm-up asks for; ``None``: the one the server lists."""
    base_url: str | None = None
    started_phase: str = "started"
    """What the supervisor is told once it started (``rollback_started`` for a rollback)."""


class SwapContext:
    """One swap's state and its event publishing."""

    def __init__(self, host: Host, session: Session | None, launcher: Launcher, prev_launcher: Launcher) -> None:
        self.host = host
        self.session = session
        self.launcher = launcher
        """Starts the target."""
        self.prev_launcher = prev_launcher
        """Runs what was running before (stop, and relaunch for a rollback)."""
        self.sup: Supervisor | None = None
        """The host-side supervisor told each step first (None where the host cannot run one)."""
        self.tag: str | None = None
        """The process of a deployment this context's progress concerns (its messages start with it)."""

    def tagged(self, tag: str) -> SwapContext:
        """This context, its progress messages tagged with one process of a deployment (``decode-0: ...``)."""
        other = copy.copy(self)
        other.tag = tag
        return other

    async def note(self, phase: str, **fields: object) -> None:
        if self.sup is not None:
            await self.sup.note(phase, **fields)

    def announce_run(self, launcher: Launcher) -> str:
        """Fix the next start's run id, so the supervisor can find that start even if we die during it."""
        launcher.next_run_id = uuid.uuid4().hex
        return launcher.next_run_id

    def publish(self, event: Event) -> None:
        if self.session is not None:
            self.session.publish(event)

    def progress(self, profile: str, phase: str, fraction: float | None = None, message: str = "") -> None:
        self.publish(
            SwapProgress(
                host=self.host.name,
                profile=profile,
                phase=phase,
                fraction=fraction,
                message=(f"{self.tag}: " if self.tag else "") + (message or PHASE_LABELS.get(phase, phase)),
            )
        )

    def state(self, profile: str | None, state: ServerState, detail: str = "") -> None:
        self.publish(ProfileState(host=self.host.name, profile=profile, state=state, detail=detail))

    # -- bringing one server up ----------------------------------------------------
    async def bring_up(self, start: StartSpec, *, deadline: float, phases: Phases, do_warmup: bool) -> RunRecord:
        """Start (``start.launch()`` returns the record) and wait until serving; raises SwapFailed."""
        name, launcher = start.name, start.launcher
        phases.enter("start")
        self.progress(name, "start", 0.0)
        try:
            record: RunRecord = await start.launch()
        except (LaunchError, HostError) as exc:
            raise SwapFailed(f"could not start {name}: {exc}") from exc
        await self.note(start.started_phase, record=record.model_dump(mode="json"))
        self.state(name, "starting")
        try:
            await self._await_ready(name, record, deadline, phases, launcher)
            url = start.base_url or await reach_server(self.host, start.bind_host, start.port)
            await self._healthy_and_warm(name, url, start.model, do_warmup, deadline, phases)
            if not await _alive_or_unknown(launcher, record):
                raise NotHealthy("the server process exited right after answering")
        except NotHealthy as exc:
            raise await _explain_not_healthy(name, exc, launcher, record) from exc
        except (HostError, LaunchError) as exc:
            raise SwapFailed(f"{name}: lost track of the start on {self.host.name}: {exc}", [], record) from exc
        except SwapFailed as exc:
            exc.record = record
            raise
        finally:
            phases.close()
        return record

    async def _healthy_and_warm(self, name: str, url: str, model: str | None, do_warmup: bool, deadline: float,
                                phases: Phases) -> None:
        """``/health`` answers 200, then (``do_warmup``) one request is served; raises NotHealthy."""
        phases.enter("health")
        self.progress(name, "health", None, f"waiting for {url}/health")
        async with client(url) as http:
            await wait_healthy(http, url, deadline)
            if do_warmup:
                phases.enter("warmup")
                self.progress(name, "warmup")
                model = model or await served_model(http, url)
                await warmup(http, url, model, timeout=max(5.0, deadline - time.monotonic()))

    async def _await_ready(
        self, name: str, record: RunRecord, deadline: float, phases: Phases, launcher: Launcher
    ) -> None:
        """Follow this start's log until ready; raise SwapFailed on a fatal line, exit or timeout.

        If the log follower ends while the server still runs (an SSH link that dropped and
        came back), it is opened again; readiness ignores the lines it has already seen.
        """
        readiness = Readiness()
        log = _LogLines(launcher, record)
        await log.open()
        dead = asyncio.Event()

        async def watch() -> None:
            """Liveness in the background, so a slow check never delays reading the log."""
            while True:
                await asyncio.sleep(LIVENESS_INTERVAL_S)
                if not await _alive_or_unknown(launcher, record):
                    dead.set()
                    return

        checker = asyncio.get_running_loop().create_task(watch())
        fatal_deadline: float | None = None
        try:
            while True:
                now = time.monotonic()
                if fatal_deadline is not None and (now >= fatal_deadline or log.ended or dead.is_set()):
                    await log.drain_into(readiness, 0.0)
                    raise SwapFailed(_fatal_reason(name, readiness), log_excerpt(readiness))
                if now >= deadline:
                    raise SwapFailed(
                        f"{name} was not ready within the timeout (last step: {_last_step(readiness)})",
                        list(readiness.recent)[-15:],
                    )
                if fatal_deadline is None and (dead.is_set() or log.ended):
                    if dead.is_set() or not await _alive_or_unknown(launcher, record):
                        await log.drain_into(readiness, 0.3)
                        if readiness.fatal:
                            raise SwapFailed(_fatal_reason(name, readiness), log_excerpt(readiness))
                        raise SwapFailed(
                            f"{name}: the server process exited during start-up (last step: {_last_step(readiness)})",
                            list(readiness.recent)[-15:],
                        )
                    # the follower ended but the server runs (a dropped link): follow again
                    await asyncio.sleep(0.2)
                    await log.reopen()
                    continue
                wait = min(deadline, fatal_deadline or deadline) - now
                line = await log.get(max(0.01, min(wait, LIVENESS_INTERVAL_S)))
                if line is None:
                    continue
                step = readiness.feed(line)
                if readiness.fatal and fatal_deadline is None:
                    fatal_deadline = time.monotonic() + AFTER_FATAL_S
                if step is not None and fatal_deadline is None:
                    self._on_step(name, step, phases)
                    if readiness.ready:
                        return
        finally:
            checker.cancel()
            await log.close()

    def _on_step(self, name: str, step: Step, phases: Phases) -> None:
        phases.enter(step.phase)
        self.progress(name, step.phase, step.fraction, step.message)


async def _alive_or_unknown(launcher: Launcher, record: RunRecord) -> bool:
    """Whether the start still runs; True while the host cannot be asked (the deadline still holds)."""
    try:
        return await launcher.alive(record)
    except HostUnavailable:
        return True


class _LogLines:
    """The lines of one start's log, through a follower that can be reopened after a dropped link."""

    def __init__(self, launcher: Launcher, record: RunRecord) -> None:
        self.launcher = launcher
        self.record = record
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.stream: Stream | None = None
        self.reader: asyncio.Task[None] | None = None
        self.ended = False

    async def open(self) -> None:
        self.stream = await self.launcher.follow_log(self.record)
        self.ended = False
        stream, queue = self.stream, self.queue

        async def pump() -> None:
            try:
                async for line in stream:
                    queue.put_nowait(line)
            except HostError:
                pass  # the link dropped: the caller reopens if the server still runs
            finally:
                queue.put_nowait(None)

        self.reader = asyncio.get_running_loop().create_task(pump())

    async def reopen(self) -> None:
        await self.close()
        self.queue = asyncio.Queue()
        try:
            await self.open()
        except HostUnavailable:
            self.ended = True  # try again at the next liveness check

    async def get(self, timeout: float) -> str | None:
        """The next line, or None on timeout / end (then ``ended`` is set)."""
        if self.ended:
            await asyncio.sleep(min(timeout, 0.05))
            return None
        try:
            line = await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            return None
        if line is None:
            self.ended = True
        return line

    async def drain_into(self, readiness: Readiness, for_s: float) -> None:
        """Feed what is queued, then what still comes for up to ``for_s`` (a dying server's last lines)."""
        while not self.ended and not self.queue.empty():
            line = self.queue.get_nowait()
            if line is None:
                self.ended = True
            else:
                readiness.feed(line)
        end = time.monotonic() + for_s
        while not self.ended and (left := end - time.monotonic()) > 0:
            line = await self.get(left)
            if line is not None:
                readiness.feed(line)

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.stream is not None:
            with contextlib.suppress(HostError):
                await self.stream.stop(grace_s=1.0)


def _last_step(readiness: Readiness) -> str:
    phase = PHASES[readiness.phase_index]
    if readiness.fraction is not None and phase == "cuda_graph":
        return f"{PHASE_LABELS[phase]} {readiness.fraction:.0%}"
    return PHASE_LABELS[phase]


_FATAL_WORDS = {
    "oom": "out of memory",
    "watchdog": "watchdog timeout (the scheduler hung)",
    "scheduler_exception": "scheduler exception",
    "sigquit": "a child process failed (SIGQUIT)",
    "subprocess_crash": "a subprocess crashed",
    "nccl": "NCCL error",
    "cuda_graph_capture": "CUDA graph capture failed",
    "traceback": "Python exception",
    "p2p": "GPU peer access not supported",
}


def _fatal_reason(name: str, readiness: Readiness) -> str:
    what = _FATAL_WORDS.get(readiness.fatal or "", readiness.fatal or "error")
    return f"{name} failed during start-up ({_last_step(readiness)}): {what}: {readiness.fatal_quote()}"


async def _explain_not_healthy(name: str, exc: NotHealthy, launcher: Launcher, record: RunRecord) -> SwapFailed:
    """A failed /health or warm-up: if the log shows why (watchdog, OOM...), say that."""
    tail = await launcher.read_log_tail(record, 60)
    readiness = Readiness()
    readiness.phase_index = PHASES.index("ready")
    for line in tail:
        readiness.feed(line)
    if readiness.fatal:
        what = _FATAL_WORDS.get(readiness.fatal, readiness.fatal)
        return SwapFailed(
            f"{name} printed ready but then failed ({exc}): {what}: {readiness.fatal_quote()}",
            log_excerpt(readiness),
            record,
        )
    return SwapFailed(f"{name} printed ready but {exc}", tail[-15:], record)
