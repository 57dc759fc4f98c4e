"""Is a TCP port listening on the host?  Read from ``/proc/net/tcp*`` on the host itself."""

from __future__ import annotations

import asyncio
import time

from kimitui.host.base import Host

# args: port -> exit 0 (and the socket line) when something listens on it, 1 when free
_LISTENING = r"""
hex=$(printf '%04X' "$1")
awk -v p="$hex" 'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); if (a[n] == p) { print FILENAME ": " $2 " uid " $8; found = 1 } }
  END { exit found ? 0 : 1 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
"""


async def listening(host: Host, port: int) -> str:
    """What listens on ``port`` (a short description), or ``""`` when nothing does."""
    res = await host.run(["sh", "-c", _LISTENING, "sh", str(int(port))], timeout=20)
    return res.stdout.strip() if res.exit_code == 0 else ""


async def wait_free(host: Host, port: int | None, *, timeout: float = 10.0, interval: float = 0.1) -> str:
    """Wait until nothing listens on ``port``; returns ``""`` or what still holds it at the end."""
    if port is None:
        return ""
    end = time.monotonic() + timeout
    while True:
        busy = await listening(host, port)
        if not busy or time.monotonic() >= end:
            return busy
        await asyncio.sleep(interval)
