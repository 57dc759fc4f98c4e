"""What the operator does to the host from the cockpit: swaps, the baseline, sweeps, the autopilot, the recording.

A mixin of the cockpit app (the bindings name these actions; Textual finds them on the app).  Every step goes
through the controller's safe calls (:class:`~kimitui.tui.cockpit_base.CockpitBase`) and a confirm where a stray key
would cost minutes: a swap shows its plan, stopping a sweep asks first.
"""

from __future__ import annotations

import time

from kimitui.control import Autopilot
from kimitui.events import SweepSpec
from kimitui.tui.cockpit_base import FAILED, CockpitBase
from kimitui.tui.model.keys import profile_keys
from kimitui.tui.render import clock
from kimitui.tui.screens.confirm import Confirm
from kimitui.tui.screens.swap_confirm import SwapConfirm
from kimitui.tui.screens.sweep_form import SweepForm
from kimitui.tui.screens.text_prompt import TextPrompt
from kimitui.tui.screens.tune_screen import TuneScreen
from kimitui.tui.widgets.header_bar import HeaderBar, RecordingStatus


class HostActions(CockpitBase):
    """Profiles and the baseline, sweeps, the autopilot, notes, markers and the recording's status."""

    async def action_pick_profile(self, number: int) -> None:
        keys = await self._call("profiles", lambda: profile_keys(self.controller))
        if keys is FAILED:
            return
        by_key, _notes = keys
        name = by_key.get(str(number))
        if name is None:
            taken = ", ".join(by_key) or "none"
            self.notify(f"no profile on key {number} (profile keys: {taken})", severity="warning")
            return
        await self._offer_swap(name)

    async def action_swap_baseline(self) -> None:
        """Back to the host's baseline profile, through the same confirm as a profile key (the compare view's ``b``)."""
        reason = self._blocked("pick_profile")
        if reason or not self.model.baseline:
            self.notify(reason or "no baseline is marked on this host (b marks the running profile)", severity="warning")
            return
        await self._offer_swap(self.model.baseline)

    async def _offer_swap(self, name: str) -> None:
        """The swap's plan to confirm; an offered variant taken instead gets its own confirm (its diff) first."""
        plan = await self._call("plan swap", self.controller.plan_swap, name)
        if plan is FAILED:
            return

        def chosen(target: str | None) -> None:
            if target and target != plan.target:
                self.call_later(self._offer_swap, target)
            elif target:
                self.notify(f"swapping to {target}…")
                self.background_call("swap", self.controller.swap, target)

        self.push_screen(SwapConfirm(plan), chosen)

    async def action_baseline(self) -> None:
        name = await self._call("baseline", self.controller.mark_baseline)
        if name is FAILED:
            return
        if name:
            self.model.baseline = name
            self.painter.mark("header")
            self.notify(f"baseline: {name}")
        else:
            self.notify("no profile is running to mark as baseline", severity="warning")

    async def action_sweep(self) -> None:
        if self._safe(lambda: self.controller.busy) == "sweep":
            self._ask_stop_sweep()
            return
        spec = await self._call("sweep defaults", self.controller.default_sweep_spec)
        if spec is FAILED:
            return

        def chosen(new: SweepSpec | None) -> None:
            if new is not None:
                self.notify(f"sweep: levels {new.levels}, {new.mode}, {new.max_tokens} tokens")
                self.background_call("sweep", self.controller.start_sweep, new)

        self.push_screen(SweepForm(spec, self.model), chosen)

    def _ask_stop_sweep(self) -> None:
        """A sweep can take a quarter of an hour: one stray ``s`` must not end it."""
        sw = self.model.sweep
        where = ""
        if sw is not None:
            done = len({lv.concurrency for lv in sw.levels})
            where = f" on {sw.profile or '?'} ({done} of {len(sw.spec.levels)} levels done, now C={sw.concurrency})"

        def answered(yes: bool | None) -> None:
            if yes:
                self.notify("stopping the sweep (finished levels are kept)…", severity="warning")
                self.background_call("stop sweep", self.controller.stop_sweep)

        self.push_screen(Confirm(f"Stop the sweep{where}?\n"
                                 "Finished levels are kept; the running level is recorded as aborted "
                                 "(not a curve point).\n[dim]Enter or y: stop · Esc or n: keep sweeping[/]",
                                 yes="Stop sweep", no="Keep sweeping", default=True), answered)

    async def action_autopilot(self) -> None:
        """Not running: its plan to confirm.  Running: its steps and curves, to pause, skip or stop it."""
        ctl = self.controller
        if not isinstance(ctl, Autopilot):
            self.notify("the autopilot runs on a live host", severity="warning")
            return
        if self._safe(lambda: ctl.tune_running):
            def steer(choice: str | None) -> None:
                if choice:
                    self.run_worker(self._tune_action(ctl, choice), exit_on_error=False)

            self.push_screen(TuneScreen(self.model), steer)
            return
        lines = await self._call("autopilot", ctl.plan_tune)
        if lines is FAILED:
            return

        def chosen(choice: str | None) -> None:
            if choice == "start":
                self.notify("autopilot: starting (a: its steps)")
                self.background_call("autopilot", ctl.start_tune)

        self.push_screen(TuneScreen(self.model, lines), chosen)

    async def _tune_action(self, ctl: Autopilot, choice: str) -> None:
        said = await self._call("autopilot", ctl.tune_action, choice)
        if isinstance(said, str):
            self.notify(said)

    def action_note(self) -> None:
        def chosen(text: str | None) -> None:
            if text and text.strip():
                self.run_worker(self._note(text.strip()), exit_on_error=False)

        self.push_screen(TextPrompt("Note for the recording", "what did you just see or change?"), chosen)

    async def _note(self, text: str) -> None:
        if await self._call("note", self.controller.add_note, text) is not FAILED:
            self.notify(f"note added: {text}")

    async def action_marker(self) -> None:
        label = clock(time.time())
        if await self._call("marker", self.controller.add_marker, label) is not FAILED:
            self.notify(f"marker dropped at {label}")

    async def action_record(self) -> None:
        on = await self._call("recording", self.controller.toggle_recording)
        if on is FAILED:
            return
        self._update_recording()
        path = self._safe(lambda: self.controller.recording_path)
        self.notify(f"recording {'on: ' + str(path) if on else 'off'}")

    def _update_recording(self) -> None:
        """The header's recording status; polled each tick (the recorder opens once the controller starts)."""
        path = self._safe(lambda: self.controller.recording_path)
        status = RecordingStatus(path, path is not None, self.controller.live)
        header = self.query_one(HeaderBar)
        if header.recording != status:
            header.recording = status
            self.painter.mark("header")
