"""A profile swap that never leaves the operator without a working server.

``swap(host, target, SwapOptions(...), session=...)``:

1. preflight: lint the target, then ask the host's own SGLang (its Python, parse only) whether it
   accepts every process of the target's command (:mod:`kimitui.launcher.preflight_host`); a refusal
   stops here, nothing is touched; a check that cannot run only warns;
2. stop what kimitui started on the host, check the port is free;
3. start the target and follow its log: progress events (weights, KV cache,
   CUDA graph i/N, uvicorn, ready), then ``/health`` 200 and one warm-up request;
4. on failure (a fatal log line, the process exiting, the readiness timeout)
   stop the target and bring the previous server back exactly as it ran (same
   argv / restored unit), again up to ready, and say exactly why with the log
   lines that show it.

Bringing one server up and following it to serving is :mod:`kimitui.launcher.bring_up`; where
kimitui reaches it from here, :mod:`kimitui.launcher.reach`.

Everything is published into the Session: ``SwapProgress`` steps,
``ProfileState`` changes and one ``ProfileSwitch`` with phase timings, diff and
log excerpt.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

from kimitui.events import ProfileState, ProfileSwitch
from kimitui.host.base import Host, HostError
from kimitui.launcher import ports
from kimitui.launcher.base import LaunchError, Launcher, RunRecord
from kimitui.launcher.call_off import CalledOff, remembered, unless_called_off
from kimitui.launcher.bring_up import Phases, StartSpec, SwapContext, SwapFailed
from kimitui.launcher.deploy import (
    HostResolver,
    Member,
    Nodes,
    bring_up_members,
    is_deployment,
    log_tail,
    relaunch_members,
    running_members,
    start_members,
    stop_members,
)
from kimitui.launcher.hostlock import HostBusy, swap_lock
from kimitui.launcher.preflight_host import PREFLIGHT_TIMEOUT_S, ask_host_sglang
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.profiles import argv_for, env_for, load, sim_python
from kimitui.launcher.select import find_running, launcher_for
from kimitui.launcher.supervisor import Detached, await_outcome, supervised
from kimitui.launcher.systemd import SystemdLauncher, check_unit_text
from kimitui.profiles import Profile, ProfileError, deployment, diff_profiles, lint_profile, render_unit
from kimitui.session import Session

DEFAULT_TIMEOUT_S = 1800.0
"""A 590 GB model takes minutes to load; an hour-long hang is still caught."""

SwapResult = Literal["ok", "failed", "rolled_back", "rollback_failed"]

_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()
"""One swap at a time per host within this process, per event loop (a lock is bound to its loop)."""


@dataclass(frozen=True)
class SwapOptions:
    """How one swap runs: its time limits, what it checks, and how the target starts.

    The defaults are the cockpit's; a test or ``kimitui swap`` sets what it needs."""

    timeout: float = DEFAULT_TIMEOUT_S
    """Bounds the target's start, to serving."""
    rollback_timeout: float = DEFAULT_TIMEOUT_S
    """Bounds the known-good previous server's start after a failure (its own, longer, limit)."""
    rollback: bool = True
    do_warmup: bool = True
    """One request after ``/health`` answers, so a server that cannot generate is caught."""
    host_check: bool = True
    """Ask the host's own SGLang parser about the target's command before stopping anything."""
    host_check_timeout: float = PREFLIGHT_TIMEOUT_S
    port_wait_s: float = 10.0
    stop_grace_s: float | None = None
    """TERM-to-KILL grace when stopping; ``None``: the profile's ``launcher.stop_timeout_s``."""
    base_url: str | None = None
    """Where the target answers, when not where its profile says (a proxy, a tunnel)."""
    extra_dirs: tuple[str, ...] = ()
    """Profile folders searched besides the shipped ones and the user's."""
    sim_args: tuple[str, ...] = ()
    """Extra ``kimitui sim serve`` options on a simulated host (e.g. ``("--time-scale", "20")``)."""
    simulated: bool | None = None
    """Whether the host is simulated; ``None``: the host says."""
    previous_profile: Profile | None = None
    """The profile that runs now, for the diff; ``None``: loaded from its run record."""
    hosts: HostResolver | None = None
    """A deployment's other nodes by name -> connected Hosts (a multi-node profile needs it)."""
    call_off: asyncio.Event | None = None
    """Once set, a start from nothing (nothing ran before: nothing to roll back to) stops its server and
    ends ``failed`` without waiting for it to serve (:mod:`kimitui.launcher.call_off`); a swap that
    replaced a running server ignores it and finishes or rolls back."""


@dataclass
class SwapOutcome:
    """How a swap ended.  ``ok`` only when the target serves."""

    outcome: SwapResult
    """``ok``, ``failed`` (refused or nothing to roll back to), ``rolled_back``, ``rollback_failed``."""
    target: str
    previous: str | None
    serving: str | None
    """The profile serving now (the target, the previous one after a rollback, or None)."""
    reason: str = ""
    log_excerpt: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    record: RunRecord | None = None
    """The run record of what serves now."""
    switch: ProfileSwitch | None = None
    warnings: list[str] = field(default_factory=list)
    sglang_version: str | None = None
    """The SGLang the host's preflight found (``0.5.23 (simulated)`` on a simulated host); None: not asked."""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


# --------------------------------------------------------------------------- preflight


def preflight(target: Profile, previous: Profile | None = None) -> tuple[list[str], list[str], dict[str, list[Any]]]:
    """(errors, warnings, diff) for swapping ``previous`` -> ``target``; nothing is touched."""
    errors: list[str] = []
    warnings: list[str] = []
    for issue in lint_profile(target):
        (errors if issue.severity == "error" else warnings).append(f"{issue.field}: {issue.message}")
    diff: dict[str, list[Any]] = {}
    if previous is not None:
        d = diff_profiles(previous, target)
        diff = d.as_event_diff()
        warning = d.warning()
        if warning:
            warnings.insert(0, warning)
    return errors, warnings, diff


# --------------------------------------------------------------------------- the swap


async def swap(
    host: Host,
    target: Profile | str,
    options: SwapOptions | None = None,
    *,
    session: Session | None = None,
    launcher: Launcher | None = None,
) -> SwapOutcome:
    """Swap the host's server to ``target`` (a Profile, a name or a path); see the module doc.

    ``launcher``: the one that runs both ends of the swap (tests give one with its own state
    folder); by default the target's kind of launcher, and whichever found what runs now.
    """
    options = options or SwapOptions()
    if isinstance(target, str):
        try:
            target = load(target, options.extra_dirs)
        except ProfileError as exc:
            return _lost(host, session, str(target), exc, refused=True)
    lock = _locks.setdefault(asyncio.get_running_loop(), {}).setdefault(host.name, asyncio.Lock())
    async with lock:
        try:
            sw = await _launchers(host, target, options, session, launcher)
            return await _supervised_swap(sw, target, options)
        except HostBusy as exc:
            return _lost(host, session, target.name, exc, refused=True)
        except (HostError, LaunchError) as exc:
            return _lost(host, session, target.name, exc)


async def _launchers(host: Host, target: Profile, options: SwapOptions, session: Session | None,
                     launcher: Launcher | None) -> SwapContext:
    """The swap's two launchers: one starts the target, the other stops (and may bring back) what runs."""
    if launcher is not None:
        return SwapContext(host, session, launcher, launcher)
    found = await find_running(host, unit=target.launcher.unit, simulated=options.simulated)
    # a deployment of several processes runs them as plain processes
    kind_of = None if target.is_deployment() else target
    target_launcher = launcher_for(host, kind_of, simulated=options.simulated, sim_args=options.sim_args)
    return SwapContext(host, session, target_launcher, found[0] if found else target_launcher)


async def _supervised_swap(sw: SwapContext, target: Profile, options: SwapOptions) -> SwapOutcome:
    """The swap under the host's lock, its supervisor told each step (it finishes alone if we vanish)."""
    state_dir = await sw.prev_launcher.state_dir()
    async with contextlib.AsyncExitStack() as stack:
        sw.sup = await stack.enter_async_context(supervised(sw.host, state_dir))
        if sw.sup is None:  # no Python on the host: the plain lock, no supervisor
            await stack.enter_async_context(swap_lock(sw.host, state_dir))
        try:
            outcome = await _Run(sw, target, options).run()
        except Detached:
            return await _finished_by_supervisor(sw, target.name, options.timeout + options.rollback_timeout + 60)
        if sw.sup is not None:
            await sw.sup.done(outcome.outcome, outcome.serving, outcome.reason)
        return outcome


def _swap_result(value: object) -> SwapResult:
    """A supervisor's outcome word as a swap result (anything else reads as ``failed``)."""
    if value == "ok" or value == "rolled_back" or value == "rollback_failed":
        return value
    return "failed"


async def _finished_by_supervisor(sw: SwapContext, name: str, wait_s: float) -> SwapOutcome:
    """The link dropped mid-swap and the host's supervisor took over: report how it finished the swap."""
    assert sw.sup is not None
    sw.progress(name, "supervisor", None,
                f"the link to {sw.host.name} dropped; the host's supervisor is finishing the swap")
    last = await await_outcome(sw.host, sw.sup, wait_s)
    if last is None:
        return _lost(sw.host, sw.session, name, HostError("the link dropped and the host's supervisor did not report"))
    outcome, serving = _swap_result(last["outcome"]), last.get("serving")
    reason = (f"the link to {sw.host.name} dropped during '{last.get('lost_at')}'; the supervisor on the host "
              f"finished the swap: {last.get('outcome')}" + (f": {last['reason']}" if last.get("reason") else ""))
    if serving:
        sw.state(serving, "serving" if serving == name else "rolled_back", reason)
    record = None
    with contextlib.suppress(HostError, LaunchError):
        record = await sw.prev_launcher.current() if serving else None
    event = ProfileSwitch(host=sw.host.name, from_profile=last.get("previous"), to_profile=name,
                          outcome=outcome, reason=reason)
    sw.publish(event)
    return SwapOutcome(outcome, name, last.get("previous"), serving, reason, record=record, switch=event)


def _lost(host: Host, session: Session | None, name: str, exc: Exception, *, refused: bool = False) -> SwapOutcome:
    """The host failed us mid-swap (link down, command refused): say so; the state there is unknown.

    ``refused``: the target could not even be loaded; nothing was touched.
    """
    if refused:
        reason = f"the swap to {name} was refused: {exc}"
    else:
        reason = (
            f"the swap to {name} could not finish on {host.name}: {exc}; "
            f"what runs there now is unknown (`kimitui status --host {host.name}` tells)"
        )
    event = ProfileSwitch(host=host.name, to_profile=name, outcome="failed", reason=reason)
    if session is not None:
        if not refused:
            session.publish(ProfileState(host=host.name, profile=name, state="unknown", detail=reason))
        session.publish(event)
    return SwapOutcome("failed", name, None, None, reason, switch=event)


@dataclass(frozen=True)
class Rollback:
    """How bringing the previous server back ended (a swap's outcome once its target failed)."""

    outcome: SwapResult
    """``failed`` (nothing to roll back to, or rollback off), ``rolled_back``, ``rollback_failed``."""
    serving: str | None
    reason: str
    record: RunRecord | None = None


class _Run:
    """One swap under the host's lock: preflight, stop, start, and rollback on failure.

    It keeps what the swap has learned (what ran, the diff, the phase timings) so that every
    way out ends the same way: :meth:`end` publishes the one ``ProfileSwitch``.
    """

    def __init__(self, sw: SwapContext, target: Profile, options: SwapOptions) -> None:
        self.sw = sw
        self.target = target
        self.name = target.name
        self.options = options
        self.phases = Phases()
        self.started = time.monotonic()
        self.running: RunRecord | None = None
        self.prev_name: str | None = None
        self.previous: Profile | None = options.previous_profile
        self.diff: dict[str, list[Any]] = {}
        self.warnings: list[str] = []
        self.sglang_version: str | None = None
        self.prev_members: list[Member] = []
        """Every process of what ran, when it was a deployment (empty: a lone server, or nothing)."""
        self.prev_nodes = Nodes(sw.prev_launcher, options.hosts)
        self.target_nodes = Nodes(sw.launcher, options.hosts)

    def end(self, outcome: SwapResult, serving: str | None, reason: str = "", *, lines: list[str] | None = None,
            record: RunRecord | None = None) -> SwapOutcome:
        """Publish the swap's ``ProfileSwitch`` (phase timings, diff, log excerpt) and return the outcome."""
        self.phases.durations["total"] = round(time.monotonic() - self.started, 4)
        phases = dict(self.phases.durations)
        event = ProfileSwitch(host=self.sw.host.name, from_profile=self.prev_name, to_profile=self.name,
                              outcome=outcome, reason=reason, phases=phases, diff=self.diff,
                              log_excerpt=lines or [])
        self.sw.publish(event)
        return SwapOutcome(outcome, self.name, self.prev_name, serving, reason, lines or [], dict(phases),
                           record, event, self.warnings, self.sglang_version)

    def ended_by(self, rollback: Rollback, lines: list[str]) -> SwapOutcome:
        return self.end(rollback.outcome, rollback.serving, rollback.reason, lines=lines, record=rollback.record)

    def grace_for(self, profile: Profile) -> float:
        if self.options.stop_grace_s is not None:
            return self.options.stop_grace_s
        return float(profile.launcher.stop_timeout_s)

    async def run(self) -> SwapOutcome:
        self.sw.launcher.begin_swap()
        self.sw.prev_launcher.begin_swap()
        try:
            self.running = await self.sw.prev_launcher.current()
        except (LaunchError, HostError) as exc:
            return self.end("failed", None, f"cannot tell what runs on {self.sw.host.name}: {exc}")
        self.prev_name = self.running.profile if self.running else None
        async with contextlib.AsyncExitStack() as locks:
            try:
                if is_deployment(self.running):
                    assert self.running is not None
                    self.prev_members = await running_members(self.prev_nodes, self.running)
                await self._lock_nodes(locks)
            except (LaunchError, HostError, HostBusy) as exc:
                return self.end("failed", self.prev_name, f"the swap to {self.name} was refused: {exc}")
            return await self._run_locked()

    async def _lock_nodes(self, locks: contextlib.AsyncExitStack) -> None:
        """Hold the swap lock of every other host either deployment runs a process on (the home's is held)."""
        nodes = {m.node for m in self.prev_members if m.node}
        nodes |= {s.node for s in deployment(self.target) if s.node} if self.target.is_deployment() else set()
        for node in sorted(nodes):
            launcher = await self.target_nodes.launcher(node)
            await locks.enter_async_context(swap_lock(launcher.host, await launcher.state_dir()))

    async def _run_locked(self) -> SwapOutcome:
        refusal = await self._preflight()
        if refusal:
            return self.end("failed", self.prev_name, refusal)
        if self.running is not None:
            failure = await self._stop_running(self.running)
            if failure:
                return self.end("failed", self.prev_name, failure)
        self.phases.enter("port")
        reason = await self._ports_busy()
        self.phases.close()
        if reason:
            return self.ended_by(await self._roll_back(reason), [])
        if self.target.is_deployment():
            return await self._start_deployment()
        return await self._start_target()

    async def _ports_busy(self) -> str:
        """Why the target cannot start: a port (of any of its processes) held by a process kimitui did not start."""
        wait = min(self.options.port_wait_s, self.options.timeout)
        if not self.target.is_deployment():
            busy = await ports.wait_free(self.sw.host, self.target.port, timeout=wait)
            return (f"port {self.target.port} on {self.sw.host.name} is still in use by a process "
                    f"kimitui did not start: {busy}") if busy else ""
        for spec in deployment(self.target):
            if spec.port is None:
                continue
            host = (await self.target_nodes.launcher(spec.node)).host
            busy = await ports.wait_free(host, spec.port, timeout=wait)
            if busy:
                return (f"{self.name} {spec.role}: port {spec.port} on {host.name} is still in use by a process "
                        f"kimitui did not start: {busy}")
        return ""

    async def _preflight(self) -> str:
        """Lint the target and ask the host's SGLang about it; the refusal in words, or "" to go on."""
        if self.previous is None and self.running is not None:
            try:
                self.previous = load(self.running.profile_path or self.running.profile, self.options.extra_dirs)
            except Exception:  # noqa: BLE001 - the diff is optional; rollback uses the run record
                self.previous = None
        await _send_plan(self.sw, self.target, self.running, self.options)
        errors, self.warnings, self.diff = preflight(self.target, self.previous)
        if not errors and self.options.host_check:
            errors = await self._ask_host_sglang()
        return f"{self.name} refused by preflight: " + "; ".join(errors) if errors else ""

    async def _ask_host_sglang(self) -> list[str]:
        """The host's own SGLang on every process of the target: its refusals (a broken check only warns)."""
        self.phases.enter("preflight")
        answer = await ask_host_sglang(self.sw.host, self.target, simulated=self.sw.launcher.simulated,
                                       timeout=self.options.host_check_timeout)
        self.phases.close()
        self.sglang_version = answer.version
        self.warnings += answer.warnings(self.name)
        return answer.refusals(self.name)

    async def _stop_running(self, running: RunRecord) -> str:
        """Stop what runs (every process of a deployment); why it could not be stopped, or "" once it is."""
        sw, prev_name = self.sw, self.prev_name
        self.phases.enter("stop")
        sw.state(prev_name, "stopping")
        sw.progress(self.name, "stop", 0.0, f"stopping {prev_name}")
        await sw.note("stop")
        grace = self.grace_for(self.previous or self.target)
        try:
            if self.prev_members:
                errors = await stop_members(self.prev_members, grace_s=grace)
                if errors:
                    raise LaunchError("; ".join(errors))
            else:
                await sw.prev_launcher.stop(running, grace_s=grace)
        except (LaunchError, HostError) as exc:
            self.phases.close()
            return f"could not stop {prev_name}: {exc}"
        sw.state(prev_name, "stopped")
        sw.progress(self.name, "stop", 1.0, f"{prev_name} stopped")
        await sw.note("stopped")
        return ""

    async def _start_target(self) -> SwapOutcome:
        """Start the target and wait until it serves; on failure stop it and roll back."""
        sw, name, launcher, target = self.sw, self.name, self.sw.launcher, self.target
        await sw.note("start", run_id=sw.announce_run(launcher))
        launch, what_started = remembered(lambda: launcher.start(target))
        start = StartSpec(name, launch, launcher, bind_host=target.host, port=target.port,
                       model=target.effective_served_model_name(), base_url=self.options.base_url)
        call_off = self.options.call_off if self.running is None else None
        try:
            record = await unless_called_off(
                sw.bring_up(start, deadline=time.monotonic() + self.options.timeout, phases=self.phases,
                            do_warmup=self.options.do_warmup), call_off)
        except CalledOff:
            return await self._called_off(await what_started())
        except SwapFailed as exc:
            rolling = f"; rolling back to {self.prev_name}" if self.running and self.options.rollback else ""
            sw.progress(name, "failed", None, "failed" + rolling)
            sw.state(name, "failed", exc.reason)
            await sw.note("failed", reason=exc.reason)
            if exc.record is not None:
                with contextlib.suppress(LaunchError, HostError):
                    await launcher.stop(exc.record, grace_s=min(self.grace_for(target), 10.0))
            lines = exc.lines or (await launcher.read_log_tail(exc.record, 15) if exc.record else [])
            return self.ended_by(await self._roll_back(exc.reason, lines), lines)
        sw.progress(name, "serving", 1.0, f"{name} serving")
        sw.state(name, "serving")
        return self.end("ok", name, record=record)

    async def _called_off(self, record: RunRecord | None, members: list[Member] | None = None) -> SwapOutcome:
        """A start from nothing called off before it served: stop what it started (every process of a
        deployment); nothing ran before it, so there is nothing to roll back to."""
        sw, name = self.sw, self.name
        reason = f"the start of {name} was called off before it served; nothing ran before it, so it was stopped"
        sw.progress(name, "failed", None, "called off")
        await sw.note("failed", reason=reason)
        grace = min(self.grace_for(self.target), 5.0)
        if members:
            for why in await stop_members(members, grace_s=grace):
                sw.progress(name, "failed", None, f"called off, but {why}")
        elif record is not None:
            with contextlib.suppress(LaunchError, HostError):
                await sw.launcher.stop(record, grace_s=grace)
        sw.state(name, "stopped", reason)
        return self.end("failed", None, reason)

    async def _roll_back(self, reason: str, lines: list[str] | None = None) -> Rollback:
        """Bring what ran before back to serving, exactly as it ran (same argv / restored unit)."""
        sw, previous = self.sw, self.running
        await sw.launcher.restore_previous(previous)  # undo what the target's start changed (systemd: the unit)
        if previous is None or not self.options.rollback:
            return Rollback("failed", None, reason + ("" if previous is None else " (rollback disabled)"))
        if self.prev_members:
            return await self._roll_back_deployment(reason)
        prev = previous.profile
        sw.progress(prev, "start", 0.0, f"rolling back to {prev}")
        # The failed target may still hold the port while it shuts down (seen under load): a relaunch
        # into a held port exits at once and the rollback would fail for nothing.
        await ports.wait_free(sw.host, previous.port, timeout=min(self.options.port_wait_s, self.options.rollback_timeout))
        await sw.note("rollback", run_id=sw.announce_run(sw.prev_launcher))
        rb_phases = Phases(prefix="rollback_")
        start = StartSpec(prev, lambda: sw.prev_launcher.relaunch(previous), sw.prev_launcher,
                       bind_host=previous.extra.get("bind_host"), port=previous.port, started_phase="rollback_started")
        try:
            record = await sw.bring_up(start, deadline=time.monotonic() + self.options.rollback_timeout,
                                       phases=rb_phases, do_warmup=self.options.do_warmup)
        except SwapFailed as exc:
            self.phases.durations.update(rb_phases.durations)
            if exc.record is not None:
                with contextlib.suppress(LaunchError, HostError):
                    await sw.prev_launcher.stop(exc.record, grace_s=10.0)
            sw.state(prev, "failed", f"rollback failed: {exc.reason}")
            return Rollback("rollback_failed", None, f"{reason}; rollback to {prev} failed too: {exc.reason}")
        self.phases.durations.update(rb_phases.durations)
        sw.progress(prev, "serving", 1.0, f"{prev} serving again (rolled back)")
        sw.state(prev, "rolled_back", f"serving again after the failed swap to {self.name}")
        return Rollback("rolled_back", prev, reason, record)

    # -- a deployment of several processes (kimitui.launcher.deploy) ---------------------------
    async def _start_deployment(self) -> SwapOutcome:
        """Start every process of the target, wait until it serves as one; on any failure stop all and roll back."""
        sw, name, target, launcher = self.sw, self.name, self.target, self.sw.launcher
        sim_args = launcher.sim_args if isinstance(launcher, ProcessLauncher) else ()
        specs = deployment(target, simulated=launcher.simulated,
                           python=sim_python(sw.host) if launcher.simulated else None,
                           sim_args=tuple(sim_args) or self.options.sim_args)
        deployment_id = uuid.uuid4().hex
        await sw.note("start", deployment=deployment_id)
        self.phases.enter("start")
        sw.progress(name, "start", 0.0, f"starting {len(specs)} processes: " + ", ".join(s.role for s in specs))
        members: list[Member] = []
        try:
            try:
                members = await start_members(self.target_nodes, target, specs, deployment=deployment_id)
            except (LaunchError, HostError) as exc:
                raise SwapFailed(f"could not start {name}: {exc}") from exc
            await sw.note("started", record=members[-1].record.model_dump(mode="json"))
            sw.state(name, "starting")
            await unless_called_off(
                bring_up_members(sw, name, members, deadline=time.monotonic() + self.options.timeout,
                                 phases=self.phases, do_warmup=self.options.do_warmup,
                                 model=target.effective_served_model_name(), base_url=self.options.base_url),
                self.options.call_off if self.running is None else None)
        except CalledOff:
            self.phases.close()
            return await self._called_off(None, members)
        except SwapFailed as exc:
            self.phases.close()
            return await self._deployment_failed(exc, members)
        self.phases.close()
        sw.progress(name, "serving", 1.0, f"{name} serving ({len(members)} processes)")
        sw.state(name, "serving")
        return self.end("ok", name, record=members[-1].record)

    async def _deployment_failed(self, exc: SwapFailed, members: list[Member]) -> SwapOutcome:
        """Stop every process of the failed target, then bring back what ran."""
        sw, name = self.sw, self.name
        rolling = f"; rolling back to {self.prev_name}" if self.running and self.options.rollback else ""
        sw.progress(name, "failed", None, "failed" + rolling)
        sw.state(name, "failed", exc.reason)
        await sw.note("failed", reason=exc.reason)
        lines = list(exc.lines)
        if not lines and exc.record is not None:
            failing = [m for m in members if m.record.run_id == exc.record.run_id]
            lines = await log_tail(failing[0]) if failing else []
        await stop_members(members, grace_s=min(self.grace_for(self.target), 10.0))
        return self.ended_by(await self._roll_back(exc.reason, lines), lines)

    async def _roll_back_deployment(self, reason: str) -> Rollback:
        """Bring every process of the previous deployment back, exactly as it ran, and wait until it serves."""
        sw, prev = self.sw, self.prev_members[-1].record.profile
        sw.progress(prev, "start", 0.0, f"rolling back to {prev}")
        for m in self.prev_members:
            if m.record.port:
                await ports.wait_free(m.launcher.host, m.record.port,
                                      timeout=min(self.options.port_wait_s, self.options.rollback_timeout))
        await sw.note("rollback")
        rb_phases = Phases(prefix="rollback_")
        members: list[Member] = []
        try:
            try:
                members = await relaunch_members(self.prev_members)
            except (LaunchError, HostError) as exc:
                raise SwapFailed(f"could not start {prev}: {exc}") from exc
            await sw.note("rollback_started", record=members[-1].record.model_dump(mode="json"))
            sw.state(prev, "starting")
            await bring_up_members(sw, prev, members, deadline=time.monotonic() + self.options.rollback_timeout,
                                   phases=rb_phases, do_warmup=self.options.do_warmup)
        except SwapFailed as exc:
            rb_phases.close()
            self.phases.durations.update(rb_phases.durations)
            await stop_members(members, grace_s=10.0)
            sw.state(prev, "failed", f"rollback failed: {exc.reason}")
            return Rollback("rollback_failed", None, f"{reason}; rollback to {prev} failed too: {exc.reason}")
        rb_phases.close()
        self.phases.durations.update(rb_phases.durations)
        sw.progress(prev, "serving", 1.0, f"{prev} serving again (rolled back)")
        sw.state(prev, "rolled_back", f"serving again after the failed swap to {self.name}")
        return Rollback("rolled_back", prev, reason, members[-1].record)


async def _send_plan(sw: SwapContext, target: Profile, running: RunRecord | None, options: SwapOptions) -> None:
    """Tell the supervisor everything it needs to finish this swap alone (plain-process launchers)."""
    if sw.sup is None:
        return
    launcher = sw.launcher
    both_process = isinstance(launcher, ProcessLauncher) and isinstance(sw.prev_launcher, ProcessLauncher)
    kind = "process" if both_process else launcher.kind
    if target.is_deployment() or (running is not None and running.deployment):
        kind = "deployment"  # the supervisor cannot carry several processes alone: it leaves them as they are
    spec: dict[str, Any] = {"name": target.name, "port": target.port, "bind_host": target.host,
                            "profile_path": str(target.source_path) if target.source_path else None}
    if isinstance(launcher, ProcessLauncher):
        with contextlib.suppress(Exception):  # a profile that cannot render: the supervisor cannot start it
            spec["argv"] = argv_for(target, simulated=launcher.simulated,
                                    python=sim_python(sw.host) if launcher.simulated else None,
                                    sim_args=tuple(launcher.sim_args) or options.sim_args)
            spec["env"] = env_for(target)
    systemd = await _systemd_plan(sw, target)
    if systemd is not None and kind != "deployment":
        kind = "systemd"
    grace = options.stop_grace_s if options.stop_grace_s is not None else float(target.launcher.stop_timeout_s)
    await sw.sup.send({"systemd": systemd,
        "host": sw.host.name, "kind": kind, "target": spec,
        "previous": running.model_dump(mode="json") if running is not None else None,
        "timeout_s": options.timeout, "rollback_timeout_s": options.rollback_timeout,
        "grace_s": grace, "rollback": options.rollback, "simulated": launcher.simulated,
    })


async def _systemd_plan(sw: SwapContext, target: Profile) -> dict[str, Any] | None:
    """The unit, its path and the target's checked unit text, when both ends of the swap are systemd."""
    launcher = sw.launcher
    if not isinstance(launcher, SystemdLauncher) or not isinstance(sw.prev_launcher, SystemdLauncher):
        return None
    unit = target.launcher.unit
    text = None
    with contextlib.suppress(Exception):  # a unit that cannot render or fails the check: not written by anyone
        text = render_unit(target, simulated=launcher.simulated,
                           python=sim_python(sw.host) if launcher.simulated else None)
        check_unit_text(text)
    return {"unit": unit, "unit_path": posixpath.join(await launcher.resolved_unit_dir(), f"{unit}.service"),
            "user_mode": launcher.user_mode, "unit_text": text, "record_path": await launcher.record_path(unit)}

