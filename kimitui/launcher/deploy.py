"""The processes of one deployment, started, followed, judged and stopped as one.

A deployment (``kimitui.profiles.deploy.deployment``) is several processes: the nodes of a
multi-node server, or PD's prefill and decode servers and their router.  Each start of one
gets a deployment id that every process's run record carries, with its role and node; the
entry's record (rank 0, the router) lists the others in ``extra["members"]``, so finding the
entry finds the whole deployment, on this host and on the other nodes.

- :func:`running_members`: what a run record stands for (itself, or the whole deployment);
- :func:`start_members`: start every process (each node's on its own host), the entry last;
  a start that fails stops those already started;
- :func:`bring_up_members`: wait until the deployment serves: every SGLang server's log says
  ready, the entry answers ``/health`` and a warm-up request; any process that exits or logs
  a fatal line fails the whole start (its role-tagged log lines say why);
- :func:`stop_members`: stop them all, concurrently.

Processes on another node are reached through a host resolver (``hosts(name)`` -> a
connected Host) the caller gives; the swap (:mod:`kimitui.launcher.swap`) uses these.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kimitui.host.base import Host, HostError
from kimitui.launcher.base import LaunchError, Launcher, RunRecord, process_tag
from kimitui.launcher.bring_up import (
    AFTER_FATAL_S,
    LIVENESS_INTERVAL_S,
    Phases,
    SwapContext,
    SwapFailed,
    _alive_or_unknown,
    _explain_not_healthy,
    _fatal_reason,
    _LogLines,
    log_excerpt,
)
from kimitui.launcher.http_ready import NotHealthy
from kimitui.launcher.process import ProcessLauncher, deployment_tags
from kimitui.launcher.reach import reach_server
from kimitui.launcher.readiness import Readiness
from kimitui.profiles import Profile
from kimitui.profiles.deploy import ProcessSpec

HostResolver = Callable[[str], Awaitable[Host]]
"""A configured host's name -> that host, connected (the caller builds it from the config)."""


@dataclass
class Member:
    """One started process of a deployment: where it runs and its run record."""

    role: str
    node: str | None
    launcher: Launcher
    record: RunRecord
    entry: bool = False
    waits_ready: bool = True

    @property
    def tag(self) -> str:
        """How its lines and messages are tagged: ``decode-0``, ``node-1@gpu-b``."""
        return process_tag(self.role, self.node)


class Nodes:
    """The launchers of a deployment's hosts: the home's, and one per other node (through ``hosts``)."""

    def __init__(self, home: Launcher, hosts: HostResolver | None) -> None:
        self.home = home
        self.hosts = hosts
        self._launchers: dict[str, Launcher] = {}

    async def host(self, node: str) -> Host:
        if self.hosts is None:
            raise LaunchError(f"the deployment has a process on {node!r}, and no way to reach that host was given "
                              "(swap from kimitui with the host in its config)")
        try:
            return await self.hosts(node)
        except (HostError, LaunchError):
            raise
        except Exception as exc:  # a resolver's own error (a config without that host): one clear line
            raise LaunchError(f"cannot reach node {node!r}: {exc}") from exc

    async def launcher(self, node: str | None) -> Launcher:
        """The launcher of ``node`` (None: the home)."""
        if node is None:
            return self.home
        if node not in self._launchers:
            home = self.home
            sim_args = home.sim_args if isinstance(home, ProcessLauncher) else ()
            self._launchers[node] = ProcessLauncher(await self.host(node), simulated=home.simulated, sim_args=sim_args)
        return self._launchers[node]


def is_deployment(record: RunRecord | None) -> bool:
    return record is not None and record.deployment is not None


async def running_members(nodes: Nodes, record: RunRecord) -> list[Member]:
    """Every process ``record`` stands for: itself, or (a deployment's entry) all of the deployment's, entry last."""
    if not record.deployment:
        return [Member(record.role or "server", None, nodes.home, record, entry=True)]
    members: list[Member] = []
    seen = {record.run_id}
    for rec in record.members:
        seen.add(rec.run_id)
        members.append(Member(rec.role or "?", rec.node, await nodes.launcher(rec.node), rec, entry=False,
                              waits_ready=bool(rec.extra.get("waits_ready", True))))
    if isinstance(nodes.home, ProcessLauncher):  # a process the entry did not list (it died mid-start)
        for rec in await nodes.home.deployment_records(record.deployment):
            if rec.run_id not in seen:
                members.append(Member(rec.role or "?", None, nodes.home, rec, entry=False))
    entry = Member(record.role or "server", None, nodes.home, record, entry=True,
                   waits_ready=bool(record.extra.get("waits_ready", True)))
    return [*members, entry]


async def _start_one(nodes: Nodes, spec: ProcessSpec, profile: Profile, deployment: str,
                     started: Sequence[Member]) -> Member:
    launcher = await nodes.launcher(spec.node)
    if not isinstance(launcher, ProcessLauncher):
        raise LaunchError(f"{spec.role}: a deployment's processes run as plain processes, not with {launcher.kind}")
    tags = deployment_tags(deployment, spec.role, spec.node, spec.entry, spec.waits_ready,
                           [m.record for m in started] if spec.entry else ())
    record = await launcher.start_argv(
        profile.name, list(spec.argv), env=dict(spec.env), port=spec.port,
        source=str(profile.source_path) if profile.source_path else None, bind_host=spec.bind_host,
        run_key=spec.run_key, tags=tags, workdir=profile.launcher.workdir)
    return Member(spec.role, spec.node, launcher, record, entry=spec.entry, waits_ready=spec.waits_ready)


T = TypeVar("T", ProcessSpec, Member)


async def _all_or_none(items: Sequence[T], start: Callable[[T, list[Member]], Awaitable[Member]],
                       tag: Callable[[T], str]) -> list[Member]:
    """Start each of ``items`` (the entry last, so its record can list the others); on a failure stop those
    already started and raise, naming the one that failed."""
    started: list[Member] = []
    for item in [i for i in items if not i.entry] + [i for i in items if i.entry]:
        try:
            started.append(await start(item, started))
        except (LaunchError, HostError) as exc:
            await stop_members(started, grace_s=10.0)
            raise LaunchError(f"{tag(item)}: {exc}") from exc
    return started


async def start_members(nodes: Nodes, profile: Profile, specs: Sequence[ProcessSpec], *,
                        deployment: str | None = None) -> list[Member]:
    """Start every process of ``specs`` (the entry last, knowing the others); all or none."""
    deployment = deployment or uuid.uuid4().hex
    return await _all_or_none(specs, lambda spec, started: _start_one(nodes, spec, profile, deployment, started),
                              lambda spec: process_tag(spec.role, spec.node))


async def relaunch_members(members: Sequence[Member]) -> list[Member]:
    """Start again exactly what ``members`` ran (a rollback), under a new deployment id; all or none."""
    deployment = uuid.uuid4().hex

    async def again(m: Member, started: list[Member]) -> Member:
        if isinstance(m.launcher, ProcessLauncher):
            record = await m.launcher.relaunch(m.record, deployment=deployment,
                                               members=[s.record for s in started] if m.entry else None)
        else:
            record = await m.launcher.relaunch(m.record)
        return Member(m.role, m.node, m.launcher, record, entry=m.entry, waits_ready=m.waits_ready)

    return await _all_or_none(members, again, lambda m: m.tag)


async def stop_members(members: Sequence[Member], grace_s: float) -> list[str]:
    """Stop every member at once; what could not be stopped, in words (empty: all stopped)."""

    async def one(m: Member) -> str:
        try:
            await m.launcher.stop(m.record, grace_s=grace_s)
        except (LaunchError, HostError) as exc:
            return f"{m.tag}: {exc}"
        return ""

    return [why for why in await asyncio.gather(*(one(m) for m in members)) if why]


def _tagged_failure(exc: SwapFailed, name: str, member: Member) -> SwapFailed:
    reason = exc.reason.replace(name, f"{name} {member.tag}", 1) if name in exc.reason else f"{member.tag}: {exc.reason}"
    return SwapFailed(reason, [f"[{member.tag}] {line}" for line in exc.lines], member.record)


async def _watch(sw: SwapContext, name: str, member: Member) -> None:
    """Follow a process that prints no "ready" (a rank > 0, the router) until cancelled: its exit or a
    fatal line raises SwapFailed."""
    readiness = Readiness()
    log = _LogLines(member.launcher, member.record)
    await log.open()
    next_check = time.monotonic() + LIVENESS_INTERVAL_S
    try:
        while True:
            line = await log.get(LIVENESS_INTERVAL_S)
            if line is not None:
                readiness.feed(line)
                if readiness.fatal:
                    await log.drain_into(readiness, AFTER_FATAL_S)
                    raise SwapFailed(_fatal_reason(name, readiness), log_excerpt(readiness))
            if log.ended or time.monotonic() >= next_check:
                next_check = time.monotonic() + LIVENESS_INTERVAL_S
                if not await _alive_or_unknown(member.launcher, member.record):
                    await log.drain_into(readiness, 0.3)
                    if readiness.fatal:
                        raise SwapFailed(_fatal_reason(name, readiness), log_excerpt(readiness))
                    raise SwapFailed(f"{name}: the process exited during start-up", list(readiness.recent)[-15:])
                if log.ended:
                    await asyncio.sleep(0.2)
                    await log.reopen()
    finally:
        await log.close()


async def _member_task(sw: SwapContext, name: str, member: Member, deadline: float, phases: Phases) -> None:
    """One member until it is ready (an SGLang server) or for ever (watched); raises a tagged SwapFailed."""
    try:
        if member.waits_ready:
            await sw.tagged(member.tag)._await_ready(name, member.record, deadline, phases, member.launcher)
        else:
            await _watch(sw, name, member)
    except SwapFailed as exc:
        raise _tagged_failure(exc, name, member) from exc
    except (HostError, LaunchError) as exc:
        raise SwapFailed(f"{name} {member.tag}: lost track of the start: {exc}", [], member.record) from exc


async def _serving(sw: SwapContext, name: str, entry: Member, ready: Sequence[asyncio.Task[None]], *, deadline: float,
                   phases: Phases, do_warmup: bool, model: str | None, base_url: str | None) -> None:
    """Every server ready, then the entry healthy and warm, then every process still there."""
    await asyncio.gather(*ready)
    url = base_url or await reach_server(entry.launcher.host, entry.record.extra.get("bind_host"), entry.record.port)
    try:
        await sw._healthy_and_warm(name, url, model, do_warmup, deadline, phases)
    except NotHealthy as exc:
        raise _tagged_failure(await _explain_not_healthy(name, exc, entry.launcher, entry.record), name, entry) from exc


async def bring_up_members(sw: SwapContext, name: str, members: Sequence[Member], *, deadline: float, phases: Phases,
                           do_warmup: bool, model: str | None = None, base_url: str | None = None) -> None:
    """Wait until the deployment serves; raise SwapFailed (naming the process) if any process fails first.

    Progress of the first SGLang server (or the entry) counts as the swap's phases; the others'
    are timed under ``<role>_<phase>``, and their messages carry the role."""
    loop = asyncio.get_running_loop()
    entry = next(m for m in members if m.entry)
    servers = [m for m in members if m.waits_ready]
    main = servers[0] if servers else entry
    tasks: dict[asyncio.Task[None], Member] = {}
    own_phases: list[Phases] = []
    for m in members:
        ph = phases if m is main else Phases(prefix=f"{m.role}_")
        if ph is not phases:
            own_phases.append(ph)
        tasks[loop.create_task(_member_task(sw, name, m, deadline, ph))] = m
    ready = [t for t, m in tasks.items() if m.waits_ready]
    serving = loop.create_task(_serving(sw, name, entry, ready, deadline=deadline, phases=phases,
                                        do_warmup=do_warmup, model=model, base_url=base_url))
    try:
        await _first_failure_or(serving, list(tasks))
    finally:
        for t in [*tasks, serving]:
            t.cancel()
        await asyncio.gather(*tasks, serving, return_exceptions=True)
        for ph in own_phases:
            ph.close()
            phases.durations.update(ph.durations)
    for m in members:
        if not await _alive_or_unknown(m.launcher, m.record):
            raise SwapFailed(f"{name} {m.tag}: the process exited right after the deployment answered",
                             await log_tail(m), m.record)


async def _first_failure_or(serving: asyncio.Task[None], members: list[asyncio.Task[None]]) -> None:
    """Return once ``serving`` is done; raise the first failure of any task (a member's own, tagged, first)."""
    pending: set[asyncio.Task[None]] = {serving, *members}
    while True:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        failed = [t for t in done if not t.cancelled() and t.exception() is not None]
        own = [t for t in failed if t is not serving] or failed
        if own:
            exc = own[0].exception()
            assert exc is not None
            raise exc
        if serving in done:
            return


async def log_tail(member: Member, lines: int = 15) -> list[str]:
    """The last lines of one member's log, tagged with its role."""
    with contextlib.suppress(LaunchError, HostError):
        return [f"[{member.tag}] {line}" for line in await member.launcher.read_log_tail(member.record, lines)]
    return []
