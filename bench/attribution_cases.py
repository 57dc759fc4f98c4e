"""The bench's cases: one simulated profile and one sweep per cause (bench/attribution_accuracy.py).

Each case refines a shipped profile under its own name with the simulator's settings that make its
cause (``[sim] fault`` and ``[sim.tuning]``, kimitui/sim/episodes.py), at a fast clock so the whole
bench runs in minutes; the sweep's straggler gap rule is scaled with the clock.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from kimitui.events import SweepSpec

TIME_SCALE = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


@dataclass
class Case:
    name: str
    base: str = "ep8-tuned"
    knobs: dict[str, Any] = field(default_factory=dict)
    sim: dict[str, Any] = field(default_factory=dict)
    tuning: dict[str, float] = field(default_factory=dict)
    levels: tuple[int, ...] = (1, 4, 8)
    requests: int = 24
    max_tokens: int = 256
    repeats: int = 1
    timeout_s: float = 600.0
    time_scale: float = TIME_SCALE
    """Slower for causes seen through polls and samples (GPU samples 4/s, /health every 2 s): an episode
    must last a few of them in real time."""
    client_stalls: bool = False
    client_first_s: float = 4.0
    client_hold_s: tuple[float, float] = (1.2, 2.5)
    client_every_s: tuple[float, float] = (4.0, 7.0)

    @property
    def profile(self) -> str:
        return f"bench-{self.name.replace('_', '-')}"

    @property
    def profile_toml(self) -> str:
        lines = [f'extends = "{self.base}"', f"port = {_free_port()}"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in self.knobs.items()]
        lines += ["[sim]", f"time_scale = {self.time_scale}", "startup_s = 20.0"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in self.sim.items()]
        if self.tuning:
            lines += ["[sim.tuning]"] + [f"{k} = {_toml_value(v)}" for k, v in self.tuning.items()]
        return "\n".join(lines) + "\n"

    def spec(self, default: SweepSpec) -> SweepSpec:
        return default.model_copy(update={
            "levels": list(self.levels), "requests_per_level": self.requests, "duration_s": None,
            "max_tokens": self.max_tokens, "warmup_requests": 0, "repeats": self.repeats, "flush_cache": False,
            "stop_on_oversaturation": False, "straggler_gap_s": 4.0 / self.time_scale, "mode": "sustained"})


EPISODE = {"episode_every_s": 45.0, "episode_s": 16.0, "episode_after_s": 30.0, "episode_slowdown": 4.0}
SLOW = 5.0


def episode(kind: str, **kw: Any) -> Case:
    """An episode fault at a slower clock, short requests: a request inside an episode is slow all through."""
    return Case(kind, sim={"fault": kind}, tuning=dict(EPISODE), time_scale=SLOW, levels=(4, 8), requests=64,
                repeats=2, **kw)


CASES: list[Case] = [
    Case("eplb", base="ep8-eplb", knobs={"eplb_rebalance_num_iterations": 600}, repeats=2),
    Case("kv_retract", tuning={"kv_tokens": 12000.0}, levels=(8, 12), requests=32, max_tokens=1536, repeats=2,
         time_scale=10.0),
    episode("prefill_surge"),
    episode("graph_off"),
    episode("gpu_throttle"),
    episode("slow_gpu"),
    episode("pcie_saturation"),
    episode("server_unhealthy"),
    Case("injected_stall", sim={"fault": "stall", "fault_rate": 0.08}, tuning={"stall_s": 30.0}, repeats=2),
    Case("client_lag", client_stalls=True, repeats=2),
]
