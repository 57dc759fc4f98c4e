"""The header's state: the link, the profile and its swap, the baseline, the counts, the autopilot.

What the operator reads first (is it connected, what serves, is a swap running, how many errors);
the header and the profile bar draw from it, the key rules (``keys.blocked_reason``) read it.
"""

from __future__ import annotations

from kimitui.events import (
    Baseline, ConnectionState, Dropped, ErrorEvent, Event, Marker, Note, ProfileState, ProfileSwitch, SwapProgress,
    TuneProgress,
)
from kimitui.tui.model.fold import HEADER, HEADER_LOG, FoldTable, NoticeSeverity, Parts
from kimitui.tui.model.log_state import LogState


class HeaderState:
    """The host's link and profile, the running swap, and the session's counts."""

    def __init__(self, log: LogState) -> None:
        self._log = log
        self.connection: str = "connecting"
        self.connection_detail = ""
        self.profile: str | None = None
        self.profile_state: str = "unknown"
        self.profile_detail = ""
        self.swap: SwapProgress | None = None
        self.last_switch: ProfileSwitch | None = None
        self.baseline: str | None = None
        self.notes = 0
        self.markers = 0
        self.errors = 0
        self.dropped = 0
        self.tune: TuneProgress | None = None
        """The autopilot's latest progress (``kimitui tune`` from this cockpit, or a replayed one)."""

    def fold(self, ev: Event) -> Parts:
        return _FOLD.fold(self, ev)

    def _on_swap_progress(self, ev: SwapProgress) -> Parts:
        self.swap = ev
        return HEADER

    def _on_profile_state(self, ev: ProfileState) -> Parts:
        self.profile = ev.profile if ev.profile is not None else self.profile
        self.profile_state = ev.state
        self.profile_detail = ev.detail
        if ev.state in ("serving", "failed", "rolled_back", "stopped"):
            self.swap = None
        return HEADER

    def _on_switch(self, ev: ProfileSwitch) -> Parts:
        self.last_switch = ev
        self.swap = None
        # the recorded total (a swap records it beside its phases); older recordings: the phases' sum
        took = ev.phases.get("total", sum(ev.phases.values()))
        if ev.outcome == "ok":
            self.profile = ev.to_profile
            text = f"swapped {ev.from_profile or '-'} -> {ev.to_profile} in {took:.1f} s"
            self._log.notify("information", text)
            sev = "info"
        else:
            text = f"swap to {ev.to_profile} {ev.outcome.replace('_', ' ')}: {ev.reason}"
            self._log.notify("error", text)
            sev = "error"
            for line in ev.log_excerpt[-5:]:
                self._log.say(ev.t, "error", "swap", f"  {line}")
        self._log.say(ev.t, sev, "swap", text)
        return HEADER_LOG

    def _on_baseline(self, ev: Baseline) -> Parts:
        self.baseline = ev.profile
        self._log.say(ev.t, "info", "baseline", f"baseline: {ev.profile}")
        return HEADER_LOG

    def _on_connection(self, ev: ConnectionState) -> Parts:
        was = self.connection
        self.connection, self.connection_detail = ev.state, ev.detail
        if ev.state in ("lost", "failed") and was != ev.state:
            self._log.notify("error", f"{ev.host}: connection {ev.state} {ev.detail}".strip())
        elif ev.state == "connected" and was in ("lost", "reconnecting", "failed"):
            self._log.notify("information", f"{ev.host}: connected again")
        self._log.say(ev.t, "warning" if ev.state in ("lost", "reconnecting", "failed") else "info",
                      "connection", f"{ev.state} {ev.detail}".strip())  # the kind column says "link"
        return HEADER_LOG

    def _on_error(self, ev: ErrorEvent) -> Parts:
        if ev.severity == "error":
            self.errors += 1
        level: NoticeSeverity = "information" if ev.severity == "info" else ev.severity
        kind = "error" if ev.severity == "error" else ev.source  # a warning or a fact is no error (the guard's notice)
        self._log.say(ev.t, "info" if ev.severity == "info" else ev.severity, kind, f"{ev.source}: {ev.message}")
        self._log.notify(level, f"{ev.source}: {ev.message}")
        return HEADER_LOG

    def _on_note(self, ev: Note) -> Parts:
        self.notes += 1
        self._log.say(ev.t, "info", "note", f"note: {ev.text}")
        return HEADER_LOG

    def _on_marker(self, ev: Marker) -> Parts:
        self.markers += 1
        self._log.say(ev.t, "info", "marker", f"marker {ev.label}".strip())
        return HEADER_LOG

    def _on_tune(self, ev: TuneProgress) -> Parts:
        self.tune = ev
        return HEADER

    def _on_dropped(self, ev: Dropped) -> Parts:
        self.dropped += ev.count
        return HEADER


_FOLD = (FoldTable[HeaderState]()
         .on(SwapProgress, HeaderState._on_swap_progress)
         .on(ProfileState, HeaderState._on_profile_state)
         .on(ProfileSwitch, HeaderState._on_switch)
         .on(Baseline, HeaderState._on_baseline)
         .on(ConnectionState, HeaderState._on_connection)
         .on(ErrorEvent, HeaderState._on_error)
         .on(Note, HeaderState._on_note)
         .on(Marker, HeaderState._on_marker)
         .on(TuneProgress, HeaderState._on_tune)
         .on(Dropped, HeaderState._on_dropped))
