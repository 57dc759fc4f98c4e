"""The live controller's sweeps: one at a time, its defaults remembered, the confound guard's notice first."""

from __future__ import annotations

import logging

from kimitui.control import NotAvailable
from kimitui.sglang.server_caps import apply_caps, sweep_caps
from kimitui.events import ErrorEvent, SweepSpec
from kimitui.launcher.drift import fetch_server_info
from kimitui.launcher.guard import sweep_notice
from kimitui.live.sweep_defaults import SweepDefaults
from kimitui.live.tasks import ErrorSink
from kimitui.loadgen.runner import SweepRunner
from kimitui.profiles import Profile
from kimitui.session import Session

log = logging.getLogger(__name__)


def guard_notice(host_name: str, running: Profile) -> ErrorEvent | None:
    """The guard's notice for a sweep of ``running``: what changed since the host's baseline, or None.

    Never an error (the sweep runs): a confounded change is a warning, one knob or none a sweep
    measures is information."""
    report = sweep_notice(host_name, running)
    if report is None or not report.changes:
        return None
    lines = report.lines()
    return ErrorEvent(host=host_name, source="guard", severity=report.severity, message=" ".join(lines[:1]),
                      detail="\n".join(lines))


async def with_server_caps(spec: SweepSpec) -> SweepSpec:
    """``spec`` asking what the server's ``/server_info`` says it takes (speculative figures, labels)."""
    try:
        args = await fetch_server_info(spec.url, timeout=5.0)
    except Exception as exc:  # no /server_info: the sweep runs plain, as against any OpenAI server
        log.debug("server_info for %s: %s", spec.url, exc)
        args = {}
    return apply_caps(spec, sweep_caps(args))


class Sweeps:
    """Starts, waits for and stops the one sweep of a live session."""

    def __init__(self, session: Session, defaults: SweepDefaults, *, on_error: ErrorSink) -> None:
        self.defaults = defaults
        self.busy = False
        """True from the start of a sweep until it ended (or failed)."""
        self._session = session
        self._on_error = on_error
        self._runner: SweepRunner | None = None

    async def start(self, spec: SweepSpec, *, host_name: str, profile: str | None, running: Profile | None) -> None:
        """Remember ``spec`` as the next defaults, show the guard's notice for ``running``, start the sweep."""
        self.defaults.remember(spec)
        if running is not None:
            self._guard_notice(host_name, running)
        spec = await with_server_caps(spec)
        self._runner = SweepRunner(self._session, spec, profile=profile, host=host_name)
        self.busy = True
        await self._runner.start()

    def _guard_notice(self, host_name: str, running: Profile) -> None:
        """What changed since the host's baseline: a sweep of a confounded change says so first."""
        try:
            event = guard_notice(host_name, running)
        except Exception as exc:
            log.debug("guard: %s", exc)
            return
        if event is not None:
            self._session.publish(event)

    async def wait(self) -> None:
        """Until the sweep ends; a failure is shown, not raised."""
        try:
            if self._runner is not None:
                await self._runner.wait()
        except Exception as exc:
            self._on_error("sweep", f"sweep failed: {exc}")
        finally:
            self.busy = False

    async def stop(self) -> None:
        if self._runner is None or not self._runner.running:
            raise NotAvailable("no sweep is running")
        await self._runner.abort()

    async def abort(self) -> None:
        """On shutdown: stop a sweep that runs (what it measured stays in the recording)."""
        if self._runner is not None and self._runner.running:
            try:
                await self._runner.abort()
            except Exception as exc:
                log.debug("abort sweep: %s", exc)
