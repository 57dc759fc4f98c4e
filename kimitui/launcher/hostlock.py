"""One swap at a time per host, across kimitui processes (the cockpit and a shell, two operators).

The lock is ``flock`` on a file in the kimitui state dir, held by a tiny process
on the host for as long as the swap runs.  If kimitui dies or the SSH link
drops, that process ends and the lock is released by the kernel: it can never
be left stale.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kimitui.host.base import Host, HostError

RELEASE_WAIT_S = 5
"""How long a swap waits for the lock before calling the host busy: a swap that just ended lets go of it when
its holder on the host sees stdin close, which a loaded host (or a link that just came back) can take a few
seconds to do; a swap really under way holds it for minutes, so waiting this long refuses it all the same."""

# args: lockfile, seconds -> prints "locked" once held, then holds it until stdin closes
_HOLD = r"""
mkdir -p "$(dirname "$1")" || exit 2
exec flock -w "$2" "$1" sh -c 'echo locked; exec cat >/dev/null'
"""


class HostBusy(Exception):
    """Another swap holds the host's lock."""


@asynccontextmanager
async def swap_lock(host: Host, state_dir: str) -> AsyncIterator[bool]:
    """Hold the host's swap lock; yields False when the host has no ``flock`` (no lock, no error).

    Raises HostBusy when another swap holds it.
    """
    path = posixpath.join(state_dir, "swap.lock")
    stream = await host.stream(["sh", "-c", _HOLD, "sh", path, str(RELEASE_WAIT_S)])
    try:
        first = None
        async for line in stream:
            first = line
            break
        if first != "locked":
            code = await stream.wait()
            if code == 1:
                raise HostBusy(f"another swap is running on {host.name} (it holds {path})")
            yield False  # no flock on this host (127) or no state dir: go on without the lock
            return
        yield True
    finally:
        with contextlib.suppress(HostError):
            await stream.close_stdin()
        with contextlib.suppress(HostError):
            await stream.stop(grace_s=1.0)
