"""Ports for the servers a test starts on 127.0.0.1.

The one ``free_port`` every test, support server and bench script uses.
"""

from __future__ import annotations

import os
import random
import socket
import time

LOW, HIGH = 20000, 32000
"""Below the kernel's ephemeral range (32768+): no client connection's source port
takes the port between this check and the server binding it."""


def worker_range() -> tuple[int, int]:
    """This pytest-xdist worker's own slice of LOW..HIGH (all of it outside xdist).

    A test that holds a port across stops and starts (a swap) leaves it free for moments; a test on the
    other worker must never pick it then, or its server answers this test's /health.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if count <= 1 or not (worker.startswith("gw") and worker[2:].isdigit()):
        return LOW, HIGH
    span = (HIGH - LOW) // count
    first = LOW + (int(worker[2:]) % count) * span
    return first, first + span


def free_port() -> int:
    """A port nobody listens on now, picked at random in this worker's slice so parallel tests never collide."""
    rng = random.Random(os.getpid() * 1_000_003 + time.monotonic_ns())
    low, high = worker_range()
    for _ in range(200):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high}")
