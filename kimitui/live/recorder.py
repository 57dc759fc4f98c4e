"""The live session's recording, opened once the running profile is known (it is named after it).

Events published before it opens are held and written first, so nothing of the start is lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from kimitui.events import Event
from kimitui.live.tasks import ErrorSink
from kimitui.recording import RecordingWriter, default_recording_path
from kimitui.session import Session

log = logging.getLogger(__name__)


class RecorderHandle:
    """Opens, closes and toggles the session's recording (a Session sink: nothing is dropped)."""

    def __init__(self, session: Session, *, wanted: bool, path: str | None, on_error: ErrorSink) -> None:
        self.wanted = wanted
        self.last_path: str | None = None
        """The closed recording's path on disk (its final name)."""
        self._session = session
        self._path = path
        self._on_error = on_error
        self._writer: RecordingWriter | None = None
        self._early: list[Event] | None = None
        self._remove_early: Callable[[], None] | None = None
        self._remove_writer: Callable[[], None] | None = None

    @property
    def path(self) -> str | None:
        return str(self._writer.path) if self._writer is not None else None

    def hold_early(self) -> None:
        """Until the recording opens, keep every event (when a recording is wanted)."""
        if self.wanted:
            self._early = []
            self._remove_early = self._session.add_sink(self._early.append)

    def open(self, host_name: str, profile: str | None, *, hosts: list[str] | None = None) -> None:
        """Open the recording (named after ``profile``); events seen before it come first.

        ``hosts``: every host it holds (a fleet; its name is then ``host_name``, e.g. ``fleet``)."""
        early = self._early
        if self._writer is not None or (not self.wanted and early is None):
            return
        if self._remove_early is not None:
            self._remove_early()
        self._early = self._remove_early = None
        try:
            self._writer = self._new_writer(host_name, profile, hosts or [host_name])
        except Exception as exc:  # an unwritable place must not stop the cockpit
            self._on_error("recording", f"cannot record: {exc}")
            return
        for event in early or ():
            self._writer(event)
        self._writer.start()
        self._remove_writer = self._session.add_sink(self._writer)

    def _new_writer(self, host_name: str, profile: str | None, hosts: list[str]) -> RecordingWriter:
        when = time.time()
        path = self._path or str(default_recording_path(host_name, profile, when=when))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # a default name lists every profile the recording holds once it closes; a named path stays as named
        base = Path(path).parent.parent

        def rename(profiles: list[str]) -> Path:
            return default_recording_path(host_name, [profile or "", *profiles], base=base, when=when)

        return RecordingWriter(path, hosts=hosts, meta={"mode": "live"},
                               rename=None if self._path else rename)

    def close(self) -> None:
        if self._writer is None:
            return
        if self._remove_writer is not None:
            self._remove_writer()
        try:
            self.last_path = str(self._writer.close())
            log.info("recording saved to %s", self.last_path)
        except Exception as exc:
            self._on_error("recording", f"closing the recording failed: {exc}")
        self._path = None  # a recording toggled on again gets a fresh default name
        self._writer = None

    def toggle(self, host_name: str, profile: str | None, *, hosts: list[str] | None = None) -> bool:
        """Recording off if on, else on; returns whether it records now."""
        if self._writer is not None:
            self.close()
            self.wanted = False
            return False
        self.wanted = True
        self.open(host_name, profile, hosts=hosts)
        return self._writer is not None
