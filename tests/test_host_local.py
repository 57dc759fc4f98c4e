"""LocalHost against real subprocesses: run, stream, stdin, timeouts, atomic writes."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time

import pytest

from kimitui.host.base import CommandTimeout, HostError
from kimitui.host.local import LocalHost
from tests.support.waiting import wait_for


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def wait_gone(pid: int, within: float = 3.0) -> bool:
    """True once ``pid`` is gone; fails the test, naming the pid, if it still runs after ``within``."""
    await wait_for(lambda: not alive(pid), within, f"pid {pid} to be gone", interval=0.02)
    return True


@pytest.fixture
def host() -> LocalHost:
    return LocalHost()


async def test_run_gives_exit_code_stdout_and_stderr(host: LocalHost) -> None:
    r = await host.run(["bash", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.ok and r.argv == ("bash", "-c", "echo out; echo err >&2; exit 3")


async def test_run_passes_stdin_and_env(host: LocalHost) -> None:
    r = await host.run(["bash", "-c", 'cat; echo "$KIMI_X"'], input="from stdin\n", env={"KIMI_X": "v 1"})
    assert r.stdout == "from stdin\nv 1\n"
    # env adds to the inherited environment rather than replacing it
    r = await host.run(["bash", "-c", 'echo "$PATH"'], env={"KIMI_X": "1"})
    assert r.stdout.strip() == os.environ["PATH"]


async def test_arguments_are_never_shell_interpreted(host: LocalHost, tmp_path) -> None:
    target = tmp_path / "x"
    r = await host.run(["echo", f"; touch {target}"])
    assert r.stdout == f"; touch {target}\n"
    assert not target.exists()


async def test_missing_program_is_exit_127_and_check_raises(host: LocalHost) -> None:
    r = await host.run(["kimitui-no-such-program-xyz"])
    assert r.exit_code == 127 and "command not found" in r.stderr
    with pytest.raises(HostError, match="exit 1"):
        await host.run(["false"], check=True)


async def test_killed_by_signal_is_exit_none(host: LocalHost) -> None:
    r = await host.run(["bash", "-c", "kill -9 $$"])
    assert r.exit_code is None


async def test_timeout_kills_the_whole_process_group(host: LocalHost, tmp_path) -> None:
    pidfile = tmp_path / "child.pid"
    # the grandchild would outlive a plain kill of bash
    cmd = f"sleep 30 & echo $! > {pidfile}; wait"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout, match="timeout"):
        await host.run(["bash", "-c", cmd], timeout=0.3)
    assert time.monotonic() - t0 < 2
    assert await wait_gone(int(pidfile.read_text()))


async def test_stream_yields_lines_as_they_come(host: LocalHost) -> None:
    stream = await host.stream(["bash", "-c", "for i in 1 2 3; do echo line$i; sleep 0.05; done; printf tail"])
    got: list[tuple[str, float]] = []
    t0 = time.monotonic()
    async for line in stream:
        got.append((line, time.monotonic() - t0))
    assert [g[0] for g in got] == ["line1", "line2", "line3", "tail"]
    assert got[0][1] < got[2][1] - 0.05  # not buffered until the end
    assert stream.exit_code == 0


async def test_stream_stderr_kept_apart_or_merged(host: LocalHost) -> None:
    s = await host.stream(["bash", "-c", "echo a; echo oops >&2; exit 4"])
    assert [line async for line in s] == ["a"]
    assert s.exit_code == 4 and s.stderr_tail.text() == "oops"  # type: ignore[attr-defined]
    s = await host.stream(["bash", "-c", "echo a; echo oops >&2"], merge_stderr=True)
    assert sorted([line async for line in s]) == ["a", "oops"]


async def test_stream_stdin_write_and_close(host: LocalHost) -> None:
    s = await host.stream([sys.executable, "-u", "-c", "import sys\nfor l in sys.stdin: print(l.strip().upper())"])
    lines = aiter(s)
    await s.write("hello\n")
    assert await anext(lines) == "HELLO"
    await s.write(b"bytes too\n")
    assert await anext(lines) == "BYTES TOO"
    await s.close_stdin()
    assert [line async for line in lines] == []
    assert await s.wait() == 0
    with pytest.raises(HostError, match="stdin"):
        await s.write("late\n")


async def test_stop_terms_then_kills_and_is_idempotent(host: LocalHost, tmp_path) -> None:
    pidfile = tmp_path / "child.pid"
    # ignores TERM, so stop() must escalate to KILL after the grace period
    s = await host.stream(["bash", "-c", f"trap '' TERM; sleep 30 & echo $! > {pidfile}; echo ready; wait"])
    assert await anext(aiter(s)) == "ready"
    t0 = time.monotonic()
    await asyncio.gather(s.stop(grace_s=0.3), s.stop(grace_s=0.3))
    assert 0.25 < time.monotonic() - t0 < 2
    assert s.exit_code is None  # killed by a signal
    assert await wait_gone(s.pid)  # type: ignore[attr-defined]
    assert await wait_gone(int(pidfile.read_text()))
    await s.stop()  # again: no error


async def test_stop_of_cooperative_process_is_quick(host: LocalHost) -> None:
    s = await host.stream(["sleep", "30"])
    t0 = time.monotonic()
    await s.stop(grace_s=5)
    assert time.monotonic() - t0 < 1


async def test_close_stops_running_streams_and_says_so() -> None:
    events: list = []
    host = LocalHost("sim", events.append, simulated=True)
    async with host:
        await host.wait_connected(timeout=1)
        s = await host.stream(["sleep", "30"])
    assert not alive(s.pid)  # type: ignore[attr-defined]
    assert [(e.host, e.state) for e in events] == [("sim", "connected"), ("sim", "closed")]


async def test_write_file_is_atomic_with_mode(host: LocalHost, tmp_path) -> None:
    path = tmp_path / "profile.toml"
    path.write_text("old")
    await host.write_file(str(path), "new contents\n", mode=0o600)
    assert path.read_text() == "new contents\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.toml"]  # no temp left behind
    await host.write_file(str(path), b"\x00\xffbin", mode=0o755)
    assert await host.read_file(str(path)) == b"\x00\xffbin"
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


async def test_write_failure_keeps_old_file_and_names_path(host: LocalHost, tmp_path) -> None:
    with pytest.raises(HostError, match="no-such-dir"):
        await host.write_file(str(tmp_path / "no-such-dir" / "f"), "x")
    with pytest.raises(HostError, match=r"local: cannot read .*missing"):
        await host.read_file(str(tmp_path / "missing"))
