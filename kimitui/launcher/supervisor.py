"""The controller's side of the host-side swap supervisor (:mod:`kimitui.launcher.supervisor_host`).

Why: a swap's host side (stop, start, readiness, rollback) must finish even
when this kimitui dies or its link drops.  For each swap a small Python
process is started detached on the host (nothing installed: its source
travels with ``python3 -c``, like the NVML agent).  It holds the swap lock,
hears each step before the controller takes it, and carries the swap through
alone if the controller goes away.  ``<state>/swap.json`` says how the last
swap went, and whether its controller was still there (``kimitui status``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import posixpath
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kimitui.host.base import Host, HostError, Stream
from kimitui.host.local import LocalHost
from kimitui.launcher.hostlock import HostBusy
from kimitui.launcher.select import is_simulated_host

SCRIPT = Path(__file__).with_name("supervisor_host.py").read_text()
STATE_FILE = "swap.json"
EXIT_WAIT_S = 10.0
"""How long a finished swap waits for the supervisor to write the outcome and release the lock."""


def host_python(host: Host) -> str:
    """The Python that runs the supervisor: this one locally (and on the simulated host), else ``python3``."""
    if host.python:
        return host.python
    return sys.executable if isinstance(host, LocalHost) or is_simulated_host(host) else "python3"


class Detached(Exception):
    """The link to the supervisor broke mid-swap: it is finishing the swap alone; act no more."""


class Supervisor:
    """A live link to the host's supervisor: :meth:`note` each step, :meth:`done` at the end."""

    def __init__(self, stream: Stream, state_dir: str) -> None:
        self.stream = stream
        self.state_dir = state_dir
        self.closed = False
        self.lost = False
        """The channel ended (a dropped link): the supervisor has taken over."""
        self.started_at = time.time()
        self._watch = asyncio.get_running_loop().create_task(self._watch_link())

    async def _watch_link(self) -> None:
        """It prints nothing after "locked": its output ending means the channel (or it) is gone."""
        with contextlib.suppress(HostError):
            async for _line in self.stream:
                pass
        if not self.closed:
            self.lost = True

    async def send(self, message: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            await self.stream.write(json.dumps(message, default=str) + "\n")
        except HostError:
            self.lost = True  # the link dropped: the supervisor carries on alone
            self.closed = True

    async def note(self, phase: str, **fields: object) -> None:
        """Tell the supervisor the next step *before* taking it; raises Detached once it took over."""
        if self.lost:
            raise Detached(phase)
        await self.send({"phase": phase, **fields})
        if self.lost:
            raise Detached(phase)

    async def done(self, outcome: str, serving: str | None, reason: str) -> None:
        await self.send({"done": outcome, "serving": serving, "reason": reason})
        await self.release()

    async def release(self) -> None:
        """Close our end; a supervisor told ``done`` exits, one that was not takes over."""
        self._watch.cancel()
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(HostError):
            await self.stream.close_stdin()
        with contextlib.suppress(HostError, asyncio.TimeoutError):
            await asyncio.wait_for(self.stream.wait(), EXIT_WAIT_S)


@asynccontextmanager
async def supervised(host: Host, state_dir: str) -> AsyncIterator[Supervisor | None]:
    """Start the supervisor (it takes the swap lock); the swap sends it the plan first.

    Yields None when the host cannot run it (no Python there): the caller falls
    back to the plain lock.  Raises HostBusy when another swap holds the lock.
    On leaving without :meth:`Supervisor.done` (an error, a cancellation) only our
    end is closed, so the supervisor finishes the host side.
    """
    argv = ["setsid", "-w", host_python(host), "-c", SCRIPT, state_dir]
    try:
        stream = await host.stream(argv)
    except HostError:
        yield None
        return
    first = None
    async for line in stream:
        first = line.strip()
        break
    if first != "locked":
        with contextlib.suppress(HostError, asyncio.TimeoutError):
            await asyncio.wait_for(stream.wait(), 5.0)
        if first == "busy":
            raise HostBusy(f"another swap is running on {host.name} (it holds {posixpath.join(state_dir, 'swap.lock')})")
        yield None
        return
    sup = Supervisor(stream, state_dir)
    try:
        yield sup
    finally:
        await asyncio.shield(sup.release())


async def last_swap(host: Host, state_dir: str) -> dict[str, Any] | None:
    """The last supervised swap's record on the host (``swap.json``), or None."""
    try:
        data = json.loads(await host.read_file(posixpath.join(state_dir, STATE_FILE)))
    except (HostError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("outcome") is None and data.get("supervisor_pid"):
        res = await host.run(["kill", "-0", str(int(data["supervisor_pid"]))], timeout=10)
        data["in_progress"] = res.ok
    return data


async def await_outcome(host: Host, sup: Supervisor, timeout: float, interval: float = 0.5) -> dict[str, Any] | None:
    """After the link broke: wait (the host reconnecting) for the supervisor to record how the swap ended."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            last = await last_swap(host, sup.state_dir)
        except HostError:
            last = None
        if last is not None and float(last.get("started_at") or 0) >= sup.started_at - 5 and last.get("outcome"):
            return last
        await asyncio.sleep(interval)
    return None


def describe(last: dict[str, Any], *, running: bool | None = None) -> str:
    """One line for ``kimitui status``: the last swap, whether its controller detached, how it ended.

    ``running=False``: nothing kimitui started runs now (the cockpit quit and stopped it, say), so
    a server the swap left serving is told as history and said to be gone, never as serving."""
    target, prev = last.get("target") or "?", last.get("previous")
    when = last.get("ended_at") or last.get("updated_at") or last.get("started_at") or time.time()
    ago = max(0, int(time.time() - float(when)))
    head = f"last swap: {prev or 'nothing'} -> {target}"
    lost = last.get("controller") == "lost"
    if last.get("outcome") is None:
        if last.get("in_progress"):
            who = "its controller went away; the supervisor is finishing it" if lost else "in progress"
            return f"{head}: {who} (step {last.get('phase')}, supervisor pid {last.get('supervisor_pid')})"
        return f"{head}: the supervisor ended without an outcome (step {last.get('phase')})"
    words = {
        "ok": f"{target} serving",
        "rolled_back": f"rolled back, {last.get('serving') or prev} serving again",
        "rollback_failed": "failed and the rollback failed too: nothing serves",
        "failed": "failed",
        "interrupted": "interrupted" + (f", {last.get('serving')} still serving" if last.get("serving") else ""),
        "unknown": "ended in an unknown state",
    }
    gone = {
        "ok": f"{target} was serving",
        "rolled_back": f"rolled back, {last.get('serving') or prev} was serving again",
        "interrupted": f"interrupted, {last.get('serving')} was still serving",
    }
    key = str(last.get("outcome"))
    stopped = running is False and key in gone and (key != "interrupted" or bool(last.get("serving")))
    outcome = gone[key] if stopped else words.get(key, key)
    line = f"{head}: {outcome} ({ago}s ago)" + ("; it no longer runs" if stopped else "")
    if lost:
        line += f"; its controller went away during '{last.get('lost_at')}' and the supervisor on the host finished it"
    if last.get("reason"):
        line += f": {last['reason']}"
    return line
