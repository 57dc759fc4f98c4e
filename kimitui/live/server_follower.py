"""Follow the server that serves on a host: its log, and its metrics once it serves.

A swap starts a new server (or brings the old one back): the follower reacts to the
``ProfileState`` events the swap publishes and retargets the log follower and the metrics
poller at whatever kimitui runs there now.  A watched server (one kimitui did not start)
gets the metrics poller only: its log is not kimitui's to read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kimitui.events import Event, ProfileState
from kimitui.host.base import Host
from kimitui.launcher.base import Launcher, RunRecord, process_tag
from kimitui.sglang.expected_args import expected_args
from kimitui.launcher.select import find_running
from kimitui.launcher.reach import reach_server, server_url
from kimitui.profiles import Profile
from kimitui.session import Session
from kimitui.telemetry.logs import LogFollower
from kimitui.telemetry.metrics_poll import PD_EXTRA_KEYS, MetricsPoller

PD_TRANSFER_KEYS = frozenset(PD_EXTRA_KEYS)
"""What a PD prefill server's /metrics adds beside its decode server's: queues and KV transfer figures."""

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None]], object]
ErrorSink = Callable[[str, str], None]
HostResolver = Callable[[str], Awaitable[Host]]
NodesHook = Callable[[list[str]], Awaitable[None]]


@dataclass(frozen=True)
class _PollTarget:
    """The metrics poller's target, known as soon as a start is followed (polled once it serves)."""

    run_id: str
    url: str
    expected: dict[str, Any] | None


class ServerFollower:
    """The log follower and metrics poller of the one server followed on ``host``."""

    def __init__(self, host: Host, session: Session, *, simulated: bool, load_profile: Callable[[str], Profile],
                 spawn: Spawn, on_error: ErrorSink, hosts: HostResolver | None = None,
                 on_nodes: NodesHook | None = None) -> None:
        """``hosts``: a deployment's other nodes by name (their logs are followed there); ``on_nodes``: told the
        other nodes of what is followed now (the cockpit streams their GPUs)."""
        self.launcher: Launcher | None = None
        self.record: RunRecord | None = None
        """The run record of what kimitui started there and serves (None: nothing, or a watched server)."""
        self.server_url: str | None = None
        """How this machine reaches the followed server (through the SSH link for a loopback bind)."""
        self.serving = False
        self.profile: str | None = None
        """The profile that runs now: a swap's target once it starts, the previous one after a rollback."""
        self.watching = False
        """A server kimitui did not start: metrics only."""
        self._host = host
        self._session = session
        self._simulated = simulated
        self._load_profile = load_profile
        self._spawn = spawn
        self._on_error = on_error
        self._logs: LogFollower | None = None
        self._member_pollers: list[MetricsPoller] = []
        """A PD deployment's decode and prefill servers' /metrics (the router has none of SGLang's)."""
        self._member_logs: list[LogFollower] = []
        """The logs of a deployment's other processes (each line tagged with its role/node)."""
        self._hosts = hosts
        self._on_nodes = on_nodes
        self._metrics: MetricsPoller | None = None
        self._following: str | None = None
        self._poll: _PollTarget | None = None
        self._retarget_lock = asyncio.Lock()

    def on_event(self, event: Event) -> None:
        """Session sink: when a swap starts (or brings back) a server, follow it; poll it once it serves."""
        if not isinstance(event, ProfileState) or event.host != self._host.name:
            return
        if event.state in ("starting", "serving", "rolled_back") and event.profile:
            self.profile = event.profile
            self.serving = event.state != "starting"
            if event.detail != "found running":
                self._spawn(self._refollow_and_poll() if self.serving else self.refollow())
        elif event.state in ("failed", "stopped", "stopping"):
            self.serving = False
            if event.state == "stopping" and self._metrics is not None:
                self._spawn(self._stop_metrics())  # a server going away on purpose is no polling failure

    async def _stop_metrics(self) -> None:
        metrics, self._metrics = self._metrics, None
        pollers, self._member_pollers = self._member_pollers, []
        await _stop_all([*pollers, metrics])

    async def follow_found(self, launcher: Launcher, record: RunRecord) -> None:
        """What already served when the cockpit started: follow it and poll it at once."""
        self.launcher, self.record = launcher, record
        self.profile = record.profile
        self.serving = True
        await self._follow(record, serving=True)

    async def refollow(self) -> None:
        """Follow whatever kimitui started on the host now (a swap's new server, or the rolled-back one)."""
        async with self._retarget_lock:
            found = await find_running(self._host, simulated=self._simulated)
            if found is None:
                return
            self.launcher, self.record = found
            await self._follow(self.record, serving=self.serving)

    async def _refollow_and_poll(self) -> None:
        await self.refollow()
        await self._start_metrics()

    async def _follow(self, record: RunRecord, serving: bool = False) -> None:
        if self._logs is not None and self._following == record.run_id:
            return  # already following this very start: restarting would duplicate lines
        await self.stop()
        self._following = record.run_id
        self._logs = LogFollower(
            self._host,
            self._session,
            unit=record.unit if record.launcher == "systemd" else None,
            path=record.log_path if record.launcher == "process" else None,
            from_cursor=record.journal_cursor,
            node=(record.role or "server") if record.deployment else None,
        )
        await self._logs.start()
        await self._follow_members(record)
        expected: dict[str, Any] | None = None
        bind_host = None
        try:
            profile = self._load_profile(record.profile_path or record.profile)
            expected = expected_args(profile.knobs())
            bind_host = profile.host
        except Exception as exc:
            self._on_error("profile", f"cannot load profile {record.profile}: {exc}")
        self.server_url = await reach_server(self._host, bind_host, record.port)
        self._poll = _PollTarget(record.run_id, self.server_url, expected)
        if serving:
            await self._start_metrics()

    async def _start_metrics(self) -> None:
        """Poll /metrics, /server_info and /health of the followed server.

        Started only once it serves: while it loads, /metrics is absent and the
        poller would rightly stop asking for it."""
        poll = self._poll
        if self._metrics is not None or poll is None or poll.run_id != self._following:
            return
        pd = self.record is not None and any(m.role and m.role.startswith("decode") for m in self.record.members)
        if pd:  # a PD router answers /health; its decode and prefill servers have the figures
            self._metrics = MetricsPoller(self._session, poll.url, host=self._host.name, metrics_interval=None,
                                          info_interval=None, loads_interval=None)
        else:
            self._metrics = MetricsPoller(self._session, poll.url, host=self._host.name, expected_args=poll.expected)
        await self._metrics.start()
        if pd and self.record is not None:
            await self._poll_pd_servers(self.record, poll.expected)

    async def _poll_pd_servers(self, record: RunRecord, expected: dict[str, Any] | None) -> None:
        """The first decode server on this host gives the server figures (what generates tokens), each prefill
        server on it its KV transfer figures (SGLang observes them on the prefill side)."""
        decode_done = False
        for member in record.members:
            if member.node or not member.port or not member.role:
                continue  # on another host: its /metrics are not followed (docs/deployments.md)
            url = await reach_server(self._host, None, member.port)
            if member.role.startswith("decode") and not decode_done:
                poller = MetricsPoller(self._session, url, host=self._host.name, health_interval=None,
                                       expected_args=expected)
                decode_done = True
            elif member.role.startswith("prefill"):
                poller = MetricsPoller(self._session, url, host=self._host.name, info_interval=None,
                                       loads_interval=None, health_interval=None, only_extra=PD_TRANSFER_KEYS)
            else:
                continue
            self._member_pollers.append(poller)
            await poller.start()

    async def watch(self, url: str) -> None:
        """A server kimitui did not start: poll it (metrics, health), never follow its log."""
        await self.stop()
        self.server_url = url
        self.serving = self.watching = True
        self._metrics = MetricsPoller(self._session, url, host=self._host.name)
        await self._metrics.start()

    def sweep_target(self, running: Profile | None) -> tuple[str, str]:
        """Where a sweep of the followed server goes, and the model it asks for (``running``: its profile)."""
        if self.watching and self.server_url is not None:
            return self.server_url, "auto"  # the sweep asks the server's /v1/models
        bind_host, port, model = None, 30001, "default"
        if running is not None:
            bind_host, port, model = running.host, running.port, running.effective_served_model_name()
        if self.record is not None and self.record.port:
            port = self.record.port
        if self.server_url is not None:
            return self.server_url, model
        return server_url(self._host, bind_host, port), model

    async def _follow_members(self, record: RunRecord) -> None:
        """The logs of a deployment's other processes, merged into the session with their role (and node)."""
        nodes: list[str] = []
        for member in record.members if record.deployment else []:
            if not member.log_path:
                continue
            host = self._host
            if member.node:
                nodes.append(member.node)
                if self._hosts is None:
                    continue
                try:
                    host = await self._hosts(member.node)
                except Exception as exc:
                    self._on_error("logs", f"cannot follow {member.role} on {member.node}: {exc}")
                    continue
            follower = LogFollower(host, self._session, path=member.log_path, node=process_tag(member.role, member.node),
                                   home=self._host.name)
            self._member_logs.append(follower)
            await follower.start()
        if self._on_nodes is not None:
            await self._on_nodes(nodes)

    async def stop(self) -> None:
        """Stop following (the server itself keeps running)."""
        logs, self._logs = self._logs, None
        members, self._member_logs = self._member_logs, []
        await _stop_all([*members, logs])
        await self._stop_metrics()
        self._following = None


async def _stop_all(parts: list[LogFollower | MetricsPoller | None]) -> None:
    """Stop each (a failure is logged: stopping must finish whatever one part says)."""
    for part in parts:
        if part is not None:
            try:
                await part.stop()
            except Exception as exc:
                log.debug("stopping %r: %s", part, exc)
