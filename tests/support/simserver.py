"""Start the real simulated SGLang server (``kimitui sim serve``) for a test.

    with start_sim("ep8-tuned", time_scale=50) as sim:
        httpx.get(sim.url + "/health")

    async with start_sim("ep8-eplb") as sim:
        ...

It runs ``python -m kimitui sim serve`` as a subprocess on a free 127.0.0.1
port with its own ``KIMITUI_SIM_STATE`` file, captures stdout+stderr into
``log_path`` (``lines()`` reads it back), waits for ``/health`` 200 (unless
``wait_ready=False``), and on exit sends SIGTERM, then SIGKILL after a grace.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from tests.support.net import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
_RUNNING: set[SimServerProcess] = set()


@atexit.register
def _stop_leftovers() -> None:
    """A test that forgot to stop its server (or an interrupted run) must not leave it running."""
    for server in list(_RUNNING):
        server.stop(grace_s=2.0)


class SimServerProcess:
    """A running ``kimitui sim serve`` subprocess."""

    def __init__(
        self,
        profile: str = "ep8-tuned",
        *,
        time_scale: float = 50.0,
        seed: int = 0,
        fault: str | None = None,
        fault_rate: float = 0.0,
        extra_args: Sequence[str] = (),
        wait_ready: bool = True,
        ready_timeout: float | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.profile = profile
        self.time_scale = time_scale
        self.wait_ready = wait_ready
        # start-up is ~45 simulated seconds (plus ~1 s of imports and a busy box's slack)
        self.ready_timeout = ready_timeout if ready_timeout is not None else 25.0 + 60.0 / time_scale
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model = "/root/models/Kimi-K2.6"
        self._tmp = Path(tempfile.mkdtemp(prefix="kimitui-sim-"))
        self.state_path = self._tmp / "gpus.json"
        self.log_path = self._tmp / "server.log"
        self.argv = [
            sys.executable, "-m", "kimitui", "sim", "serve",
            "--profile", profile, "--host", "127.0.0.1", "--port", str(self.port),
            "--time-scale", str(time_scale), "--seed", str(seed),
        ]
        if fault:
            self.argv += ["--fault", fault, "--fault-rate", str(fault_rate)]
        self.argv += list(extra_args)
        self.env = {**os.environ, "KIMITUI_SIM_STATE": str(self.state_path), "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self._respawns = 0

    # ------------------------------------------------------------------ life cycle
    def start(self) -> SimServerProcess:
        self._spawn()
        try:
            self._read_model_name()
            if self.wait_ready:
                self.wait_healthy(self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self) -> None:
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log_file, stderr=subprocess.STDOUT, env=self.env, cwd=REPO_ROOT, start_new_session=True
        )
        _RUNNING.add(self)

    def _respawn_on_port_race(self) -> bool:
        """Another process took our port before the server bound it: try a new one (at most twice)."""
        if self._respawns >= 2 or "error while attempting to bind" not in self.output():
            return False
        self._respawns += 1
        self._log_file.close()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv[self.argv.index("--port") + 1] = str(self.port)
        self._spawn()
        return True

    def _read_model_name(self) -> None:
        from kimitui.sim.settings import load_settings

        try:
            self.model = load_settings(self.profile).served_model_name
        except Exception:  # the server itself will report a bad profile
            pass

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Poll /health until 200; raise with the log tail if the server dies or times out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                if self._respawn_on_port_race():
                    continue
                raise RuntimeError(f"sim server exited with {self.proc.returncode} before ready:\n{self.tail()}")
            if self.health() == 200:
                return
            time.sleep(0.05)
        raise TimeoutError(f"sim server not healthy after {timeout:.0f}s:\n{self.tail()}")

    def health(self) -> int | None:
        """Status of GET /health, or None when nothing answers."""
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (urllib.error.URLError, OSError):
            return None

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.returncode = self.proc.wait(timeout=timeout)
        return self.returncode

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL; returns the exit code."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc is not None:
            self.returncode = self.proc.returncode
        _RUNNING.discard(self)
        if getattr(self, "_log_file", None) is not None:
            self._log_file.close()
        return self.returncode

    def cleanup(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    # ------------------------------------------------------------------ output
    def output(self) -> str:
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return ""

    def lines(self) -> list[str]:
        """Captured stdout+stderr lines so far (tqdm ``\\r`` refreshes kept inside their line)."""
        return self.output().splitlines()

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines()[-n:])

    def wait_for_line(self, needle: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if needle in line:
                    return line
            time.sleep(0.05)
        raise TimeoutError(f"no line containing {needle!r} after {timeout}s:\n{self.tail()}")

    # ------------------------------------------------------------------ context managers
    def __enter__(self) -> SimServerProcess:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> SimServerProcess:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)


def start_sim(
    profile: str = "ep8-tuned",
    *,
    time_scale: float = 50.0,
    seed: int = 0,
    fault: str | None = None,
    fault_rate: float = 0.0,
    extra_args: Sequence[str] = (),
    wait_ready: bool = True,
    ready_timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> SimServerProcess:
    """A not-yet-started server; use it with ``with`` or ``async with``; ``env`` adds to its environment."""
    return SimServerProcess(
        profile,
        time_scale=time_scale,
        seed=seed,
        fault=fault,
        fault_rate=fault_rate,
        extra_args=extra_args,
        wait_ready=wait_ready,
        ready_timeout=ready_timeout,
        env=env,
    )
