"""Episode faults: the causes of a straggler the simulator acts out for a while, then recovers from.

``[sim] fault`` names one (``graph_off``, ``gpu_throttle``, ``slow_gpu``, ``pcie_saturation``,
``prefill_surge``, ``server_unhealthy``) or ``mixed`` (all six in a seeded random order).
``[sim.tuning]``: ``episode_every_s`` (simulated seconds from one start to the next, jittered ±30 %,
default 60), ``episode_s`` (how long each lasts, default 8), ``episode_after_s`` (the first no earlier
than this after serving starts, default 5), ``episode_slowdown`` (how much slower a step runs in a
throttle, slow-GPU or PCIe episode, default 3), ``graph_off_factor`` (a graph-off decode step's extra
slowdown on top of the perf model's eager factor, default 1.5).  Each shows only what SGLang and NVML would show:
the scheduler and the GPU model read :class:`Episodes` (kimitui/sim/scheduler.py, kimitui/sim/gpus.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kimitui.sim.settings import ServerSettings

EPISODE_KINDS = ("graph_off", "gpu_throttle", "slow_gpu", "pcie_saturation", "prefill_surge", "server_unhealthy")


@dataclass(frozen=True)
class Episode:
    kind: str
    start: float
    """Simulated seconds since serving started."""
    end: float
    gpu: int = 0
    """The slow GPU (``slow_gpu``)."""


class Episodes:
    """The seeded schedule of episodes; ``at(now)`` is the one running at simulated time ``now``, if any."""

    def __init__(self, settings: ServerSettings) -> None:
        t = settings.tuning
        self.kind = settings.fault if settings.fault in (*EPISODE_KINDS, "mixed") else None
        self.every = float(t.get("episode_every_s", 60.0))
        self.length = float(t.get("episode_s", 8.0))
        self.after = float(t.get("episode_after_s", 5.0))
        self.slowdown = float(t.get("episode_slowdown", 3.0))
        self._rng = random.Random(settings.seed * 3571 + 11)
        self._gpus = max(1, settings.tp_size)
        self._next_start: float | None = None  # set when serving begins (serving_from)
        self._current: Episode | None = None
        self._order: list[str] = []

    @property
    def enabled(self) -> bool:
        return self.kind is not None

    def _kind(self) -> str:
        if self.kind != "mixed":
            return str(self.kind)
        if not self._order:
            self._order = list(EPISODE_KINDS)
            self._rng.shuffle(self._order)
        return self._order.pop()

    def serving_from(self, now: float) -> None:
        """Serving began at simulated ``now``: the first episode is due ``episode_after_s`` later.  The
        clock runs from the process start, so without this the first one fell on SGLang's warm-up
        request, in a window the GPUs (which show an episode only while serving) never showed."""
        self._next_start = now + self.after

    def at(self, now: float) -> tuple[Episode | None, bool]:
        """(the episode running at ``now``, whether it began since the last call); none before serving."""
        if self.kind is None or self._next_start is None:
            return None, False
        cur = self._current
        if cur is not None and now < cur.end:
            return cur, False
        if now < self._next_start:
            self._current = None
            return None, False
        start = max(now, self._next_start)
        cur = Episode(self._kind(), start, start + self.length, gpu=self._rng.randrange(self._gpus))
        self._current = cur
        self._next_start = start + self.every * self._rng.uniform(0.7, 1.3)
        return cur, True
