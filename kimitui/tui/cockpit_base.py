"""What every room of the cockpit app shares: the controller, the models, and calls that never raise into the UI.

:class:`~kimitui.tui.app.KimituiApp` is composed of rooms (its replay transport, its actions on the host...), each a
mixin over :class:`CockpitBase`: a room reaches the controller only through :meth:`CockpitBase._call` (a failure
becomes a notification, never a traceback) or :meth:`CockpitBase._safe` (a property that cannot be read is None).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar, overload

from textual.app import App

from kimitui.control import Controller, NotAvailable, ReplayControls
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.model.fleet_state import FleetModels
from kimitui.tui.model.heatmap_data import expert_parallel
from kimitui.tui.model.keys import blocked_reason
from kimitui.tui.model.tune_view import tune_active
from kimitui.tui.painter import Painter
from kimitui.tui.quiet_collector import QuietCollector

T = TypeVar("T")


class Failed(enum.Enum):
    """Marker for a controller call that failed (None is a legitimate result)."""

    FAILED = "<failed>"


FAILED: Final = Failed.FAILED


class CockpitBase(App[int]):
    """The state the rooms share (set by ``KimituiApp.__init__``) and the safe ways to the controller."""

    controller: Controller
    config_keys: dict[str, str]
    """The config's ``[keys]``: action -> key, applied over the bindings."""
    fleet: FleetModels
    """One model per host (a fleet session), the focused one drawn; one host: the one model."""
    replay: ReplayControls | None
    """The controller's replay controls; None live."""
    painter: Painter
    collector: QuietCollector
    """Python's full garbage collections, run between key presses (issue 33)."""

    @property
    def model(self) -> CockpitModel:
        """The focused host's model: what every panel draws."""
        return self.fleet.model

    def _safe(self, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except Exception:
            return None

    @overload
    async def _call(self, what: str, fn: Callable[..., Awaitable[T]], *args: object) -> T | Failed: ...

    @overload
    async def _call(self, what: str, fn: Callable[..., T], *args: object) -> T | Failed: ...

    async def _call(self, what: str, fn: Callable[..., object], *args: object) -> object:
        """Run a controller call; NotAvailable -> warning, anything else -> error toast. Never raises."""
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        except NotAvailable as exc:
            self.notify(str(exc) or f"{what} is not available here", severity="warning")
        except Exception as exc:  # the app keeps running whatever a controller does
            self.notify(f"{what} failed: {exc}", severity="error", timeout=10)
        return FAILED

    def background_call(self, what: str, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run a controller call as a worker (a swap, a sweep): the app keeps drawing meanwhile."""
        self.run_worker(self._call(what, fn, *args), group=what, exit_on_error=False)

    def _blocked(self, action: str) -> str | None:
        """Why ``action`` cannot run now (a swap or sweep under way, a watched server...), or None."""
        busy = self._safe(lambda: self.controller.busy)
        watched = self._safe(lambda: self.controller.watch_url)
        return blocked_reason(action, busy, self.model.profile_state, watched if isinstance(watched, str) else None,
                              tuning=tune_active(self.model.tune))

    def _experts_useful(self) -> bool:
        """The running server spreads its experts over GPUs, or reports their load: the footer offers ``h``."""
        m = self.model
        return m.expert_load is not None or m.balance is not None or expert_parallel(m.server_args)
