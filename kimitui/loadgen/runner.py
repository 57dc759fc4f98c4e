"""The parent side of a sweep: spawn the load process, publish what it reports.

Usage (TUI, CLI, lead)::

    runner = SweepRunner(session, spec, profile="ep8-tuned")
    await runner.start()          # returns once the load process is running
    ...                           # events arrive in the session as they happen
    await runner.abort()          # optional: partial results are kept
    result = await runner.wait()  # the SweepResult (also published)

The load process (:mod:`kimitui.loadgen.worker`) owns its own event loop; this
side only reads JSON lines from a pipe and calls ``session.publish`` for each,
so the session's consumers (UI, recorder) see sweep events exactly like any
other source's.  If the process dies without a result, a ``failed``
``SweepResult`` with its exit code and last stderr lines is published instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections import deque
from pathlib import Path

from pydantic import ValidationError

import kimitui
from kimitui.loadgen.sweep import new_sweep_id
from kimitui.events import ErrorEvent, Event, LevelResult, SweepResult, SweepSpec, parse_event
from kimitui.session import Session

_LINE_LIMIT = 64 * 1024 * 1024  # one progress event at C=1024 is ~100 KB; results with chunk offsets more


_BOOT = "import sys; sys.path.append(sys.argv.pop(1)); from kimitui.loadgen.worker import main; sys.exit(main())"


def worker_command() -> list[str]:
    """How to start the load process so it imports the same kimitui from any working directory.

    ``-P`` (safe path) keeps the working directory off ``sys.path``: run from
    the parent of a clone (a folder holding ``kimitui/`` with a ``bench/``
    inside), ``kimitui`` would otherwise import as that folder's namespace
    package ("No module named kimitui.loadgen.worker").  The folder this
    process's kimitui came from is appended, so an uninstalled checkout
    still finds itself.
    """
    return [sys.executable, "-P", "-c", _BOOT, str(Path(kimitui.__file__).resolve().parents[1])]


class SweepRunner:
    """Runs one sweep in a child process and publishes its events into ``session``."""

    def __init__(self, session: Session, spec: SweepSpec, profile: str | None = None, *,
                 sweep_id: str | None = None, progress_hz: float = 4.0, host: str | None = None) -> None:
        """``host``: the host its events name (default the session's; in a fleet, the host swept)."""
        self.session = session
        self.host = host or session.host
        self.spec = spec
        self.profile = profile
        self.sweep_id = sweep_id or new_sweep_id()
        self.progress_hz = progress_hz
        self.levels: list[LevelResult] = []
        self.result: SweepResult | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stderr_tail: deque[str] = deque(maxlen=20)
        self._done = asyncio.Event()

    @property
    def running(self) -> bool:
        """True from ``start()`` until the sweep's result is in."""
        return self._proc is not None and not self._done.is_set()

    async def start(self) -> None:
        """Spawn the load process and start relaying its events."""
        if self._proc is not None:
            raise RuntimeError("this SweepRunner was already started")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._proc = await asyncio.create_subprocess_exec(
            *worker_command(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=_LINE_LIMIT, env=env,
        )
        config = {"spec": self.spec.model_dump(mode="json"), "sweep_id": self.sweep_id,
                  "host": self.host, "profile": self.profile, "progress_hz": self.progress_hz}
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(config).encode() + b"\n")
        await self._proc.stdin.drain()
        self._reader = asyncio.get_running_loop().create_task(self._relay())

    async def abort(self, grace_s: float = 10.0) -> SweepResult:
        """Ask the load process to stop; in-flight requests end as incomplete and everything is kept.

        Returns the (``aborted``) result; the process is killed if it does not
        finish within ``grace_s``.
        """
        if self._proc is None:
            raise RuntimeError("SweepRunner.abort() before start()")
        if not self._done.is_set():
            stdin = self._proc.stdin
            with contextlib.suppress(ConnectionError, RuntimeError):
                if stdin is not None:
                    stdin.write(b"abort\n")
                    await stdin.drain()
            try:
                await asyncio.wait_for(self._done.wait(), grace_s)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
        return await self.wait()

    async def wait(self) -> SweepResult:
        """The sweep's result, once the load process has finished."""
        if self._reader is None:
            raise RuntimeError("SweepRunner.wait() before start()")
        await self._done.wait()
        assert self.result is not None
        return self.result

    # -- relay -------------------------------------------------------------------
    async def _relay(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        errs = asyncio.get_running_loop().create_task(self._drain_stderr(proc.stderr))
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # a line beyond the limit: report it, keep going
                    self._error("an event line from the load process was too long and was skipped")
                    continue
                if not line:
                    break
                self._handle_line(line)
            rc = await proc.wait()
            await errs
            if self.result is None:
                tail = " | ".join(self._stderr_tail)
                reason = f"load process exited with code {rc} before reporting a result"
                self._error(reason, tail)
                self._publish(SweepResult(host=self.host, sweep_id=self.sweep_id,
                                          levels=[lv.concurrency for lv in self.levels],
                                          outcome="failed", reason=f"{reason}: {tail}"[:2000]))
        finally:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            self._done.set()

    def _handle_line(self, line: bytes) -> None:
        try:
            event = parse_event(line)
        except (ValidationError, ValueError) as exc:
            self._error("bad event line from the load process", f"{exc}; line: {line[:200]!r}")
            return
        self._publish(event)

    def _publish(self, event: Event) -> None:
        if isinstance(event, LevelResult):
            self.levels.append(event)
        elif isinstance(event, SweepResult):
            self.result = event
        self.session.publish(event)

    def _error(self, message: str, detail: str = "") -> None:
        self.session.publish(ErrorEvent(host=self.host, source="sweep", message=message, detail=detail))

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while True:
            line = await stream.readline()
            if not line:
                return
            self._stderr_tail.append(line.decode("utf-8", "replace").rstrip())
