"""Quitting: what it would cut short, the confirm, and the controller stopped (the recording flushed) once.

A mixin of the cockpit app.  A swap or a sweep under way on any host asks first; the controller says what quitting
does to each server (:meth:`~kimitui.control.Controller.quit_rule`).
"""

from __future__ import annotations


from kimitui.control import Fleet
from kimitui.tui.cockpit_base import CockpitBase
from kimitui.tui.screens.confirm import Confirm


class QuitActions(CockpitBase):
    """``q``: confirm what it would cut short, then stop the controller; the app's unmount stops it too."""

    _shutdown_done = False
    """The controller was asked to shut down (quit, then unmount: once)."""

    def _quit_rule(self) -> str:
        """What quitting does to the host's server, from the controller (a replay has no rule)."""
        return self._safe(lambda: self.controller.quit_rule()) or ""

    def _busy_for_quit(self) -> str | None:
        """The work quitting would cut short: the focused host's, or in a fleet any host's (named)."""
        ctl = self.controller
        anywhere = self._safe(lambda: ctl.busy_anywhere if isinstance(ctl, Fleet) else None)  # 3.11 reads it to check
        if anywhere:
            return ", ".join(f"{what} on {host}" for host, what in anywhere.items())
        return self._safe(lambda: self.controller.busy)

    async def action_quit(self) -> None:
        busy = self._busy_for_quit()
        if busy:
            def answered(yes: bool | None) -> None:
                if yes:
                    self.run_worker(self._quit(), exit_on_error=False)

            rule = self._quit_rule() or "It will be stopped; everything so far stays in the recording."
            self.push_screen(Confirm(f"A {busy} is running. Quit anyway?\n{rule}",
                                     yes="Quit", no="Keep running"), answered)
            return
        await self._quit()

    async def _quit(self) -> None:
        if self._safe(lambda: self.controller.busy) == "swap":
            # the controller's own rule: a start from nothing is called off at once, a real swap finished first
            first_start = self._quit_rule().startswith("The server still starting is stopped at once")
            self.notify("stopping the server still starting, then shutting down…" if first_start else
                        "finishing the swap first (or rolling it back), then shutting down…", timeout=30)
        else:
            self.notify("shutting down (flushing the recording)…")
        await self._stop_controller()
        self.exit(0)

    async def _stop_controller(self) -> None:
        if self._shutdown_done:
            return
        self._shutdown_done = True
        await self._call("shutdown", self.controller.shutdown)
        self.painter.close()

    async def on_unmount(self) -> None:
        await self._stop_controller()
        self.collector.stop()
