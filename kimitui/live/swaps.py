"""The cockpit's swaps: planned before the operator confirms, run one at a time, their outcome followed.

On the simulated host every profile serves on ``sim_port`` when one is set; a swap that failed
there says the ways on when a process kimitui did not start holds the port.
"""

from __future__ import annotations

import asyncio
import logging

from kimitui.events import Event, ProfileSwitch
from kimitui.host.base import Host
from kimitui.launcher import guard
from kimitui.launcher.plan import SwapPlan, plan_swap
from kimitui.launcher.select import is_simulated_host
from kimitui.launcher.deploy import HostResolver
from kimitui.launcher.swap import SwapOptions, swap
from kimitui.live.foreign import ForeignPort
from kimitui.live.profiles import ProfileBook
from kimitui.live.tasks import Background, ErrorSink
from kimitui.profiles import Profile, ProfileError
from kimitui.profiles.deploy import on_port
from kimitui.session import Session
from kimitui.live.server_follower import ServerFollower

log = logging.getLogger(__name__)


def plan(profiles: ProfileBook, profile: str, *, host_name: str, simulated: bool,
         follower: ServerFollower | None) -> SwapPlan:
    """What swapping to ``profile`` would change, against what runs (where it really serves) and the baseline."""
    target = profiles.target(profile, simulated=simulated)
    running_name = follower.profile if follower is not None else None
    running = None
    if running_name and follower is not None:
        record = follower.record
        try:
            running = profiles.at_port(running_name, record.port if record is not None else None)
        except Exception as exc:  # a running profile whose file went away: plan without it
            log.debug("running profile %s: %s", running_name, exc)
    baseline = guard.load_baseline(host_name, running_name, profiles.dirs)
    if baseline is not None and simulated and profiles.sim_port is not None:
        baseline = on_port(baseline, profiles.sim_port)  # where the target serves: a moved port is no change
    return plan_swap(target, running=running, baseline=baseline)


class SwapDriver:
    """Runs the swaps of one live host and keeps the follower on what serves after each."""

    def __init__(self, session: Session, host: Host, follower: ServerFollower, *, profiles: ProfileBook,
                 foreign: ForeignPort, tasks: Background, on_error: ErrorSink,
                 sim_time_scale: float | None = None, hosts: HostResolver | None = None) -> None:
        """``hosts``: a deployment's other nodes by name (a multi-node profile's swap needs it)."""
        self.busy = False
        """From the swap's start until its outcome is decided (its ``ProfileSwitch``)."""
        self.started_here = False
        """Did a swap of this session bring a server up?  On the simulated host it is stopped on quit."""
        self._session = session
        self._host = host
        self._follower = follower
        self._profiles = profiles
        self._foreign = foreign
        self._tasks = tasks
        self._on_error = on_error
        self._simulated = is_simulated_host(host)
        self._sim_args = ("--time-scale", str(sim_time_scale)) if self._simulated and sim_time_scale is not None else ()
        self._task: asyncio.Task[None] | None = None
        self._hosts = hosts
        self._call_off = asyncio.Event()

    def on_event(self, event: Event) -> None:
        """Session sink: a switch decides the swap's outcome; what follows is bookkeeping."""
        if isinstance(event, ProfileSwitch) and event.host == self._host.name:
            self.busy = False

    def begin(self, profile: str) -> None:
        """Start the swap in the background; progress and the outcome arrive as events."""
        self.busy = True
        self._task = self._tasks.spawn(self._swap(profile))

    def call_off_start(self) -> None:
        """A start from nothing under way stops its server and ends at once (a swap still finishes or rolls back)."""
        self._call_off.set()

    async def finish(self, timeout: float) -> None:
        """A swap under way ends on its own terms (served or rolled back), for up to ``timeout``."""
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task], timeout=timeout)

    async def _swap(self, profile: str) -> None:
        try:
            options = SwapOptions(extra_dirs=tuple(self._profiles.dirs), sim_args=self._sim_args, hosts=self._hosts,
                                  call_off=self._call_off)
            outcome = await swap(self._host, self._target(profile), options, session=self._session)
            self.started_here = self.started_here or outcome.ok
            self.busy = False
            if outcome.record is not None:
                self._follower.profile = outcome.serving
                await self._follower.refollow()
            if not outcome.ok and not self._call_off.is_set():
                hint = await self._held_port_hint(profile)
                self._on_error("swap", f"swap to {profile}: {outcome.outcome}: {outcome.reason}{hint}")
        except Exception as exc:
            self._on_error("swap", f"swap to {profile} failed: {exc}")
        finally:
            self.busy = False

    def _target(self, profile: str) -> Profile | str:
        """The profile on the simulated host's port; else its name (the swap loads it, or refuses in its own words)."""
        if not (self._simulated and self._profiles.sim_port is not None):
            return profile
        try:
            return self._profiles.target(profile, simulated=True)
        except ProfileError:
            return profile

    async def _held_port_hint(self, profile: str) -> str:
        if not self._simulated:
            return ""
        record = self._follower.record
        return await self._foreign.hint_after_failure(profile, record.port if record is not None else None)
