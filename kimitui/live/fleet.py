"""Several hosts in one cockpit session: one :class:`LiveController` per host on one Session.

Every member publishes into the same Session (its events name its host), so the cockpit, the
Prometheus exporter and the one recording see the whole fleet.  The operator acts on the
*focused* host: a swap, a sweep, a baseline, a note or the autopilot go to it, exactly as they
would in a one-host session.  Each member connects, reconnects and fails on its own link: a
host that is down or cut off never stalls the others (its start goes on in the background).
"""

from __future__ import annotations

import asyncio
import logging

from kimitui.config import load_config
from kimitui.control import NotAvailable
from kimitui.events import ErrorEvent, SweepSpec
from kimitui.launcher.plan import SwapPlan
from kimitui.live.controller import DEFAULT_PROFILE, LiveController
from kimitui.live.profiles import ProfileBook
from kimitui.live.recorder import RecorderHandle
from kimitui.session import Session

__all__ = ["FLEET_RECORDING_NAME", "FleetController"]

log = logging.getLogger(__name__)

FLEET_RECORDING_NAME = "fleet"
"""A fleet session's recording is named ``fleet-...`` (its header lists every host)."""


class FleetController:
    """A live controller over several hosts (see ``kimitui.control.Controller``); acts on the focused one."""

    live = True

    def __init__(self, hosts: list[str], config_path: str | None = None, profile_dirs: list[str] | None = None,
                 record_path: str | None = None, record: bool = True, default_profile: str = DEFAULT_PROFILE,
                 autostart: bool = True, sim_time_scale: float | None = None) -> None:
        if len(hosts) < 2:
            raise ValueError("a fleet has two hosts or more (one host: `kimitui --host NAME`)")
        dupes = sorted({h for h in hosts if hosts.count(h) > 1})
        if dupes:
            raise ValueError(f"host {', '.join(dupes)} named more than once")
        self.config = load_config(config_path)
        self.profile_dirs = list(profile_dirs or [])
        self.session = Session(host=hosts[0])
        self.members: dict[str, LiveController] = {
            name: LiveController(config_path, host=name, profile_dirs=self.profile_dirs, record=False,
                                 default_profile=default_profile, autostart=autostart,
                                 sim_time_scale=sim_time_scale, session=self.session)
            for name in hosts
        }
        self.focused = hosts[0]
        self.recorder = RecorderHandle(self.session, wanted=record, path=record_path, on_error=self._error)
        self._closed = False

    # ------------------------------------------------------------------ the fleet
    @property
    def hosts(self) -> list[str]:
        """Every host of the session, in the order given (the fleet strip's order)."""
        return list(self.members)

    def focus(self, host: str) -> None:
        """Act on ``host`` from now on (the cockpit shows it)."""
        if host not in self.members:
            raise NotAvailable(f"{host} is not in this session ({', '.join(self.members)})")
        self.focused = host

    @property
    def member(self) -> LiveController:
        """The focused host's controller."""
        return self.members[self.focused]

    @property
    def host_name(self) -> str:
        return self.focused

    @property
    def watch_url(self) -> str | None:
        return self.member.watch_url

    @property
    def profiles(self) -> ProfileBook:
        return self.member.profiles

    @property
    def simulated(self) -> bool:
        return self.member.simulated

    @property
    def connected(self) -> bool:
        return self.member.connected

    @property
    def running_profile(self) -> str | None:
        return self.member.running_profile

    # ------------------------------------------------------------------ set-up
    async def start(self) -> None:
        """Start every host at once; one that is slow to connect holds up none of the others."""
        self.session.bind_loop(asyncio.get_running_loop())
        self.recorder.hold_early()
        results = await asyncio.gather(*(m.start() for m in self.members.values()), return_exceptions=True)
        for name, result in zip(self.members, results):
            if isinstance(result, BaseException):  # start() reports its own failures; this is a bug's trace
                self._error("host", f"{name}: could not start: {result}")
        self.recorder.open(FLEET_RECORDING_NAME, None, hosts=self.hosts)

    # ------------------------------------------------------------------ the focused host's actions
    def profile_names(self) -> list[str]:
        return self.member.profile_names()

    def plan_swap(self, profile: str) -> SwapPlan:
        return self.member.plan_swap(profile)

    async def swap(self, profile: str) -> None:
        await self.member.swap(profile)

    def mark_baseline(self) -> str | None:
        return self.member.mark_baseline()

    def default_sweep_spec(self) -> SweepSpec:
        return self.member.default_sweep_spec()

    async def start_sweep(self, spec: SweepSpec) -> None:
        await self.member.start_sweep(spec)

    async def stop_sweep(self) -> None:
        await self.member.stop_sweep()

    @property
    def busy(self) -> str | None:
        """The focused host's sweep or swap (what the keys wait for)."""
        return self.member.busy

    @property
    def busy_anywhere(self) -> dict[str, str]:
        """Host -> its sweep or swap under way, over the whole fleet (what quitting waits for)."""
        return {name: m.busy for name, m in self.members.items() if m.busy is not None}

    def plan_tune(self) -> list[str]:
        return self.member.plan_tune()

    async def start_tune(self) -> None:
        await self.member.start_tune()

    def tune_action(self, action: str) -> str:
        return self.member.tune_action(action)

    @property
    def tune_running(self) -> bool:
        return self.member.tune_running

    # ------------------------------------------------------------------ the recording
    def add_note(self, text: str) -> None:
        self.member.add_note(text)

    def add_marker(self, label: str = "") -> None:
        self.member.add_marker(label)

    def toggle_recording(self) -> bool:
        return self.recorder.toggle(FLEET_RECORDING_NAME, None, hosts=self.hosts)

    @property
    def recording_path(self) -> str | None:
        return self.recorder.path

    @property
    def last_recording_path(self) -> str | None:
        return self.recorder.last_path

    # ------------------------------------------------------------------ errors and shutdown
    def _error(self, source: str, message: str) -> None:
        log.warning("%s: %s", source, message)
        self.session.publish(ErrorEvent(host=self.focused, source=source, message=message))

    def quit_rule(self) -> str:
        """Per host, what quitting does to its server (the quit confirmation)."""
        return " ".join(f"{name}: {m.quit_rule()}" for name, m in self.members.items())

    async def shutdown(self) -> None:
        """Every host shuts down at once (a swap under way ends on its own terms); then the recording closes."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(m.shutdown() for m in self.members.values()), return_exceptions=True)
        self.recorder.close()
