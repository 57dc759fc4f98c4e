"""The sweep's state: the running sweep and its levels, every profile's curve, the capacity it holds.

Folded from the load generator's events; the curve, the spread, the levels table and the sweep
strip draw from it.  A finished level hands its stragglers to the straggler state (their chunk
times, their causes) and is judged against the cockpit's SLO.
"""

from __future__ import annotations

from kimitui.analysis.level_stats import client_limited_throughput, effective_status
from kimitui.capacity.answer import Probe, answer_from_points, point_of
from kimitui.capacity.slo import Slo, parse_slo
from kimitui.config import DEFAULT_SLO
from kimitui.events import (
    Event, LevelResult, LevelStarted, RequestResult, ServerStats, SweepProgress, SweepResult, SweepStarted,
)
from kimitui.tui.model.fold import NOTHING, NOTICE_OF, FoldTable, Parts
from kimitui.tui.model.header_state import HeaderState
from kimitui.tui.model.log_state import LogState
from kimitui.tui.model.packing import KeptResult, strip_chunks
from kimitui.tui.model.server_state import ServerState
from kimitui.tui.model.straggler_state import StragglerState
from kimitui.tui.model.sweep_energy import SweepEnergy
from kimitui.tui.model.sweep_view import CurvePoint, SweepView


ENERGY_PARTS: Parts = frozenset({"levels", "curve"})
"""What a level's energy figures change: its row (J/token, tok/s per kW, cost) and the curve's caption."""


class SweepState:
    """The running (or last) sweep, each profile's last curve and valid levels, and the SLO they are judged on."""

    def __init__(self, log: LogState, stragglers: StragglerState, header: HeaderState, server: ServerState) -> None:
        self._log, self._stragglers, self._header, self._server = log, stragglers, header, server
        self.sweep: SweepView | None = None
        self.curves: dict[str, dict[int, CurvePoint]] = {}
        """profile -> concurrency -> its last measured point (other profiles' runs stay overlaid; bounded by the
        profiles and levels swept, not by the sweeps)."""
        self.profile_levels: dict[str, dict[int, LevelResult]] = {}
        """profile -> C -> its last valid level result (the speed-up against the baseline at the same C); a result
        replaces the last at its C, so the profiles and levels swept bound it."""
        self.slo: Slo | None = parse_slo(DEFAULT_SLO)
        """The SLO each sweep's capacity is judged on (the app sets the config's ``[capacity] slo``)."""
        self.energy = SweepEnergy()
        """Each level's power and energy from the GPU samples beside it, the idle power, the prices."""
        self.client_said: set[tuple[str, bool]] = set()
        """(sweep, throughput held back?) already worded in the log: said once per sweep, not once per level
        (the sweeps the compare book keeps only: see ``forget``)."""

    def fold(self, ev: Event) -> Parts:
        parts = _FOLD.fold(self, ev)
        finals = self.energy.add(ev)  # the GPU samples and the sweep's events: each level's power
        sw = self.sweep
        if sw is not None and isinstance(ev, SweepStarted) and ev.sweep_id == sw.sweep_id:
            sw.idle = self.energy.idle(sw.sweep_id)
        mine = [e for e in finals if sw is not None and e.sweep_id == sw.sweep_id]
        if sw is not None and mine:
            for e in mine:
                sw.energy[(e.concurrency, e.repeat)] = e
            return parts | ENERGY_PARTS
        return parts

    def forget(self, sweep_ids: list[str]) -> None:
        """The compare book no longer keeps these sweeps: nor does what was said about them."""
        if sweep_ids:
            self.client_said = {k for k in self.client_said if k[0] not in sweep_ids}
            self.energy.forget(sweep_ids)

    def _on_sweep_started(self, ev: SweepStarted) -> Parts:
        self.sweep = SweepView(ev.sweep_id, ev.profile or self._header.profile, ev.spec, ev.t)
        self._stragglers.sweep_started(self.sweep)
        key = self.sweep.profile or "?"
        self.curves.pop(key, None)  # this run replaces that profile's earlier curve
        self.curves[key] = {}
        self._log.say(ev.t, "info", "sweep", f"sweep {ev.sweep_id} started on {key}: levels {ev.spec.levels}, "
                      f"{ev.spec.mode}, {ev.spec.max_tokens} tokens")
        return frozenset({"curve", "spread", "levels", "stragglers", "log", "header"})

    def _on_level_started(self, ev: LevelStarted) -> Parts:
        if self.sweep is not None and ev.sweep_id == self.sweep.sweep_id:
            self.sweep.concurrency = ev.concurrency
            self.sweep.level_starts[ev.concurrency] = ev.t
            self.sweep.spec_watch.level_started(ev.concurrency)
            self.sweep.progress = None
            self.sweep.results.clear()
            self.sweep.chunks.clear()
            return frozenset({"spread", "levels", "curve"})
        return NOTHING

    def _on_progress(self, ev: SweepProgress) -> Parts:
        if self.sweep is not None and ev.sweep_id == self.sweep.sweep_id:
            self.sweep.progress = ev
            self.sweep.concurrency = ev.concurrency
            return frozenset({"spread", "curve", "levels"})
        return NOTHING

    def _on_result(self, ev: RequestResult) -> Parts:
        sw = self.sweep
        if sw is None or ev.sweep_id != sw.sweep_id or ev.warmup:
            return NOTHING
        if sw.concurrency is None or ev.concurrency == sw.concurrency:
            if len(sw.results) == sw.results.maxlen:
                sw.chunks.pop(sw.results[0].request_id, None)
            sw.results.append(strip_chunks(ev))
            if ev.chunk_offsets_ms is not None:
                sw.chunks[ev.request_id] = KeptResult.of(ev)
        if not ev.ok:
            self._log.say(ev.t, "warning", "request", f"request {ev.request_id} at C={ev.concurrency} failed: "
                          f"{ev.error_class or 'error'} {ev.error}".strip())
            return frozenset({"spread", "log"})
        return frozenset({"spread"})

    def _on_level(self, ev: LevelResult) -> Parts:
        sw = self.sweep
        if sw is None or ev.sweep_id != sw.sweep_id:
            return NOTHING
        sw.levels = [lv for lv in sw.levels if (lv.concurrency, lv.repeat) != (ev.concurrency, ev.repeat)]
        sw.levels.append(ev)
        self._stragglers.level_done(sw, ev)
        self._judge_capacity(sw, ev)
        if ev.concurrency == sw.concurrency:
            sw.chunks.clear()  # the level is done: only its stragglers keep their chunks
        status, reason = effective_status(ev, sw.spec.max_error_rate)
        self.curves.setdefault(sw.profile or "?", {})[ev.concurrency] = CurvePoint(
            ev.concurrency, ev.agg_tok_s, ev.steady_tok_s, status, reason)
        if status == "ok":
            self.profile_levels.setdefault(sw.profile or "?", {})[ev.concurrency] = ev
        collapse = sw.spec_watch.finished(sw.levels, ev)
        if collapse is not None:
            self._say_collapse(ev.t, collapse.message)
        if status != "ok":
            self._log.say(ev.t, "error" if status == "failed" else "warning", "sweep",
                          f"C={ev.concurrency} {status}: {reason or 'no reason recorded'} (not a curve point)")
        self._say_client(ev)
        if ev.stopped:
            self._log.say(ev.t, "warning", "sweep", f"sweep stopped at C={ev.concurrency}: {ev.stopped}")
        return frozenset({"curve", "levels", "stragglers", "log"})

    def _say_client(self, ev: LevelResult) -> None:
        """A level the client distorted, worded once per sweep and kind (a busy machine marks every level)."""
        if not ev.client_distorted:
            return
        limited = client_limited_throughput(ev)
        if (ev.sweep_id, limited) in self.client_said:
            return
        self.client_said.add((ev.sweep_id, limited))
        what = ("the client could not keep up: its figures decide nothing" if limited
                else "the client stamped latencies late: TTFT/TPOT not judged")
        self._log.say(ev.t, "warning" if limited else "info", "sweep",
                      f"C={ev.concurrency}: {what} ({ev.client_distorted}); later levels carry only the mark")

    def _on_sweep_result(self, ev: SweepResult) -> Parts:
        if self.sweep is not None and ev.sweep_id == self.sweep.sweep_id:
            self.sweep.outcome = ev
        sev = "info" if ev.outcome == "completed" else ("warning" if ev.outcome == "stopped" else "error")
        peak = f", peak {ev.peak_tok_s:.0f} tok/s" if ev.peak_tok_s is not None else ""
        text = f"sweep {ev.sweep_id} {ev.outcome}{peak}{': ' + ev.reason if ev.reason else ''}"
        self._log.say(ev.t, sev, "sweep", text)
        self._log.notify(NOTICE_OF[sev], text)
        return frozenset({"curve", "levels", "spread", "log", "header"})

    def _on_stats(self, ev: ServerStats) -> Parts:
        """The Decode line's accept length against the reference level: the live collapse rule."""
        acc = ev.extra.get("accept_len")
        sw = self.sweep
        if acc is None or ev.source != "log" or sw is None or sw.outcome is not None:
            return NOTHING
        found = sw.spec_watch.sample(acc, sw.levels)
        if found is None:
            return NOTHING
        self._say_collapse(ev.t, found.message + " (live, from the scheduler's log)")
        return frozenset({"log", "levels"})

    def _say_collapse(self, t: float, text: str) -> None:
        self._log.say(t, "warning", "sweep", text)
        self._log.notify("warning", text)

    def _judge_capacity(self, sw: SweepView, ev: LevelResult) -> None:
        """The SLO on the finished level's requests; the sweep's capacity from every level judged so far."""
        if self.slo is None or effective_status(ev, sw.spec.max_error_rate)[0] != "ok":
            return
        requests = [r for r in sw.results if r.concurrency == ev.concurrency and not r.warmup]
        x = float(ev.concurrency)
        slo = self.judged_slo
        sw.capacity_points[ev.concurrency] = point_of(slo, x, [Probe(x, (ev,), requests, slo.check(requests, [ev]))])
        sw.capacity = answer_from_points(slo, list(sw.capacity_points.values()), rate=False, measured=0)

    @property
    def judged_slo(self) -> Slo:
        """The configured SLO on this host's clock: a simulator running N x faster is held to what the real
        host would be (time bounds / N, rates x N), as ``kimitui capacity`` does; the answer says so."""
        assert self.slo is not None
        scale = self._server.sim_time_scale
        if scale and scale != 1.0 and self.slo.time_scale == 1.0:
            return self.slo.scaled(scale)
        return self.slo


_FOLD = (FoldTable[SweepState]()
         .on(SweepStarted, SweepState._on_sweep_started)
         .on(LevelStarted, SweepState._on_level_started)
         .on(SweepProgress, SweepState._on_progress)
         .on(RequestResult, SweepState._on_result)
         .on(LevelResult, SweepState._on_level)
         .on(SweepResult, SweepState._on_sweep_result)
         .on(ServerStats, SweepState._on_stats))
