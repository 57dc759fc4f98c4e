"""What the tuner needs of a live host, and the two things it does there: swap and sweep, each awaited.

:class:`TuneHost` is a narrow view of the cockpit's live controller (``kimitui.live.tunes.ControllerHost``), so the
headless ``kimitui tune`` and the cockpit's autopilot drive the same swaps (rollback on failure), the
same sweeps and the same recording.  Each measured sweep is also written to its own recording in the
tune's folder, with the server's args and the log lines and GPU samples that explain a regression,
so a resumed tune reads the best's sweeps back from disk.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Protocol

from kimitui.events import Event, ProfileSwitch, ServerInfo, SweepResult, SweepSpec, SweepStarted
from kimitui.recording import RecordingWriter
from kimitui.report.sweep_summary import SweepRun, pick_sweep, summarize
from kimitui.session import Session

LATE_S = 2.0
"""After a sweep's result, how long its late log lines and GPU samples are still written to its recording."""
BUSY_WAIT_S = 120.0


class TuneAborted(Exception):
    """The operator skipped the step or stopped the tune while it waited on the host."""


class TuneHost(Protocol):
    session: Session
    host_name: str

    @property
    def running_profile(self) -> str | None: ...

    @property
    def profile_dirs(self) -> list[str]: ...

    @property
    def busy(self) -> str | None: ...

    async def swap(self, profile: str) -> None: ...

    async def start_sweep(self, spec: SweepSpec) -> None: ...

    async def stop_sweep(self) -> None: ...

    def sweep_target(self) -> tuple[str, str]:
        """(base URL, model) of what serves now."""
        ...


class Latest:
    """A session sink that keeps the newest ServerInfo and ProfileSwitch (a step's recording starts with them)."""

    def __init__(self) -> None:
        self.info: ServerInfo | None = None
        self.switch: ProfileSwitch | None = None

    def __call__(self, ev: Event) -> None:
        if isinstance(ev, ServerInfo):
            self.info = ev
        elif isinstance(ev, ProfileSwitch):
            self.switch = ev


async def _not_busy(host: TuneHost, abort: asyncio.Event) -> None:
    end = time.monotonic() + BUSY_WAIT_S
    while host.busy is not None and time.monotonic() < end:
        if abort.is_set():
            raise TuneAborted()
        await asyncio.sleep(0.2)


async def swap_to(host: TuneHost, profile: str) -> ProfileSwitch:
    """Swap and wait for the outcome (``ok``, ``rolled_back`` to what ran, ``failed``): a swap is never
    abandoned half way, so it is not abortable."""
    sub = host.session.subscribe("tune-swap", kinds=["profile_switch"])
    try:
        await _not_busy(host, asyncio.Event())
        await host.swap(profile)
        while True:
            ev = await sub.get()
            if isinstance(ev, ProfileSwitch) and ev.host == host.host_name and ev.to_profile == profile:
                return ev
    finally:
        sub.close()


async def measure(host: TuneHost, spec: SweepSpec, path: Path, latest: Latest, meta: dict[str, object],
                  abort: asyncio.Event) -> SweepRun:
    """One sweep of what serves, recorded to ``path``; raises TuneAborted if ``abort`` is set meanwhile
    (the sweep is stopped; what it measured stays in the recording)."""
    writer = RecordingWriter(path, hosts=[host.host_name], meta={"command": "tune", **meta}).start()
    for first in (latest.switch, latest.info):
        if first is not None:
            writer(first)
    remove = host.session.add_sink(writer)
    sub = host.session.subscribe("tune-sweep", kinds=["sweep_started", "sweep_result"])
    sweep_id: str | None = None
    try:
        await _not_busy(host, abort)
        await host.start_sweep(spec)
        aborted = asyncio.ensure_future(abort.wait())
        try:
            while True:
                got = asyncio.ensure_future(sub.get())
                done, _ = await asyncio.wait({got, aborted}, return_when=asyncio.FIRST_COMPLETED)
                if aborted in done:
                    got.cancel()
                    await _stop(host)
                    raise TuneAborted()
                got_ev = got.result()
                if isinstance(got_ev, SweepStarted) and sweep_id is None:
                    sweep_id = got_ev.sweep_id
                elif isinstance(got_ev, SweepResult) and got_ev.sweep_id == sweep_id:
                    break
        finally:
            aborted.cancel()
        await asyncio.sleep(LATE_S)
    finally:
        sub.close()
        remove()
        await writer.aclose()
    return pick_sweep(summarize(path), sweep_id)


async def _stop(host: TuneHost) -> None:
    try:
        await host.stop_sweep()
    except Exception:  # noqa: BLE001 - it may have ended on its own meanwhile
        pass


async def refresh_server_info(host: TuneHost, url: str) -> None:
    """Ask ``/server_info`` now, so the step's recording names the args that really serve (the verdict's
    knob diff reads them); a server without it is measured all the same."""
    from kimitui.launcher.http_ready import client
    from kimitui.telemetry.metrics_poll import MetricsPoller

    try:
        async with client(url) as http:
            await MetricsPoller(host.session, url, host=host.host_name, client=http).poll_server_info()
    except Exception:  # noqa: BLE001 - the follower's own polls say what is wrong with the server
        return
