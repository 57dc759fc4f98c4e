"""Wait until the run's other pytest-xdist workers have finished, for a measurement that needs the machine.

The real engine's agreement check times two clients on one core against an engine on the other; a sibling
worker running the cockpit's tests beside them made kimitui's client 30 % slower than bench_serving's in one
CI run and not in the next (the figure measured the neighbour, not the client).  Its file is handed out last
(conftest), so when it starts the other workers are on their last files: each worker leaves a mark in the
run's shared base folder when its session ends, and ``wait_for_siblings`` waits for theirs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

_MARK = "worker-finished-{}"


def _shared_dir(config: pytest.Config) -> Path | None:
    """The run's base temp folder, which every worker's own folder sits in (None without xdist)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return None
    return Path(factory.getbasetemp()).parent


def mark_finished(config: pytest.Config) -> None:
    """Called at a worker's session end: its tests are all run."""
    shared = _shared_dir(config)
    if shared is not None:
        (shared / _MARK.format(os.environ["PYTEST_XDIST_WORKER"])).touch()


def wait_for_siblings(config: pytest.Config, timeout_s: float) -> str:
    """Block until every other worker has finished (or ``timeout_s``); returns what happened, for the report."""
    shared = _shared_dir(config)
    if shared is None:
        return "no other workers"
    me = os.environ["PYTEST_XDIST_WORKER"]
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    others = {f"gw{i}" for i in range(count)} - {me}
    start = time.monotonic()
    while True:
        left = sorted(w for w in others if not (shared / _MARK.format(w)).exists())
        waited = time.monotonic() - start
        if not left:
            return f"waited {waited:.0f} s for {len(others)} other worker(s) to finish"
        if waited > timeout_s:
            return f"gave up after {waited:.0f} s waiting for {', '.join(left)} (measured beside them)"
        time.sleep(1.0)
