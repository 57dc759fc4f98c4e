"""The parts of the live cockpit that work on its one host, built once the host is known."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from kimitui.events import ConnectionState, ErrorEvent, Event, GpuSample, ProfileState
from kimitui.host.base import Host
from kimitui.launcher.deploy import Nodes, running_members, stop_members
from kimitui.launcher.nodes import NodeHosts
from kimitui.launcher.select import find_running, is_simulated_host
from kimitui.live.foreign import ForeignPort
from kimitui.live.profiles import ProfileBook
from kimitui.live.quitting import stops_server_on_quit
from kimitui.live.swaps import SwapDriver
from kimitui.live.tasks import Background, ErrorSink
from kimitui.profiles import Profile
from kimitui.session import Session
from kimitui.telemetry.gpu import GpuStream
from kimitui.live.server_follower import ServerFollower

log = logging.getLogger(__name__)


class NodeForwarder:
    """A sink on a node's own session: forwards its GPU events to the cockpit's session, tagged ``node``
    and routed to the home host."""

    def __init__(self, session: Session, home: str, node: str) -> None:
        self._session = session
        self._home = home
        self._node = node

    def __call__(self, event: Event) -> None:
        """GPU samples go on, tagged; the node's link trouble becomes a message naming it; the rest stays
        on the node's session (its process list and link state would be taken for the home host's)."""
        if isinstance(event, GpuSample):
            self._session.publish(event.model_copy(update={"host": self._home, "node": self._node}))
        elif isinstance(event, ConnectionState) and event.state in ("lost", "reconnecting", "failed"):
            self._session.publish(ErrorEvent(t=event.t, host=self._home, source=f"node {self._node}",
                                             severity="error" if event.state == "failed" else "warning",
                                             message=f"link {event.state} {event.detail}".strip()))
        elif isinstance(event, ErrorEvent):
            self._session.publish(event.model_copy(update={"host": self._home,
                                                           "source": f"node {self._node}: {event.source}"}))


def node_session(session: Session, home: str, node: str) -> Session:
    """The session a node's GPU stream publishes to: its own, whose one sink forwards to ``session``."""
    own = Session(host=home)
    own.add_sink(NodeForwarder(session, home, node))
    return own


class LiveHost:
    """The GPU stream, the server follower, the swaps and the foreign-port check of one host.

    Closing them leaves the server serving, except the simulated server this session brought up
    from nothing (the quit rule, :mod:`kimitui.live.quitting`)."""

    def __init__(self, host: Host, session: Session, *, profiles: ProfileBook, config_path: Path | None,
                 tasks: Background, on_error: ErrorSink, sim_time_scale: float | None) -> None:
        self.host = host
        self.simulated = is_simulated_host(host)
        self.found_at_start = False
        self.looked = False
        """What runs there was looked for (``found_at_start`` says whether something did)."""
        """A server kimitui started was running before this session: it keeps running on quit."""
        self.gpu: GpuStream | None = None
        self.node_gpus: dict[str, GpuStream] = {}
        """The GPU streams of a multi-node deployment's other nodes (samples tagged with the node)."""
        self.nodes = NodeHosts(host, config_path)
        self._gpu_python: str | None = None
        self.follower = ServerFollower(host, session, simulated=self.simulated, load_profile=profiles.load,
                                       spawn=tasks.spawn, on_error=on_error, hosts=self.nodes,
                                       on_nodes=self._follow_nodes)
        self.foreign = ForeignPort(session, host, config_path=config_path, target=self._target)
        self.swaps = SwapDriver(session, host, self.follower, profiles=profiles, foreign=self.foreign, tasks=tasks,
                                on_error=on_error, sim_time_scale=sim_time_scale, hosts=self.nodes)
        self._session = session
        self._profiles = profiles
        self._on_error = on_error
        session.add_sink(self.follower.on_event)
        session.add_sink(self.swaps.on_event)

    def _target(self, name: str) -> Profile:
        return self._profiles.target(name, simulated=self.simulated)

    async def start_gpu(self, python: str) -> None:
        """The GPU agent: fake NVML on the simulated host, pynvml elsewhere (run by ``python`` there)."""
        self.gpu = GpuStream(self.host, self._session, backend="fake" if self.simulated else "pynvml", python=python)
        self._gpu_python = python
        await self.gpu.start()

    async def _follow_nodes(self, nodes: list[str]) -> None:
        """One GPU stream per other node of the followed deployment (their samples say ``node``); none else."""
        for name in [n for n in self.node_gpus if n not in nodes]:
            await self._stop_stream(self.node_gpus.pop(name))
        if self._gpu_python is None:
            return  # the cockpit streams no GPUs (yet): nor the nodes'
        for name in nodes:
            if name in self.node_gpus:
                continue
            try:
                node = await self.nodes(name)
            except Exception as exc:
                self._on_error("gpu", f"cannot stream the GPUs of node {name}: {exc}")
                continue
            simulated = is_simulated_host(node)
            python = self._gpu_python if simulated or node.python is None else node.python
            stream = GpuStream(node, node_session(self._session, self.host.name, name),
                               backend="fake" if simulated else "pynvml", python=python)
            self.node_gpus[name] = stream
            await stream.start()

    @staticmethod
    async def _stop_stream(stream: GpuStream) -> None:
        try:
            await stream.stop()
        except Exception as exc:
            log.debug("gpu stop: %s", exc)

    async def follow_what_runs(self) -> None:
        """A server kimitui started before this session: say so and follow it."""
        try:
            found = await find_running(self.host, simulated=self.simulated)
        except Exception as exc:
            self._on_error("launcher", f"cannot tell what runs on {self.host.name}: {exc}")
            found = None
        self.found_at_start = found is not None
        self.looked = True
        if found is None:
            return
        launcher, record = found
        self._session.publish(ProfileState(host=self.host.name, profile=record.profile, state="serving",
                                           detail="found running"))
        await self.follower.follow_found(launcher, record)

    async def close(self, *, keep_server: bool = False) -> None:
        """Stop following, stop the simulated server this session brought up (unless ``keep_server``: a tune
        leaves its best serving), stop the GPU stream, close the link."""
        await self.follower.stop()
        if not keep_server:
            await self._stop_our_simulated_server()
        for stream in [*self.node_gpus.values(), *([self.gpu] if self.gpu is not None else [])]:
            await self._stop_stream(stream)
        self.node_gpus = {}
        await self.nodes.close()
        try:
            await self.host.close()
        except Exception as exc:
            log.debug("host close: %s", exc)

    async def _stop_our_simulated_server(self) -> None:
        """The embedded simulated host this cockpit brought up: leave no server of its own behind.

        On a real host, or a simulated one that had a server already, the server keeps serving."""
        launcher, record = self.follower.launcher, self.follower.record
        if launcher is None or record is None or not stops_server_on_quit(
                simulated=self.simulated, started_here=self.swaps.started_here, found_at_start=self.found_at_start):
            return
        try:
            members = await running_members(Nodes(launcher, self.nodes), record)  # a deployment: all its processes
            for why in await stop_members(members, grace_s=5.0):
                log.debug("stopping the simulated server: %s", why)
        except Exception as exc:
            log.debug("stopping the simulated server: %s", exc)
