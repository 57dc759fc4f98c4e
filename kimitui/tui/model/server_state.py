"""The server panel's state: the scheduler's figures and their history, PD figures, health, the args.

Folded from ``ServerStats`` (the log's lines and /metrics), ``/health`` and ``/server_info``; the
server panel, the header (version, the simulator's clock) and the sweep form read it.
"""

from __future__ import annotations

from collections import deque

from kimitui.events import Event, LogLine, ProfileSwitch, ServerHealth, ServerInfo, ServerStats
from kimitui.sglang.log import fields_if
from kimitui.tui.model.fold import HEADER, HISTORY, NOTHING, SERVER, FoldTable, Parts
from kimitui.tui.model.server_figures import HISTORY_KEYS, PD_KEYS, SCHED_KEYS, PrefillRate, Retraction

FIGURES = ("running_reqs", "queued_reqs", "token_usage", "gen_throughput", "cuda_graph", "num_tokens",
           "cache_hit_rate", *SCHED_KEYS)
"""The ``ServerStats`` fields the panel shows, newest of each (a figure a source does not report stays)."""


class ServerState:
    """The newest of each figure (``server``), their history, and what the server says about itself."""

    def __init__(self) -> None:
        self.server: dict[str, float | bool | None] = {}
        self.server_source: str | None = None
        self.pd_metrics: dict[str, float] = {}
        """A PD server's /metrics figures (queues, KV transfer), newest of each; empty elsewhere."""
        self.pd_log: dict[str, float] = {}
        """A PD server's log fields (``#transfer-req``...), newest of each: they stand in without /metrics."""
        self.server_hist: dict[str, deque[float]] = {k: deque(maxlen=HISTORY) for k in HISTORY_KEYS}
        self.last_retraction: Retraction | None = None
        """The newest retraction /metrics reported (its gauge counts one stats interval only)."""
        self.prefill = PrefillRate()
        self.sim_time_scale: float | None = None
        """The simulated host's clock speed-up (``/server_info``'s ``sim_time_scale``); None on a real host."""
        self.health: ServerHealth | None = None
        self.server_args: dict[str, object] | None = None
        """The running server's ``/server_info`` args (what the sweep form says it accepts); None: not read
        since the last swap (they belonged to the server it replaced)."""
        self.sglang_version: str | None = None  # /server_info's, shown with the profile

    def fold(self, ev: Event) -> Parts:
        return _FOLD.fold(self, ev)

    def _on_stats(self, ev: ServerStats) -> Parts:
        for name in FIGURES:
            value = getattr(ev, name)
            if value is not None:
                self.server[name] = value
                if name in self.server_hist and not isinstance(value, bool):
                    self.server_hist[name].append(float(value))
        if ev.retracted_reqs:
            self.last_retraction = Retraction(ev.t, ev.retracted_reqs)
        acc = ev.extra.get("accept_len")
        if acc is not None:
            self.server["accept_len"] = acc
        pd = {k: v for k, v in ev.extra.items() if k in PD_KEYS}
        if pd:
            (self.pd_log if ev.source == "log" else self.pd_metrics).update(pd)
        if ev.extra and all(k.startswith("eplb_balancedness") for k in ev.extra) and ev.running_reqs is None:
            return NOTHING  # a balance-only figure (an [Expert Balancedness] line): the panel keeps its source
        prefill = self.prefill.on_stats(ev)
        if prefill is not None:
            self.server["prefill_throughput"] = prefill
            self.server_hist["prefill_throughput"].append(prefill)
        self.server_source = ev.source
        return SERVER

    def _on_log_line(self, ev: LogLine) -> Parts:
        if (prefill := fields_if(ev, "prefill")) is not None:
            self.prefill.on_log(prefill)
        return NOTHING  # the log state redraws the log; the rate shows with the next stats

    def _on_health(self, ev: ServerHealth) -> Parts:
        self.health = ev
        return SERVER

    def _on_server_info(self, ev: ServerInfo) -> Parts:
        self.server_args = dict(ev.args)
        self.sglang_version = ev.version if isinstance(ev.version, str) and ev.version else None
        scale = ev.args.get("sim_time_scale") if ev.args.get("sim") else None
        self.sim_time_scale = float(scale) if isinstance(scale, (int, float)) and scale > 0 else None
        return HEADER

    def _on_switch(self, ev: ProfileSwitch) -> Parts:
        if ev.outcome == "ok":  # the args belonged to the server the swap replaced
            self.server_args = self.sglang_version = None
        return NOTHING


_FOLD = (FoldTable[ServerState]()
         .on(ServerStats, ServerState._on_stats)
         .on(LogLine, ServerState._on_log_line)
         .on(ServerHealth, ServerState._on_health)
         .on(ServerInfo, ServerState._on_server_info)
         .on(ProfileSwitch, ServerState._on_switch))
