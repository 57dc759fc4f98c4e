"""ProcessLauncher: detached start, per-start log, TERM then KILL, and it never signals a stranger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kimitui.host.local import LocalHost
from kimitui.launcher.base import LaunchError
from kimitui.launcher.process import ProcessLauncher
from tests.support.waiting import wait_for

pytest_plugins = ["tests.support.launcher_env"]

pytestmark = pytest.mark.timeout(60)

PY = sys.executable


def _ticks(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _whole_line_with(path: Path, text: str) -> bool:
    """A line holding ``text`` and its newline: under PYTHONUNBUFFERED a print's words are separate writes."""
    return path.exists() and any(text in line for line in path.read_text().splitlines(keepends=True)
                                 if line.endswith("\n"))


async def _wait_for(path: Path, text: str, timeout: float = 10.0) -> str:
    await wait_for(lambda: _whole_line_with(path, text), timeout, f"{text!r} in {path}", interval=0.02)
    return path.read_text()


@pytest.fixture
async def launcher(tmp_path: Path):
    launcher = ProcessLauncher(LocalHost("local"), state_dir=str(tmp_path / "state"))
    yield launcher
    for rec in await launcher.records():
        if await launcher.alive(rec):
            await launcher.stop(rec, grace_s=1.0)


async def test_start_is_detached_with_its_own_group_log_and_record(launcher: ProcessLauncher, tmp_path: Path) -> None:
    code = "import os,time; print('pgid', os.getpgid(0), 'sid', os.getsid(0), flush=True); time.sleep(60)"
    rec = await launcher.start_argv("demo", [PY, "-c", code], port=4242)
    assert rec.pid and rec.start_ticks == _ticks(rec.pid)
    log = Path(rec.log_path)
    assert log.parent == tmp_path / "state" / "4242"
    text = await _wait_for(log, "pgid")
    assert text.split() == ["pgid", str(rec.pid), "sid", str(rec.pid)]  # its own session and group
    assert (log.parent / "server.pid").read_text().strip() == str(rec.pid)
    on_disk = json.loads((log.parent / "run.json").read_text())
    assert on_disk["run_id"] == rec.run_id and on_disk["profile"] == "demo"
    assert (await launcher.current()).run_id == rec.run_id
    # the marker every process of this start inherits
    env = Path(f"/proc/{rec.pid}/environ").read_bytes().split(b"\0")
    assert f"KIMITUI_RUN_ID={rec.run_id}".encode() in env

    second_log_names = {p.name for p in log.parent.glob("*.log")}
    assert await launcher.stop(rec, grace_s=2.0) == "stopped-term"
    assert not _alive(rec.pid) and await launcher.current() is None
    # only the files kimitui wrote for the run go; the log stays for the record
    assert not (log.parent / "run.json").exists() and not (log.parent / "server.pid").exists()
    assert {p.name for p in log.parent.glob("*.log")} == second_log_names

    rec2 = await launcher.start_argv("demo", [PY, "-c", "import time; print('again', flush=True); time.sleep(60)"], port=4242)
    assert rec2.log_path != rec.log_path  # one log file per start
    await _wait_for(Path(rec2.log_path), "again")
    assert "again" not in log.read_text()


async def test_old_start_logs_are_pruned_but_nothing_else(tmp_path: Path) -> None:
    launcher = ProcessLauncher(LocalHost("local"), state_dir=str(tmp_path / "state"), keep_logs=2)
    run_dir = tmp_path / "state" / "4250"
    run_dir.mkdir(parents=True)
    theirs = run_dir / "operator-notes.log"
    theirs.write_text("mine")
    old = run_dir / "20240101-000000-deadbeef.log"
    old.write_text("old")
    os.utime(old, (1, 1))
    logs = []
    for _ in range(3):
        rec = await launcher.start_argv("x", [PY, "-c", "print('hi')"], port=4250)
        logs.append(Path(rec.log_path))
        await _wait_for(logs[-1], "hi")  # written before the next start: mtimes in start order
    remaining = sorted(p.name for p in run_dir.glob("*.log"))
    assert remaining == sorted([theirs.name, logs[1].name, logs[2].name])


async def test_follow_log_yields_this_starts_lines(launcher: ProcessLauncher) -> None:
    code = "import time\nfor i in range(5): print('line', i, flush=True); time.sleep(0.02)\ntime.sleep(60)"
    rec = await launcher.start_argv("demo", [PY, "-c", code], port=4243)
    stream = await launcher.follow_log(rec)
    got = []
    async for line in stream:
        got.append(line)
        if len(got) == 5:
            break
    await stream.stop()
    assert got == [f"line {i}" for i in range(5)]
    assert await launcher.read_log_tail(rec, 2) == ["line 3", "line 4"]


async def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(launcher: ProcessLauncher) -> None:
    code = (
        "import signal, subprocess, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen(['sleep', '60'])\n"  # a child in the same group, like a TP worker
        "print('child', child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    rec = await launcher.start_argv("stubborn", [PY, "-c", code], port=4244)
    child = int((await _wait_for(Path(rec.log_path), "child")).split()[1])
    t0 = time.monotonic()
    assert await launcher.stop(rec, grace_s=0.5) == "stopped-kill"
    assert 0.4 < time.monotonic() - t0 < 5
    assert not _alive(rec.pid) and not _alive(child)


async def test_never_signals_a_process_it_did_not_start(launcher: ProcessLauncher) -> None:
    rec = await launcher.start_argv("ours", [PY, "-c", "import time; time.sleep(60)"], port=4245)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        # the same pid with another start time: a recycled pid
        recycled = rec.model_copy(update={"pid": stranger.pid})
        assert await launcher.inspect(recycled) == "foreign"
        with pytest.raises(LaunchError, match="not a process kimitui started"):
            await launcher.stop(recycled)
        # the right pid and start time, but without our marker
        unmarked = rec.model_copy(update={"pid": stranger.pid, "start_ticks": _ticks(stranger.pid)})
        assert await launcher.inspect(unmarked) == "foreign"
        with pytest.raises(LaunchError):
            await launcher.stop(unmarked)
        assert stranger.poll() is None and _alive(stranger.pid)
        assert await launcher.alive(rec)  # and ours is untouched too
    finally:
        stranger.kill()
        stranger.wait()


async def test_a_dead_leader_leaves_its_marked_children_to_be_stopped(launcher: ProcessLauncher) -> None:
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print('child', child.pid, flush=True)\n"
        "sys.exit(0)\n"  # the leader exits; its child keeps the group (and the marker)
    )
    rec = await launcher.start_argv("orphaning", [PY, "-c", code], port=4246)
    child = int((await _wait_for(Path(rec.log_path), "child")).split()[1])
    await wait_for(lambda: not _alive(rec.pid), 5, f"the leader {rec.pid} to exit")
    assert await launcher.inspect(rec) == "alive"  # the group still runs
    await launcher.stop(rec, grace_s=1.0)
    assert not _alive(child)


async def test_profile_values_reach_the_server_verbatim_and_run_nothing(tmp_path: Path, sim_host) -> None:
    """Locally and through the in-process SSH server (``sim_host`` is parametrized over both)."""
    from kimitui.profiles import load_profile

    marker = tmp_path / "pwned"
    evil = f"; touch {marker}"
    dollar = f"$(touch {marker})"
    backtick = f"`touch {marker}`"
    prof = tmp_path / "evil.toml"
    prof.write_text(
        'name = "evil"\nmodel_path = "/m ' + evil.replace('"', '\\"') + '"\n'
        f'served_model_name = "{dollar}"\n'
        f'extra_args = ["--x", "{backtick}", "%n %% $HOME \\\\ \'"]\n'
        f'env = {{ KT_A = "{evil}", KT_B = "{dollar}" }}\n'
        f'[launcher]\nkind = "process"\npython = "{Path(__file__).parent / "support" / "argv_dump.py"}"\n'
    )
    profile = load_profile(str(prof))
    launcher = ProcessLauncher(sim_host, state_dir=str(tmp_path / "state"))
    rec = await launcher.start(profile)
    seen = json.loads((await _wait_for(Path(rec.log_path), "argv")).splitlines()[0])
    await launcher.stop(rec, grace_s=1.0)
    from kimitui.profiles import render_argv

    assert seen["argv"] == render_argv(profile)[1:]
    assert f"/m {evil}" in seen["argv"] and dollar in seen["argv"] and backtick in seen["argv"]
    assert "%n %% $HOME \\ '" in seen["argv"]
    assert seen["env"] == {"KT_A": evil, "KT_B": dollar}
    assert not marker.exists()


def test_a_newline_in_a_profile_value_is_refused_with_file_and_field(tmp_path: Path) -> None:
    from kimitui.profiles import ProfileError, load_profile

    prof = tmp_path / "nl.toml"
    prof.write_text('name = "nl"\nmodel_path = "/m\\nExecStartPre=/bin/touch /tmp/x"\n')
    with pytest.raises(ProfileError) as err:
        load_profile(str(prof))
    assert "model_path" in str(err.value) and "nl.toml" in str(err.value)
