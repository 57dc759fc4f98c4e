"""What the compare view needs of the session's sweeps, kept bounded as they come.

``kimitui.report`` rebuilds and compares sweeps from their events; the cockpit keeps just those
(each sweep's server_info, switch, start, level rows and result, and the request figures of the
last few), so a long session of back-to-back sweeps does not grow without end (issue 30).
"""

from __future__ import annotations

from kimitui.events import Event, ProfileSwitch, RequestResult, ServerInfo, SweepStarted
from kimitui.report.sweep_summary import SweepRun, sweeps_of
from kimitui.tui.model.packing import PackedFigures, pack_figures, unpack_figures
from kimitui.tui.model.sweep_energy import SweepEnergy

COMPARE_KINDS = frozenset({"server_info", "profile_switch", "sweep_started", "level_result", "request_result",
                           "sweep_result"})
"""What ``kimitui.report`` needs to rebuild and compare sweeps (the compare view)."""

DETAIL_SWEEPS = 3
"""Sweeps whose per-request figures the compare view keeps; older sweeps keep their level rows only."""

COMPARE_SWEEPS = 64
"""Sweeps whose level rows the compare view keeps, besides each profile's last (at most twice this in all).
Back-to-back 12 s sweeps are 300 an hour: a whole session's rows grew the cockpit without end (issue 30)."""


class CompareBook:
    """Sweep id -> the events the compare view reads of it, the last ``COMPARE_SWEEPS`` and each profile's last."""

    def __init__(self) -> None:
        self._compare: dict[str, list[Event]] = {}
        """Sweep id -> what the compare view needs of it but request results: the host's last server_info and
        profile switch before it, its start, level rows and result; the last ``COMPARE_SWEEPS`` sweeps and
        each profile's last."""
        self._context: dict[str, list[Event]] = {}
        """Host -> its last ServerInfo and last ProfileSwitch, in arrival order (what a sweep starting now reads);
        a server_info every 10 s is one entry, not one per poll (issue 30)."""
        self._requests: dict[str, list[PackedFigures]] = {}
        """Sweep id -> its request results as bare tuples (``pack_figures``), the last ``DETAIL_SWEEPS`` sweeps."""

    def keep(self, ev: Event) -> list[str]:
        """Keep what the compare view needs of ``ev``; returns the sweeps forgotten to make room."""
        if ev.kind not in COMPARE_KINDS:
            return []
        if isinstance(ev, RequestResult):
            kept = self._requests.get(ev.sweep_id)
            if kept is not None:
                kept.append(pack_figures(ev))
            return []
        if isinstance(ev, (ServerInfo, ProfileSwitch)):
            ctx = [e for e in self._context.get(ev.host, []) if type(e) is not type(ev)]
            self._context[ev.host] = [*ctx, ev]
            return []
        if isinstance(ev, SweepStarted):
            if ev.sweep_id not in self._requests:
                self._requests[ev.sweep_id] = []
                while len(self._requests) > DETAIL_SWEEPS:
                    del self._requests[next(iter(self._requests))]
            self._compare.pop(ev.sweep_id, None)
            self._compare[ev.sweep_id] = [*self._context.get(ev.host, []), ev]
            return self._forget_old_sweeps()
        events = self._compare.get(getattr(ev, "sweep_id", ""))
        if events is not None:  # a level row or result of a sweep no longer kept is not needed
            events.append(ev)
        return []

    def _forget_old_sweeps(self) -> list[str]:
        """Past ``COMPARE_SWEEPS``, drop the oldest sweep that is not its profile's last (any past twice that)."""
        forgotten: list[str] = []
        while len(self._compare) > COMPARE_SWEEPS:
            last: dict[str | None, str] = {}
            for sid, events in self._compare.items():
                start = next(e for e in events if isinstance(e, SweepStarted))
                last[start.profile] = sid
            keep = set(last.values())
            old = next((sid for sid in self._compare if sid not in keep), None)
            if old is None:
                if len(self._compare) <= 2 * COMPARE_SWEEPS:
                    break
                old = next(iter(self._compare))
            del self._compare[old]
            forgotten.append(old)
        return forgotten

    def __len__(self) -> int:
        """Sweeps whose level rows the compare view has (bounded: ``COMPARE_SWEEPS``)."""
        return len(self._compare)

    def events(self) -> list[Event]:
        """Every kept sweep's level rows (with the server_info and switch before it), and the request results
        (figures only, no chunk lists) of the last ``DETAIL_SWEEPS`` sweeps."""
        out: list[Event] = []
        for sid, events in self._compare.items():
            for ev in events:
                out.append(ev)
                if isinstance(ev, SweepStarted):
                    out.extend(unpack_figures(v) for v in self._requests.get(sid, ()))
        return out

    def runs(self, energy: SweepEnergy | None = None) -> list[SweepRun]:
        """The kept sweeps with results, as ``kimitui.report`` compares them; with ``energy`` (the cockpit's
        folder, which saw every GPU sample the book does not keep) each level's J/token, the idle power and the
        prices, so the compare view judges energy and cost per token too (issue 34)."""
        runs = [r for r in sweeps_of(self.events(), "this session") if r.levels]
        if energy is not None:
            for run in runs:
                energy.attach(run)
        return runs
