"""The GPU panel's state: a row per GPU (and per GPU of a deployment's other nodes), expert balance.

Folded from the agent's samples, caps and process lists, and from the expert balance the server's
log, /metrics or heatmap report; the GPU panel and the ``G``/``h`` views draw from it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kimitui.events import (
    Event, ExpertLoad, GpuCaps, GpuEvent, GpuProcess, GpuProcs, GpuReading, GpuSample, GpuStatic, ProfileState,
    ServerStats,
)
from kimitui.tui.model.fold import GPUS, HISTORY, NOTHING, FoldTable, Parts
from kimitui.tui.model.heatmap_data import HeatWindows
from kimitui.tui.model.log_state import LogState

NODE_STRIDE = 8
"""GPU rows per node of a multi-node deployment: node k's GPUs follow the home host's 8 (16 rows for two nodes)."""


@dataclass
class GpuRow:
    index: int
    static: GpuStatic | None = None
    reading: GpuReading | None = None
    util_hist: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    rank: str | None = None

    def supports(self, name: str) -> bool:
        """Shown only if the agent reported it supported (or, lacking caps, reported a value)."""
        if self.static is not None and self.static.supported:
            return name in self.static.supported and getattr(self.reading, name, None) is not None
        return self.reading is not None and getattr(self.reading, name, None) is not None

    def value(self, name: str) -> float | None:
        """The reading's ``name`` if this GPU shows it (``supports``), else None."""
        return getattr(self.reading, name) if self.supports(name) else None


@dataclass
class Imbalance:
    """Utilisation spread across GPUs: the EP straggler signal."""

    spread: float
    low_index: int
    low: float
    high_index: int
    high: float


class GpuState:
    """Rows by index, the driver and caps, the agent's processes, and the expert balance and heatmap."""

    def __init__(self, log: LogState) -> None:
        self._log = log
        self.gpus: dict[int, GpuRow] = {}
        self.nodes: list[str] = []
        """A multi-node deployment's other nodes, in the order their GPUs came (rows after the home's)."""
        self.driver: str | None = None
        self.gpu_caps: GpuCaps | None = None
        self.gpu_procs: list[GpuProcess] | None = None
        """The agent's last process list (None: none came yet, or the agent sends none)."""
        self.balance: float | None = None
        """Expert balance now (1.0 = even), from the log, /metrics or the heatmap; None: not reported."""
        self.balance_source = ""
        self.balance_hist: deque[float] = deque(maxlen=HISTORY)
        self.expert_load: ExpertLoad | None = None
        """The newest heatmap window (layers x GPU ranks)."""
        self.heat = HeatWindows()
        """The recent heatmap windows, summed for the ``h`` screen."""

    def fold(self, ev: Event) -> Parts:
        return _FOLD.fold(self, ev)

    def _on_sample(self, ev: GpuSample) -> Parts:
        offset = self._node_offset(ev.node)
        for r in ev.gpus:
            index = r.index + offset
            row = self.gpus.get(index)
            if row is None:
                row = self.gpus[index] = GpuRow(index)
                home = self.gpus.get(r.index)
                if offset and home is not None:  # another node of the deployment: same GPUs, its name as the rank
                    row.static, row.rank = home.static, ev.node
            row.reading = r if not offset else r.model_copy(update={"index": index})
            if r.util_pct is not None:
                row.util_hist.append(r.util_pct)
        return GPUS

    def _node_offset(self, node: str | None) -> int:
        """Where a deployment's other node's GPUs sit among the rows: node k's GPU i is row ``NODE_STRIDE*k + i``."""
        if node is None:
            return 0
        if node not in self.nodes:
            self.nodes.append(node)
        return NODE_STRIDE * (1 + self.nodes.index(node))

    def _on_caps(self, ev: GpuCaps) -> Parts:
        self.driver, self.gpu_caps = ev.driver, ev
        for s in ev.gpus:
            self.gpus.setdefault(s.index, GpuRow(s.index)).static = s
        return GPUS

    def _on_procs(self, ev: GpuProcs) -> Parts:
        self.gpu_procs = ev.procs
        for index, row in self.gpus.items():
            if index < NODE_STRIDE:  # another node's rows keep its name (its processes are its own host's)
                row.rank = None
        for p in ev.procs:
            if p.rank:
                self.gpus.setdefault(p.gpu_index, GpuRow(p.gpu_index)).rank = p.rank
        return GPUS

    def _on_gpu_event(self, ev: GpuEvent) -> Parts:
        where = f"GPU {ev.gpu_index}" if ev.gpu_index is not None else "GPU"
        msg = f"{where}: {ev.event}{' xid ' + str(ev.xid) if ev.xid is not None else ''} {ev.detail}".strip()
        self._log.say(ev.t, "error", "gpu", msg)
        self._log.notify("error" if ev.event != "recovered" else "information", msg)
        return frozenset({"log", "gpus"})

    def _on_profile_state(self, ev: ProfileState) -> Parts:
        if ev.state == "starting" and self.nodes:  # the next deployment brings its own nodes' rows, if any
            self.gpus = {i: row for i, row in self.gpus.items() if i < NODE_STRIDE}
            self.nodes = []
            return GPUS
        return NOTHING

    def _on_stats(self, ev: ServerStats) -> Parts:
        """Expert balance for the gauge, from the log or /metrics."""
        bal = ev.extra.get("eplb_balancedness")
        if bal is None:
            return NOTHING
        self._set_balance(bal, "log" if ev.source == "log" else "/metrics")
        return GPUS

    def _on_expert_load(self, ev: ExpertLoad) -> Parts:
        self.expert_load = ev
        self.heat.add(ev)
        if ev.balancedness is not None:
            self._set_balance(ev.balancedness, "heatmap")
        return frozenset({"gpus", "experts"})

    def _set_balance(self, value: float, source: str) -> None:
        self.balance, self.balance_source = value, source
        self.balance_hist.append(value)

    def imbalance(self) -> Imbalance | None:
        """Spread of current utilisation across GPUs; None with fewer than two readings."""
        utils = [(i, r.reading.util_pct) for i, r in sorted(self.gpus.items())
                 if r.reading is not None and r.reading.util_pct is not None]
        if len(utils) < 2:
            return None
        lo = min(utils, key=lambda x: x[1])
        hi = max(utils, key=lambda x: x[1])
        return Imbalance(hi[1] - lo[1], lo[0], lo[1], hi[0], hi[1])


_FOLD = (FoldTable[GpuState]()
         .on(GpuSample, GpuState._on_sample)
         .on(GpuCaps, GpuState._on_caps)
         .on(GpuProcs, GpuState._on_procs)
         .on(GpuEvent, GpuState._on_gpu_event)
         .on(ProfileState, GpuState._on_profile_state)
         .on(ServerStats, GpuState._on_stats)
         .on(ExpertLoad, GpuState._on_expert_load))
