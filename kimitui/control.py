"""What the cockpit UI can ask for, independent of where the events come from.

The Textual app (``kimitui.tui``) renders a :class:`~kimitui.session.Session`
and calls a :class:`Controller` for every action.  Two controllers exist:

* the live one (``kimitui.live.LiveController``): starts the host, the GPU
  agent, the log follower, the metrics poller and the recorder; swaps
  profiles; runs sweeps;
* the replay one (``kimitui.replay.ReplayController``): re-publishes a
  recording, with play/pause, speed, seek and jumps.

Actions a controller cannot do (swapping during a replay) raise
:class:`NotAvailable` with a message the UI shows as a notification.
Controllers never import Textual.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kimitui.config import Config
from kimitui.events import SweepSpec
from kimitui.launcher.plan import SwapPlan
from kimitui.session import Session


class NotAvailable(Exception):
    """This action does not exist in this mode (e.g. swapping while replaying)."""


@runtime_checkable
class Controller(Protocol):
    session: Session
    live: bool
    """False for a replay: live-only actions raise NotAvailable."""

    @property
    def host_name(self) -> str:
        """The host the actions go to (in a fleet, the focused one)."""

    @property
    def watch_url(self) -> str | None:
        """A server this session watches but did not start (never swapped or stopped); None otherwise."""

    async def start(self) -> None:
        """Start the sources (or the replay); return once they run."""

    async def shutdown(self) -> None:
        """Stop everything; the recording is flushed and closed before this returns."""

    # -- profiles ----------------------------------------------------------------
    def profile_names(self) -> list[str]:
        """Profiles the operator can pick, in key order (1-9)."""

    def plan_swap(self, profile: str) -> SwapPlan: ...

    async def swap(self, profile: str) -> None:
        """Run the swap; progress and the outcome arrive as events."""

    def mark_baseline(self) -> str | None:
        """Mark the running profile as baseline; returns its name."""

    # -- sweeps ------------------------------------------------------------------
    def default_sweep_spec(self) -> SweepSpec:
        """The sweep form's defaults (the last ones used, remembered)."""

    async def start_sweep(self, spec: SweepSpec) -> None: ...

    async def stop_sweep(self) -> None: ...

    @property
    def busy(self) -> str | None:
        """'sweep' or 'swap' while one runs (quit asks to confirm), else None."""

    # -- the recording -----------------------------------------------------------
    def add_note(self, text: str) -> None: ...

    def add_marker(self, label: str = "") -> None: ...

    def toggle_recording(self) -> bool:
        """Returns whether recording is now on."""

    @property
    def recording_path(self) -> str | None: ...

    # -- quitting ----------------------------------------------------------------
    def quit_rule(self) -> str:
        """What quitting does to the host's server, in words, for the quit confirmation ("" for a replay)."""


@runtime_checkable
class ReplayControls(Protocol):
    """Extra controls a replay controller offers (the UI shows them when present)."""

    @property
    def playing(self) -> bool: ...

    @property
    def speed(self) -> float | None:
        """The speed factor; None: as fast as the recording can be read."""

    @property
    def position(self) -> float | None:
        """Where the replay stands, in the recording's time; None before it has started."""

    def play_pause(self) -> bool: ...

    def set_speed(self, speed: float) -> None: ...

    async def seek(self, t: float) -> None: ...

    async def jump(self, kind: str, forward: bool = True) -> float | None:
        """Seek to the next ``straggler`` / ``profile_switch`` / ``error`` / ``marker``; returns its time."""


@runtime_checkable
class Fleet(Protocol):
    """A session over several hosts (a fleet, live or replayed): the cockpit draws one, the focused one."""

    @property
    def hosts(self) -> list[str]:
        """Every host of the session, in the fleet strip's order."""

    def focus(self, host: str) -> None:
        """Act on (and show) ``host`` from now on; raises NotAvailable for a host not in the session."""

    @property
    def busy_anywhere(self) -> dict[str, str]:
        """Host -> its sweep or swap under way, over every host (what quitting would cut short)."""


@runtime_checkable
class ReplayEnd(Protocol):
    """A replay that knows when it has shown its last event (the bar says "■ end", not "▶ playing")."""

    @property
    def finished(self) -> bool: ...


@runtime_checkable
class Watching(Protocol):
    """A live controller that can watch a server kimitui did not start (metrics, health, sweeps; never swapped)."""

    watch_offer: str | None
    """A server kimitui did not start, found on the simulated host's port: the palette offers to watch it."""

    async def watch(self, url: str | None = None) -> None:
        """Switch this session to watching ``url`` (default: ``watch_offer``)."""


@runtime_checkable
class Autopilot(Protocol):
    """A live controller that runs the autopilot (``kimitui tune``'s loop) from the cockpit."""

    def plan_tune(self) -> list[str]:
        """The plan a start would run, in lines for the confirmation (raises NotAvailable)."""

    async def start_tune(self) -> None: ...

    def tune_action(self, action: str) -> str:
        """``pause``, ``resume``, ``skip`` or ``stop``; returns what it did, in words."""

    @property
    def tune_running(self) -> bool: ...


@runtime_checkable
class ProfileDirectories(Protocol):
    """A controller whose profiles come from directories and the config (the live one): keys follow the config."""

    profile_dirs: list[str]
    config: Config
