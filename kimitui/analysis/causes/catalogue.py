"""The causes a straggler's slow stretch can have, and how each is named on screen and in reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Cause = Literal[
    "eplb", "kv_retract", "prefill_surge", "graph_off", "gpu_throttle", "slow_gpu", "pcie_saturation",
    "server_unhealthy", "client_lag", "link_lost", "kv_transfer", "unknown",
]

STALL: frozenset[str] = frozenset({"eplb", "kv_retract", "prefill_surge", "server_unhealthy", "client_lag", "link_lost",
                                   "kv_transfer"})
"""Causes that hold a stream still (a gap): the server or the link says so itself."""
STATE: frozenset[str] = frozenset({"graph_off", "gpu_throttle", "slow_gpu", "pcie_saturation"})
"""Causes that slow every step for a while: they count only where no stall cause is active, and only
when they were more active in the slow stretch than around it (a state that held all along explains
nothing about one request)."""


@dataclass(frozen=True)
class CauseInfo:
    label: str
    """As a sentence starts: ``EPLB rebalance``."""
    short: str
    """A table cell: ``EPLB``."""
    one: str
    """``one EPLB rebalance``: what one episode is called."""
    plural: str
    """``3 EPLB rebalances``."""


INFO: dict[str, CauseInfo] = {
    "eplb": CauseInfo("EPLB rebalance", "EPLB", "EPLB rebalance", "EPLB rebalances"),
    "kv_retract": CauseInfo("KV-cache pressure", "KV full", "KV-cache retraction", "KV-cache retractions"),
    "prefill_surge": CauseInfo("Prefill surge", "prefill", "prefill surge", "prefill surges"),
    "graph_off": CauseInfo("CUDA graph not used", "no graph", "stretch without CUDA graphs", "stretches without CUDA graphs"),
    "gpu_throttle": CauseInfo("GPU throttling", "throttle", "GPU throttling episode", "GPU throttling episodes"),
    "slow_gpu": CauseInfo("Slow GPU", "slow GPU", "slow-GPU episode", "slow-GPU episodes"),
    "pcie_saturation": CauseInfo("PCIe saturation", "PCIe", "PCIe saturation episode", "PCIe saturation episodes"),
    "server_unhealthy": CauseInfo("Server unhealthy", "server", "server outage", "server outages"),
    "client_lag": CauseInfo("Client stall", "client", "client stall", "client stalls"),
    "link_lost": CauseInfo("SSH link lost", "link", "link loss", "link losses"),
    "kv_transfer": CauseInfo("Slow KV transfer", "KV xfer", "slow KV transfer", "slow KV transfers"),
    "unknown": CauseInfo("Unknown", "unknown", "unexplained stretch", "unexplained stretches"),
}

Confidence = Literal["high", "medium", "low", "none"]


def label(cause: str) -> str:
    return INFO[cause].label if cause in INFO else cause


def short(cause: str) -> str:
    return INFO[cause].short if cause in INFO else cause


def counted(cause: str, n: int) -> str:
    """``one EPLB rebalance`` / ``3 EPLB rebalances``."""
    info = INFO.get(cause)
    if info is None:
        return f"{n} × {cause}"
    return f"one {info.one}" if n == 1 else f"{n} {info.plural}"


def plural(cause: str) -> str:
    """``EPLB rebalances``: the cause's episodes, uncounted."""
    return INFO[cause].plural if cause in INFO else cause
