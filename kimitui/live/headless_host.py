"""What the cockpit streams from its host, for a headless command (``kimitui sweep --host NAME``).

The cockpit's :class:`~kimitui.live.on_host.LiveHost` streams the host's GPUs (the NVML agent over the
link) and follows the server kimitui runs there (its log, its metrics).  A headless sweep needs the same
events in its session and its recording, so that the level's power and the stragglers' causes can be
read from them, and nothing of the rest (swaps, the foreign-port check, the quit rule): this is that
part, built from the same pieces (:class:`~kimitui.telemetry.gpu.GpuStream`,
:class:`~kimitui.live.server_follower.ServerFollower`).

When the link (or the agent) goes away mid-sweep, the sweep goes on; one warning says when telemetry
stopped (the last GPU sample's time) and, if it comes back, one says when it resumed, so a reader of the
recording knows which levels have no power or log behind them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from kimitui.events import ConnectionState, ErrorEvent, Event, GpuSample, ProfileState
from kimitui.host.base import Host
from kimitui.launcher.select import find_running, is_simulated_host
from kimitui.live.profiles import ProfileBook
from kimitui.live.server_follower import ServerFollower
from kimitui.live.tasks import Background
from kimitui.session import Session
from kimitui.telemetry.gpu import GpuStream

log = logging.getLogger(__name__)

TELEMETRY_SOURCE = "telemetry"
"""The ``ErrorEvent.source`` of the stopped / resumed lines."""
LINK_DOWN = frozenset({"lost", "reconnecting", "failed", "closed"})
AGENT_DOWN = ("GPU telemetry interrupted", "GPU agent stream interrupted", "GPU agent stream failed")
"""The GPU stream's own words when its agent's stream ends (:mod:`kimitui.telemetry.gpu`)."""


@dataclass(frozen=True)
class Serving:
    """The server kimitui runs on the host: how this machine reaches it, and its profile."""

    url: str
    profile: str


class HeadlessHost:
    """The GPU stream and the followed server of one connected host, publishing into ``session``."""

    def __init__(self, host: Host, session: Session, *, profiles: ProfileBook, python: str = "python3",
                 gpu_interval: float | None = None) -> None:
        """``python``: the interpreter that runs the NVML agent there (the host's ``python`` in the config)."""
        self.host = host
        self.session = session
        self.simulated = is_simulated_host(host)
        self.python = python
        self.gpu_interval = gpu_interval
        self.tasks = Background(self._warn)
        self.follower = ServerFollower(host, session, simulated=self.simulated, load_profile=profiles.load,
                                       spawn=self.tasks.spawn, on_error=self._warn)
        self.gpu: GpuStream | None = None
        self.found: ProfileState | None = None
        """What serves there, as found (a recording opened later publishes it again)."""
        self.samples = 0
        self.last_sample_t: float | None = None
        self.stopped_at: float | None = None
        """When telemetry stopped (the last sample's time), while it is stopped."""
        self._closing = False
        session.add_sink(self._on_event)

    def _warn(self, source: str, message: str) -> None:
        self.session.publish(ErrorEvent(host=self.host.name, source=source, severity="warning", message=message))

    async def start_gpus(self) -> None:
        """The NVML agent over the link (the fake NVML on a simulated host), as the cockpit starts it."""
        backend = "fake" if self.simulated else "pynvml"
        if self.gpu_interval:
            self.gpu = GpuStream(self.host, self.session, interval=self.gpu_interval, backend=backend, python=self.python)
        else:
            self.gpu = GpuStream(self.host, self.session, backend=backend, python=self.python)
        await self.gpu.start()

    async def follow_server(self) -> Serving | None:
        """Follow the server kimitui started there (its log and metrics); None when none runs."""
        found = await find_running(self.host, simulated=self.simulated)
        if found is None:
            return None
        launcher, record = found
        self.found = ProfileState(host=self.host.name, profile=record.profile, state="serving", detail="found running")
        self.session.publish(self.found)
        await self.follower.follow_found(launcher, record)
        url = self.follower.server_url
        return Serving(url, record.profile) if url else None

    def _on_event(self, ev: Event) -> None:
        """Count the host's GPU samples; say once when its telemetry stops, and when it resumes."""
        if ev.host != self.host.name or self._closing:
            return
        if isinstance(ev, GpuSample):
            self.samples += 1
            self.last_sample_t = ev.t
            if self.stopped_at is not None:
                self._say_resumed(ev.t)
        elif isinstance(ev, ConnectionState) and ev.state in LINK_DOWN:
            self._say_stopped(f"link {ev.state}" + (f": {ev.detail}" if ev.detail else ""))
        elif isinstance(ev, ErrorEvent) and ev.source == "gpu" and ev.message.startswith(AGENT_DOWN):
            self._say_stopped(ev.message + (f": {ev.detail}" if ev.detail else ""))

    def _say_stopped(self, why: str) -> None:
        if self.stopped_at is not None:
            return
        at = self.last_sample_t if self.last_sample_t is not None else time.time()
        self.stopped_at = at
        self.session.publish(ErrorEvent(
            host=self.host.name, source=TELEMETRY_SOURCE, severity="warning",
            message=f"telemetry stopped at {_clock(at)} (t={at:.3f}): {why[:300]}; the sweep goes on, with no GPU "
                    "samples or server log from this host until it resumes"))

    def _say_resumed(self, at: float) -> None:
        since, self.stopped_at = self.stopped_at, None
        gap = f" after {at - since:.1f} s" if since is not None else ""
        self.session.publish(ErrorEvent(host=self.host.name, source=TELEMETRY_SOURCE, severity="info",
                                        message=f"telemetry resumed at {_clock(at)} (t={at:.3f}){gap}"))

    async def close(self) -> None:
        """Stop following and streaming (the server keeps serving), close the link."""
        self._closing = True
        try:
            await self.follower.stop()
        except Exception as exc:
            log.debug("follower stop: %s", exc)
        if self.gpu is not None:
            try:
                await self.gpu.stop()
            except Exception as exc:
                log.debug("gpu stop: %s", exc)
        self.tasks.cancel_all()
        try:
            await self.host.close()
        except Exception as exc:
            log.debug("host close: %s", exc)


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%H:%M:%S")
