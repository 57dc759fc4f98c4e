"""The cockpit's autopilot: a tune planned from what the cockpit knows, run in the background, steered by keys.

The plan starts from the host's baseline (else what runs), tries the default changes
(:func:`kimitui.tune.candidates.default_candidates`) and sweeps what the sweep form would (the
remembered workload: "the same sweep").  Progress is a ``TuneProgress`` event; quitting the cockpit
leaves the tune resumable (``kimitui tune --resume``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from kimitui.control import NotAvailable
from kimitui.launcher import guard
from kimitui.profiles import ProfileError, load_profile, scan_profiles
from kimitui.tune import lock as tune_lock
from kimitui.tune import state as store
from kimitui.tune.candidates import default_candidates
from kimitui.events import Event, ServerInfo, SweepSpec
from kimitui.tune.plan import plan_lines
from kimitui.tune.state import TunePlan
from kimitui.tune.tuner import Tuner, new_state

if TYPE_CHECKING:
    from kimitui.live.controller import LiveController


class ControllerHost:
    """:class:`kimitui.tune.host.TuneHost` over the live controller: the autopilot drives the cockpit's own swaps,
    sweeps and recording (``kimitui tune`` builds a headless one)."""

    def __init__(self, ctl: LiveController) -> None:
        self.ctl = ctl
        self.session = ctl.session
        self.host_name = ctl.host_name

    @property
    def running_profile(self) -> str | None:
        return self.ctl.running_profile

    @property
    def profile_dirs(self) -> list[str]:
        return self.ctl.profiles.dirs

    @property
    def busy(self) -> str | None:
        return self.ctl.busy

    async def swap(self, profile: str) -> None:
        await self.ctl.swap(profile)

    async def start_sweep(self, spec: SweepSpec) -> None:
        await self.ctl.start_sweep(spec)

    async def stop_sweep(self) -> None:
        await self.ctl.stop_sweep()

    def sweep_target(self) -> tuple[str, str]:
        spec = self.ctl.default_sweep_spec()
        return spec.url, spec.model


TUNE_ACTIONS = ("pause", "resume", "skip", "stop")


class Tunes:
    """At most one tune per cockpit session."""

    def __init__(self, ctl: LiveController) -> None:
        self._ctl = ctl
        self.tuner: Tuner | None = None
        self._task: asyncio.Task[object] | None = None
        self._lock: tune_lock.TuneLock | None = None
        """The running tune's lock (:mod:`kimitui.tune.lock`): one autopilot per tune, the CLI's included."""
        self._sim_scale: float | None = None
        """The simulated server's own clock speed (``/server_info``'s ``sim_time_scale``): the estimate's."""
        ctl.session.add_sink(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if isinstance(ev, ServerInfo) and ev.args.get("sim"):
            scale = ev.args.get("sim_time_scale")
            self._sim_scale = float(scale) if isinstance(scale, (int, float)) and scale > 0 else None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def plan(self) -> tuple[TunePlan, list[str]]:
        """The plan a start would run, and its lines for the confirmation (raises NotAvailable)."""
        ctl = self._ctl
        if self.running:
            raise NotAvailable("the autopilot is already running (a: pause, skip or stop it)")
        if ctl.watch_url is not None:
            raise NotAvailable(f"{ctl.watch_url} is watched, not controlled: the autopilot swaps profiles")
        start = guard.baseline_name(ctl.host_name, ctl.running_profile)
        if not start:
            raise NotAvailable("no baseline and nothing running: start a profile (or mark a baseline) first")
        try:
            profile = load_profile(start, ctl.profile_dirs)
        except ProfileError as exc:
            raise NotAvailable(f"the start profile {start}: {exc}") from exc
        good, _broken = scan_profiles(ctl.profile_dirs)
        found, skipped = default_candidates(profile, good)
        if not found:
            raise NotAvailable(f"nothing to try from {start}: " + ("; ".join(skipped) or "no single-knob variant"))
        workload = ctl.default_sweep_spec().model_copy(update={"url": "", "model": ""})
        plan = TunePlan(start=profile.name, candidates=found, skipped=skipped, workload=workload,
                        sim_time_scale=(ctl.sim_time_scale or self._sim_scale) if ctl.simulated else None)
        return plan, plan_lines(plan, ctl.host_name, ctl.simulated)

    def start(self, plan: TunePlan) -> Path:
        if self.running:
            raise NotAvailable("the autopilot is already running")
        if self._ctl.busy is not None:
            raise NotAvailable(f"a {self._ctl.busy} is running: the autopilot starts once it is over")
        tune_id, where = store.new_tune_dir(self._ctl.host_name)
        lock = tune_lock.acquire(where, "the cockpit")  # `kimitui tune --resume` refuses this tune while it runs
        try:
            state = new_state(tune_id, self._ctl.host_name, plan)
            store.save(state, where)
            self.tuner = Tuner(ControllerHost(self._ctl), state, where)
            self._task = self._ctl.tasks.spawn(self.tuner.run())
        except BaseException:
            lock.release()
            raise
        self._lock = lock
        self._task.add_done_callback(lambda _t: lock.release())  # ended, failed or cancelled (the cockpit quit)
        return where

    def act(self, action: str) -> str:
        """Pause, resume, skip the step under way, or stop (the best so far serves again); says what it did."""
        tuner = self.tuner
        if tuner is None or not self.running:
            raise NotAvailable("the autopilot is not running")
        if action == "pause":
            tuner.pause()
            return "autopilot: pausing after the phase under way"
        if action == "resume":
            tuner.unpause()
            return "autopilot: resumed"
        if action == "skip":
            tuner.skip()
            return "autopilot: skipping the step (the best serves again)"
        if action == "stop":
            tuner.stop("stopped")
            return "autopilot: stopping; the best so far serves again"
        raise NotAvailable(f"autopilot: no action {action!r} ({', '.join(TUNE_ACTIONS)})")

    async def leave(self) -> None:
        """The cockpit quits: the tune stops where it is and stays resumable (``kimitui tune --resume``)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._lock is not None:
            self._lock.release()
