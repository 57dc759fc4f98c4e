"""The parts of the live cockpit that work on its one host, built once the host is known."""

from __future__ import annotations

import logging
from pathlib import Path

from kimitui.events import ProfileState
from kimitui.host.base import Host
from kimitui.launcher.select import find_running, is_simulated_host
from kimitui.live.foreign import ForeignPort
from kimitui.live.profiles import ProfileBook
from kimitui.live.quitting import stops_server_on_quit
from kimitui.live.swaps import SwapDriver
from kimitui.live.tasks import Background, ErrorSink
from kimitui.profiles import Profile
from kimitui.session import Session
from kimitui.telemetry.gpu import GpuStream
from kimitui.telemetry.server_follower import ServerFollower

log = logging.getLogger(__name__)


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
        self.follower = ServerFollower(host, session, simulated=self.simulated, load_profile=profiles.load,
                                       spawn=tasks.spawn, on_error=on_error)
        self.foreign = ForeignPort(session, host, config_path=config_path, target=self._target)
        self.swaps = SwapDriver(session, host, self.follower, profiles=profiles, foreign=self.foreign, tasks=tasks,
                                on_error=on_error, sim_time_scale=sim_time_scale)
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
        await self.gpu.start()

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
        if self.gpu is not None:
            try:
                await self.gpu.stop()
            except Exception as exc:
                log.debug("gpu stop: %s", exc)
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
            await launcher.stop(record, grace_s=5.0)
        except Exception as exc:
            log.debug("stopping the simulated server: %s", exc)
