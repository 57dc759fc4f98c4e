"""The machine to itself, for a measurement that needs it, in the middle of a run of two pytest-xdist workers.

The real engine's agreement check times two clients on one core against an engine on the other.  A sibling worker
running the cockpit's tests beside them made kimitui's client 30 % slower than bench_serving's in one CI run, and
bench_serving's 31 % slower in another (the figure measured the neighbour, not the client).  It used to wait for the
other workers to finish their last files, with its file handed out last: in one CI run xdist had reordered the files,
the wait gave up after 900 s, and with the file last the run's final 7 minutes had one worker idle.

Now every test runs holding a shared lock on a file in the run's shared base folder (``pytest_runtest_protocol`` in
conftest, outside pytest-timeout's clock).  :func:`machine_to_itself` turns its own worker's hold exclusive: it
waits for the test the other worker is in to end, and the other worker's next test waits until the measurement is
done.  A gate lock taken before the shared one gives the exclusive request priority, so a worker that goes straight
from one test to the next cannot keep it out.  Without xdist there is no other worker, and nothing to lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

class QuietLock:
    """The two lock files in ``folder``, held by this process: ``gate`` (who may start) and ``run`` (who runs)."""

    def __init__(self, folder: Path) -> None:
        # flock locks belong to the open file: one open file per name, so a process converts its own lock
        self.gate = os.open(folder / "quiet-gate.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self.run = os.open(folder / "quiet-run.lock", os.O_RDWR | os.O_CREAT, 0o600)

    @contextlib.contextmanager
    def held_for_a_test(self) -> Iterator[None]:
        """Held around each whole test: shared with the other workers' tests, never with a measurement's quiet."""
        fcntl.flock(self.gate, fcntl.LOCK_EX)  # waits while a measurement holds the machine (or is waiting for it)
        try:
            fcntl.flock(self.run, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.run, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def machine_to_itself(self) -> Iterator[str]:
        """Within a test: no other worker's test runs until the block ends.  Yields what the wait was."""
        start = time.monotonic()
        fcntl.flock(self.gate, fcntl.LOCK_EX)  # from now on no other worker starts a test
        try:
            fcntl.flock(self.run, fcntl.LOCK_EX)  # this test's own shared hold, exclusive once the other test ends
            try:
                yield f"the other worker held off ({time.monotonic() - start:.0f} s waited for its test to end)"
            finally:
                fcntl.flock(self.run, fcntl.LOCK_SH)  # back to this test's shared hold
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)


_lock: list[QuietLock] = []
"""This process's lock, once it has one."""


def _shared_dir(config: pytest.Config) -> Path | None:
    """The run's base temp folder, which every worker's own folder sits in (None without xdist)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return None
    return Path(factory.getbasetemp()).parent


def _run_lock(config: pytest.Config) -> QuietLock | None:
    if not _lock:
        shared = _shared_dir(config)
        if shared is None:
            return None
        _lock.append(QuietLock(shared))
    return _lock[0]


@contextlib.contextmanager
def held_for_a_test(config: pytest.Config) -> Iterator[None]:
    """Around each test of an xdist run (conftest); nothing without xdist."""
    lock = _run_lock(config)
    if lock is None:
        yield
        return
    with lock.held_for_a_test():
        yield


@contextlib.contextmanager
def machine_to_itself(config: pytest.Config) -> Iterator[str]:
    """Within a test: no other worker's test runs until the block ends.  Yields what the wait was, for the report."""
    lock = _run_lock(config)
    if lock is None:
        yield "no other workers"
        return
    with lock.machine_to_itself() as waited:
        yield waited
