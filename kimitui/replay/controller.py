"""The cockpit's Controller for a recording (``live = False``): replay controls; live actions raise NotAvailable."""

from __future__ import annotations

from kimitui.control import NotAvailable
from kimitui.launcher.plan import SwapPlan
from kimitui.events import ProfileSwitch, SweepSpec, SweepStarted
from kimitui.recording import PathLike, Recording, RecordingIndex, SkippedLine
from kimitui.replay.replayer import Replayer
from kimitui.session import Session


class ReplayController:
    """The cockpit's Controller for a recording: replay controls; live actions raise NotAvailable."""

    live = False
    watch_url: str | None = None
    """A replay watches no server."""

    def __init__(self, path: PathLike | Recording | RecordingIndex, *, speed: float | None = 1.0,
                 start_paused: bool = False, start_at: float | None = None, session: Session | None = None) -> None:
        """``start_at``: a recording time to open at (state rebuilt as for a seek)."""
        index = RecordingIndex.load(path)
        self.start_at = start_at
        self.hosts = list(index.header.hosts) or ["replay"]
        """Every host the recording holds (several: a fleet session, shown the same way)."""
        self.host_name = self.hosts[0]
        self.session = session or Session(host=self.host_name)
        self.replayer = Replayer(self.session, index, speed, start_paused=start_paused)
        self._path = str(index.path) if index.path is not None else None

    # -- lifecycle --------------------------------------------------------------
    async def start(self) -> None:
        await self.replayer.start()
        if self.start_at is not None:
            await self.replayer.seek(self.start_at)

    async def shutdown(self) -> None:
        await self.replayer.stop()

    def focus(self, host: str) -> None:
        """Show ``host`` of a fleet recording (the cockpit draws its model)."""
        if host not in self.hosts:
            raise NotAvailable(f"{host} is not in this recording ({', '.join(self.hosts)})")
        self.host_name = host

    # -- replay controls --------------------------------------------------------
    def play_pause(self) -> bool:
        return self.replayer.play_pause()

    def set_speed(self, speed: float) -> None:
        self.replayer.set_speed(speed)

    async def seek(self, t: float) -> None:
        await self.replayer.seek(t)

    async def jump(self, kind: str, forward: bool = True) -> float | None:
        return await self.replayer.jump(kind, forward)

    @property
    def position(self) -> float:
        """Where the replay stands, in the recording's time."""
        return self.replayer.position

    @property
    def speed(self) -> float | None:
        """The speed factor; None: as fast as the recording can be read."""
        return self.replayer.speed

    @property
    def playing(self) -> bool:
        return self.replayer.playing

    @property
    def finished(self) -> bool:
        """The last event has been shown: the bar says so instead of "playing" (a seek back plays on)."""
        return self.replayer.finished

    @property
    def skipped(self) -> list[SkippedLine]:
        """Lines of the recording that could not be read (line number and reason), for a notice;
        a malformed line in the middle joins the list when playback reaches it."""
        return list(self.replayer.index.skipped)

    @property
    def index_status(self) -> str:
        """How the replay index was had (read from ``.NAME.idx``, or built and why: none yet, stale, damaged),
        for a notice; a damaged index is also logged as a warning naming it."""
        return self.replayer.index.index_status

    def now(self) -> float:
        """The replay's clock (use instead of ``time.time()`` for ages like "5 s ago")."""
        return self.replayer.position

    # -- profiles and sweeps (what the recording shows; nothing can be changed) --
    def profile_names(self) -> list[str]:
        idx = self.replayer.index
        names: list[str] = []
        for i, k in enumerate(idx.kinds):
            if k in ("profile_switch", "sweep_started"):
                ev = idx.event(i)
                name = (ev.to_profile if isinstance(ev, ProfileSwitch)
                        else ev.profile if isinstance(ev, SweepStarted) else None)
                if name and name not in names:
                    names.append(name)
        return names

    def plan_swap(self, profile: str) -> SwapPlan:
        raise NotAvailable("replay: profiles cannot be swapped in a recording")

    async def swap(self, profile: str) -> None:
        raise NotAvailable("replay: profiles cannot be swapped in a recording")

    def mark_baseline(self) -> str | None:
        raise NotAvailable("replay: the baseline is marked in a live session")

    def default_sweep_spec(self) -> SweepSpec:
        idx = self.replayer.index
        for i in range(len(idx) - 1, -1, -1):
            if idx.kinds[i] == "sweep_started":
                ev = idx.event(i)
                if isinstance(ev, SweepStarted):
                    return ev.spec
        return SweepSpec(url="", model="", levels=[1, 8, 32, 64, 96, 128, 192, 256])

    async def start_sweep(self, spec: SweepSpec) -> None:
        raise NotAvailable("replay: sweeps run in a live session (kimitui sweep --like FILE repeats this one)")

    async def stop_sweep(self) -> None:
        raise NotAvailable("replay: no sweep is running")

    @property
    def busy(self) -> str | None:
        return None

    @property
    def busy_anywhere(self) -> dict[str, str]:
        """A replay runs nothing on any host (a fleet recording included)."""
        return {}

    def add_note(self, text: str) -> None:
        raise NotAvailable("replay: notes are added in a live session")

    def add_marker(self, label: str = "") -> None:
        raise NotAvailable("replay: markers are added in a live session")

    def toggle_recording(self) -> bool:
        raise NotAvailable("replay: nothing is being recorded")

    @property
    def recording_path(self) -> str | None:
        """The file being replayed."""
        return self._path

    def quit_rule(self) -> str:
        """A replay changes nothing on any host: quitting just closes the file."""
        return ""
