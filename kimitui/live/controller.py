"""The live controller: everything the cockpit shows, started and wired.

``LiveController`` owns one Session and composes, for one host:

* the recording (:class:`~kimitui.live.recorder.RecorderHandle`, a Session sink);
* the parts that work on the host (:class:`~kimitui.live.on_host.LiveHost`): the GPU agent
  stream, the server follower (log and metrics of whatever runs, retargeted on every swap),
  the swaps, and the check for a port held by a process kimitui did not start;
* sweeps (:class:`~kimitui.live.sweeps.Sweeps`) and their remembered form.

On the simulated host with nothing running it launches the known-good profile, so a
newcomer sees a server start — unless a process kimitui did not start holds its port: then
it says who, and the ways on, and offers :meth:`LiveController.watch` when that server
answers ``/v1/models``.  Nothing here imports Textual, and nothing raises into the UI:
failures become ``ErrorEvent``s.
"""

from __future__ import annotations

import asyncio
import logging

from kimitui.config import load_config
from kimitui.control import NotAvailable
from kimitui.events import Baseline, ErrorEvent, Marker, Note, ProfileState, SweepSpec
from kimitui.host.base import Host, HostError, HostUnavailable
from kimitui.hosts_from_config import make_host
from kimitui.launcher import guard
from kimitui.launcher.plan import SwapPlan
from kimitui.launcher.swap import DEFAULT_TIMEOUT_S
from kimitui.live.on_host import LiveHost
from kimitui.live.profiles import ProfileBook
from kimitui.live.quitting import quit_rule
from kimitui.live.recorder import RecorderHandle
from kimitui.live.sweep_defaults import DEFAULT_LEVELS, SweepDefaults
from kimitui.live.sweeps import Sweeps
from kimitui.live.swaps import plan
from kimitui.live.tasks import Background
from kimitui.live.tunes import Tunes
from kimitui.loadgen.sweep import base_url
from kimitui.profiles import Profile
from kimitui.session import Session
from kimitui.tune.state import TunePlan

__all__ = ["DEFAULT_LEVELS", "DEFAULT_PROFILE", "LiveController"]

log = logging.getLogger(__name__)

DEFAULT_PROFILE = "ep8-tuned"
"""The field notes' known-good profile: what the simulated host starts with."""


class LiveController:
    """Controller of a live host (see ``kimitui.control.Controller``)."""

    live = True

    def __init__(self, config_path: str | None = None, host: str | None = None, profile_dirs: list[str] | None = None,
                 record_path: str | None = None, record: bool = True, default_profile: str = DEFAULT_PROFILE,
                 autostart: bool = True, sim_time_scale: float | None = None, watch_url: str | None = None,
                 sim_port: int | None = None, session: Session | None = None) -> None:
        """``watch_url``: watch a server kimitui did not start (metrics, health, sweeps); never swap it.

        ``sim_port``: the simulated host's profiles serve on this port (``--sim-port``; else the host's
        ``sim_port``, else ``[sim] port``).  ``session``: a fleet's shared one (its events name this host)."""
        self.config = load_config(config_path)
        self.profile_dirs = list(profile_dirs or [])
        self.default_profile = default_profile
        self.autostart = autostart
        self.sim_time_scale = sim_time_scale
        self.watch_url = watch_url.rstrip("/") if watch_url else None
        self.watch_offer: str | None = None
        """A server kimitui did not start that holds the simulated host's port and answers
        ``/v1/models``: :meth:`watch` it (``None``: nothing to offer)."""
        self._host_choice = host or ("local" if watch_url and not self.config.hosts else None)
        self.host_name = self._resolve_host_name(self._host_choice)
        self.sim_port: int | None = self.config.sim_port(self.host_name, sim_port)
        self.session = session if session is not None else Session(host=self.host_name)
        self.profiles = ProfileBook(self.profile_dirs, self.sim_port)
        self.recorder = RecorderHandle(self.session, wanted=record, path=record_path, on_error=self._error)
        self.tasks = Background(self._error)
        self.sweeps = Sweeps(self.session, SweepDefaults(), on_error=self._error)
        self.tunes = Tunes(self)
        self._tune_plan: TunePlan | None = None
        self._live: LiveHost | None = None
        self.keep_serving = False
        """Leave the server serving on shutdown even on the simulated host (``kimitui tune`` ends with its best serving)."""
        self._connected = False
        self._closed = False

    def _resolve_host_name(self, host: str | None) -> str:
        if host:
            return host
        if self.config.default_host:
            return self.config.default_host
        return next(iter(self.config.hosts)) if len(self.config.hosts) == 1 else "sim"

    @property
    def _host(self) -> Host | None:
        return self._live.host if self._live is not None else None

    @property
    def simulated(self) -> bool:
        return self._live is not None and self._live.simulated

    @property
    def last_recording_path(self) -> str | None:
        """The closed recording's path on disk (its final name)."""
        return self.recorder.last_path

    @property
    def _running_profile(self) -> str | None:
        return self._live.follower.profile if self._live is not None else None

    @property
    def connected(self) -> bool:
        """The host is connected and what runs there was looked for (a tune may start)."""
        return self._connected and self._live is not None and self._live.looked

    @property
    def running_profile(self) -> str | None:
        """The profile kimitui follows on the host (what serves, or is starting), if any."""
        return self._running_profile

    def _load_running(self) -> Profile | None:
        """The running profile as written, or None (nothing runs, or its file went away)."""
        if not self._running_profile:
            return None
        try:
            return self.profiles.load(self._running_profile)
        except Exception as exc:
            log.debug("running profile %s: %s", self._running_profile, exc)
            return None

    # ------------------------------------------------------------------ set-up
    async def start(self) -> None:
        self.session.bind_loop(asyncio.get_running_loop())
        self.recorder.hold_early()  # the recording is named after the running profile: keep events till then
        try:
            host = make_host(self.config, self._host_choice, on_event=self.session.publish)
        except Exception as exc:  # unknown host name, jump loop: shown, not raised
            self._error("host", f"cannot use host {self.host_name}: {exc}")
            self.recorder.open(self.host_name, None)
            return
        self.host_name = host.name
        self._live = live = LiveHost(host, self.session, profiles=self.profiles, config_path=self.config.path,
                                     tasks=self.tasks, on_error=self._error, sim_time_scale=self.sim_time_scale)
        try:
            await host.connect()
        except HostUnavailable as exc:
            # Down or unreachable for now: say so, keep trying in the background.
            self._error("host", f"cannot connect to {self.host_name}: {exc}; retrying")
            self.recorder.open(self.host_name, None)
            self.tasks.spawn(self._connect_later(live))
            return
        except Exception as exc:  # a changed host key, refused credentials: a human must act
            self._error("host", f"cannot connect to {self.host_name}: {exc}")
            self.recorder.open(self.host_name, None)
            return
        self._connected = True
        self.tasks.spawn(self._start_sources(live))

    async def _connect_later(self, live: LiveHost) -> None:
        try:
            await live.host.wait_connected(None)
        except HostError as exc:
            self._error("host", f"giving up on {self.host_name}: {exc}")
            return
        self._connected = True
        await self._start_sources(live)

    async def _start_sources(self, live: LiveHost) -> None:
        entry = self.config.hosts.get(self.host_name)
        await live.start_gpu((entry.python if entry is not None else None) or "python3")
        if self.watch_url is not None:
            await self._watch_server(live, self.watch_url)
            return
        if self.sim_port is not None and not live.simulated:
            self._info(f"the simulated host's port {self.sim_port} does not apply to {self.host_name}, a real "
                       "host: its profiles serve on their own ports")
        await live.follow_what_runs()
        autostart = not live.found_at_start and live.simulated and self.autostart
        self.recorder.open(self.host_name, self.default_profile if autostart else self._running_profile)
        base = guard.baseline_name(self.host_name, self._running_profile)
        if base:
            self.session.publish(Baseline(host=self.host_name, profile=base))
        if autostart:
            held, self.watch_offer = await live.foreign.held_at_start(self.default_profile)
            if not held:
                await self.swap(self.default_profile)

    # ------------------------------------------------------------------ watching a server kimitui did not start
    async def watch(self, url: str | None = None) -> None:
        """Switch this session to watch mode: follow ``url`` (default: :attr:`watch_offer`) without controlling it.

        Only while kimitui runs nothing here itself, so no server of ours is left unfollowed."""
        url = url or self.watch_offer
        if not url:
            raise NotAvailable("there is no server to watch: pass its URL (`kimitui run --url URL`)")
        if self.watch_url is not None:
            raise NotAvailable(f"already watching {self.watch_url}")
        if self.busy is not None:
            raise NotAvailable(f"a {self.busy} is running")
        if self._live is not None and self._live.follower.record is not None:
            raise NotAvailable(f"kimitui runs {self._live.follower.record.profile} on {self.host_name}: watching "
                               "another server would leave it unfollowed")
        if self._live is None or not self._connected:
            raise NotAvailable(f"host {self.host_name} is not connected")
        self.watch_url = url.rstrip("/")
        self.watch_offer = None
        await self._watch_server(self._live, self.watch_url)

    async def _watch_server(self, live: LiveHost, url: str) -> None:
        """A server kimitui did not start: poll it and sweep it, but never stop, start or swap it."""
        url = base_url(url)
        self.recorder.open(self.host_name, "watched")
        self.session.publish(ProfileState(host=self.host_name, profile=None, state="serving",
                                          detail=f"watching {url}: not started by kimitui"))
        self._info(f"watching {url}, a server kimitui did not start: metrics, health and sweeps; "
                   "its log is not followed and swaps are refused")
        await live.follower.watch(url)

    def _refuse_if_watched(self) -> None:
        if self.watch_url is not None:
            raise NotAvailable(f"{self.watch_url} is watched, not controlled: kimitui did not start it, so it "
                               "never stops or swaps it (open the cockpit on its host to control a server "
                               "kimitui starts)")

    # ------------------------------------------------------------------ profiles and swaps
    def profile_names(self) -> list[str]:
        return self.profiles.names()

    def plan_swap(self, profile: str) -> SwapPlan:
        self._refuse_if_watched()
        follower = self._live.follower if self._live is not None else None
        return plan(self.profiles, profile, host_name=self.host_name, simulated=self.simulated, follower=follower)

    async def swap(self, profile: str) -> None:
        self._refuse_if_watched()
        if self.busy == "sweep":
            raise NotAvailable("a sweep is running: stop it before swapping profiles")
        if self.busy == "swap":
            raise NotAvailable("a swap is already running")
        if self._live is None or not self._connected:
            raise NotAvailable(f"host {self.host_name} is not connected")
        self._live.swaps.begin(profile)

    def mark_baseline(self) -> str | None:
        if not self._running_profile:
            raise NotAvailable("no profile is running to mark as baseline")
        self.session.publish(guard.mark_baseline(self.host_name, self._running_profile))
        return self._running_profile

    # ------------------------------------------------------------------ sweeps
    def default_sweep_spec(self) -> SweepSpec:
        if self._live is None:  # no host yet
            url, model = "http://127.0.0.1:30001", "default"
        else:
            url, model = self._live.follower.sweep_target(self._load_running())
        return self.sweeps.defaults.spec(url, model)

    async def start_sweep(self, spec: SweepSpec) -> None:
        if self.busy is not None:
            raise NotAvailable(f"a {self.busy} is running")
        await self.sweeps.start(spec, host_name=self.host_name, profile=self._running_profile,
                                running=self._load_running())
        self.tasks.spawn(self.sweeps.wait())

    async def stop_sweep(self) -> None:
        await self.sweeps.stop()

    @property
    def busy(self) -> str | None:
        if self._live is not None and self._live.swaps.busy:
            return "swap"
        return "sweep" if self.sweeps.busy else None

    # ------------------------------------------------------------------ the autopilot
    def plan_tune(self) -> list[str]:
        """The autopilot's plan in words (what the confirmation shows); raises NotAvailable."""
        self._tune_plan, lines = self.tunes.plan()
        return lines

    async def start_tune(self) -> None:
        plan = self._tune_plan or self.tunes.plan()[0]
        self._tune_plan = None
        where = self.tunes.start(plan)
        self._info(f"autopilot started: its state and report are in {where}")

    def tune_action(self, action: str) -> str:
        return self.tunes.act(action)

    @property
    def tune_running(self) -> bool:
        return self.tunes.running

    # ------------------------------------------------------------------ the recording
    def add_note(self, text: str) -> None:
        self.session.publish(Note(host=self.host_name, text=text))

    def add_marker(self, label: str = "") -> None:
        self.session.publish(Marker(host=self.host_name, label=label))

    def toggle_recording(self) -> bool:
        return self.recorder.toggle(self.host_name, self._running_profile)

    @property
    def recording_path(self) -> str | None:
        return self.recorder.path

    # ------------------------------------------------------------------ errors and shutdown
    def _error(self, source: str, message: str) -> None:
        log.warning("%s: %s", source, message)
        self.session.publish(ErrorEvent(host=self.host_name, source=source, message=message))

    def _info(self, message: str) -> None:
        self.session.publish(ErrorEvent(host=self.host_name, source="cockpit", severity="info", message=message))

    def _stops_server_on_quit(self) -> bool:
        """Quitting stops whatever this kimitui brought up here: the simulated host had nothing when it started."""
        return (self._live is not None and self._live.looked and self.simulated and not self._live.found_at_start
                and not self.keep_serving and self.watch_url is None)

    def quit_rule(self) -> str:
        """What quitting does to this host's server, in words, for the quit confirmation."""
        found = self._live is not None and self._live.found_at_start
        # nothing was found and none of this session's swaps served yet: the swap under way starts from nothing
        first_start = self.busy == "swap" and self._stops_server_on_quit() and self._live is not None \
            and not self._live.swaps.started_here
        return quit_rule(busy=self.busy, simulated=self.simulated, found_at_start=found, host_name=self.host_name,
                         first_start=first_start)

    async def shutdown(self) -> None:
        """Finish a swap under way, stop sources, then close the recording.

        A swap under way ends on its own terms (served or rolled back), bounded by the readiness
        and rollback timeouts; past them it is cancelled and the host's swap supervisor finishes
        the host side alone.  The server keeps serving, except on the simulated host when this
        kimitui started it from nothing (:meth:`quit_rule` says which, in words); there a start
        from nothing still under way is called off rather than waited for.
        """
        if self._closed:
            return
        self._closed = True
        await self.tunes.leave()
        if self._live is not None:
            if self._stops_server_on_quit():
                self._live.swaps.call_off_start()  # why wait for a server only to stop it?
            await self._live.swaps.finish(timeout=2 * DEFAULT_TIMEOUT_S + 60)
        await self.sweeps.abort()
        self.tasks.cancel_all()
        if self._live is not None:
            await self._live.close(keep_server=self.keep_serving)
        self.recorder.close()
