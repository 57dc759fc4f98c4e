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


def free_port() -> int:
    """A port nobody listens on now, picked at random in LOW..HIGH so parallel tests rarely collide."""
    rng = random.Random(os.getpid() * 1_000_003 + time.monotonic_ns())
    for _ in range(200):
        port = rng.randrange(LOW, HIGH)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {LOW}-{HIGH}")
