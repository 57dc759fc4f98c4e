"""Shared fixtures.

``ssh_server``: a real in-process SSH server on 127.0.0.1.
``sim_home``: every kimitui directory inside the test's tmp_path, the simulated
profiles the cockpit tests run refined to a free port and a fast clock.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `from tests.support...` works under plain `pytest` too
    sys.path.insert(0, str(ROOT))

from tests.support.sim_home import make_sim_home  # noqa: E402
from tests.support.sshd import SSHTestServer  # noqa: E402


@pytest.fixture
async def ssh_server(tmp_path: Path) -> AsyncIterator[SSHTestServer]:
    """A started SSHTestServer (see tests/support/sshd.py); stopped afterwards."""
    server = SSHTestServer(tmp_path / "sshd")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def sim_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every kimitui directory (tmp, state, data, config, cwd) inside tmp_path, so a
    LiveController on the embedded simulated host touches nothing outside the test.

    ./profiles holds a local refinement of each of sim_home.SIM_HOME_PROFILES: one free port for
    all (a swap replaces the server in place), a 40x clock.  Returns tmp_path."""
    return make_sim_home(tmp_path, monkeypatch.setenv, lambda var: monkeypatch.delenv(var, raising=False),
                         monkeypatch.chdir)


# --------------------------------------------------------------------------- the order files are handed out
# Two workers take files in this order (pyproject: -n 2 --dist loadfile).  The longest files go first, so the
# run does not end on one worker still in a 5-minute file: the real engine's (7 minutes alone) leads.
# pytest-xdist (3.5+) sorts the files by how many tests each holds unless told not to, which undid this order
# (in one CI run the engine's file, then meant to go last, went early and its agreement check waited 900 s
# for the other worker): pyproject's addopts say --no-loadscope-reorder, and pytest_configure refuses a run
# that would undo the order.  A measurement that needs the machine to itself no longer depends on the order:
# it holds the other worker's tests back while it measures (tests/support/quiet_run.py).
FIRST_FILES = ("test_real_engine.py", "test_tune_e2e.py", "test_swap_kill.py", "test_tui_chaos.py",
               "test_causes_sim.py", "test_report_spec.py", "test_verdict_evidence_sim.py", "test_capacity_cli.py")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", "no") in ("loadfile", "loadscope") and getattr(config.option, "loadscopereorder", False):
        raise pytest.UsageError("pytest-xdist would hand out the test files sorted by size, not longest first as "
                                "tests/conftest.py orders them: pass --no-loadscope-reorder (pyproject does)")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's clock: a wait here is no test's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    from tests.support.quiet_run import held_for_a_test

    with held_for_a_test(item.config):  # a measurement that needs the machine to itself holds this test back
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return FIRST_FILES.index(name) - len(FIRST_FILES) if name in FIRST_FILES else 0

    items.sort(key=rank)  # stable: within a rank, pytest's own order


# --------------------------------------------------------------------------- what outlives the session
# A busy non-daemon thread is joined at interpreter exit: pytest prints its summary and then never ends
# (issue 30: over 4 minutes until killed).  A test's child process that is still running outlives the run.
# Both are named at the end of the session, with where the thread stands; a thread that will hold the
# exit also fails the session, so the run ends red instead of hanging silently.

def _idle_executor_worker(frame: object) -> bool:
    """A concurrent.futures worker waiting for work: it ends on its own at exit."""
    import linecache

    while frame is not None:
        code = frame.f_code  # type: ignore[attr-defined]
        if code.co_name == "_worker" and code.co_filename.endswith(("concurrent/futures/thread.py",)):
            return "work_queue.get" in linecache.getline(code.co_filename, frame.f_lineno)  # type: ignore[attr-defined]
        frame = frame.f_back  # type: ignore[attr-defined]
    return False


def exit_holding_threads() -> list[str]:
    """Non-daemon threads, other than idle executor workers, alive now: each holds the interpreter's exit."""
    import threading
    import traceback

    frames = sys._current_frames()
    out = []
    for t in threading.enumerate():
        if t is threading.main_thread() or t.daemon or not t.is_alive():
            continue
        frame = frames.get(t.ident or -1)
        if frame is not None and _idle_executor_worker(frame):
            continue
        where = traceback.format_stack(frame)[-3:] if frame is not None else ["(no frame)"]
        out.append(f"thread {t.name!r} (non-daemon):\n" + "".join(where).rstrip())
    return out


def leftover_processes(pid: int, basetemp: Path | None) -> list[tuple[int, str]]:
    """Processes this session left running: its children, and any process whose command line names
    this session's tmp folder (a test's server, detached into its own session)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == pid:
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        state, ppid = fields[0], int(fields[1])
        ours = ppid == pid or (basetemp is not None and str(basetemp) in cmd)
        if ours and state != "Z":
            out.append((int(entry.name), cmd[:200]))
        elif ppid == pid and state == "Z":
            out.append((int(entry.name), f"(not reaped) {cmd[:180]}"))
    return out


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    if not Path("/proc").is_dir():  # the process scan is Linux's
        return
    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = getattr(factory, "_basetemp", None)
    threads = exit_holding_threads()
    procs = leftover_processes(os.getpid(), basetemp)
    session.config.stash[_LEFTOVERS] = (threads, procs)
    if threads and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_LEFTOVERS = pytest.StashKey[tuple[list[str], list[tuple[int, str]]]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    threads, procs = config.stash.get(_LEFTOVERS, ([], []))
    if not threads and not procs:
        return
    terminalreporter.section("left running at the end of the session", sep="=", red=bool(threads), yellow=True)
    for text in threads:
        terminalreporter.line(f"{text}\n  -> holds the interpreter's exit (a non-daemon thread is joined)")
    for pid, cmd in procs:
        terminalreporter.line(f"process {pid}: {cmd}")
