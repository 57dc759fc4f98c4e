"""``kimitui sweep --host NAME`` (issue 34): a headless sweep with the host's GPUs and server log beside it.

On the simulated host the recording carries GPU samples over every level (so each level has its power) and
the server's log (so an EPLB straggler has its cause, where a ``--url`` sweep can only say unknown); with
nothing running it says how to start something; over the real in-process SSH server, a link lost mid-sweep
leaves the sweep running and the recording saying when telemetry stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kimitui.analysis.causes.sweep_causes import sweep_causes
from kimitui.analysis.energy import fold
from kimitui.cli import build_parser, main
from kimitui.commands.sweep import build_spec
from kimitui.commands.sweep_host import sweep_on_host
from kimitui.events import (ErrorEvent, Event, GpuSample, LevelResult, LevelStarted, LogLine, ProfileState,
                            SweepResult, SweepStarted)
from kimitui.host.local import LocalHost
from kimitui.launcher.process import ProcessLauncher
from kimitui.profiles import load_profile
from kimitui.recording import read_recording
from kimitui.session import Session

pytestmark = pytest.mark.timeout(240)

WORKLOAD = ["--max-tokens", "256", "--prompts", "random:64", "--requests", "40", "--no-progress"]
"""C=4 runs ~2,600 forward passes: the second EPLB rebalance (every 1,000; its stall ~1.8 s with the seed 0) lands well inside the level."""


def write_fast(cwd: Path, name: str, base: str, port: int, time_scale: float) -> str:
    path = cwd / "profiles" / f"{name}.toml"
    path.write_text(f'name = "{name}"\nextends = "{base}"\nport = {port}\n[sim]\ntime_scale = {time_scale}\n'
                    "startup_s = 1.0\n")
    return str(path)


async def _launch(path: str) -> None:
    async with LocalHost("sim") as host:
        await ProcessLauncher(host, simulated=True).start(load_profile(path))


async def _stop_all() -> None:
    async with LocalHost("sim") as host:
        launcher = ProcessLauncher(host, simulated=True)
        for rec in await launcher.records():
            if await launcher.alive(rec):
                await launcher.stop(rec, grace_s=2.0)


def _wait_healthy(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"no healthy server on {port}")


@contextlib.contextmanager
def serving(sim_home: Path, name: str, base: str, time_scale: float = 20.0) -> Iterator[int]:
    """A server kimitui started on the simulated host (its run record there), stopped after."""
    from tests.support.net import free_port

    port = free_port()
    path = write_fast(sim_home / "cwd", name, base, port, time_scale)
    asyncio.run(_launch(path))
    try:
        _wait_healthy(port)
        yield port
    finally:
        asyncio.run(_stop_all())


def sweep(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["sweep", *argv])
    return rc, out.getvalue(), err.getvalue()


def level_windows(events: list[Event]) -> list[tuple[int, float, float]]:
    starts = {(e.concurrency, e.repeat): e.t for e in events if isinstance(e, LevelStarted)}
    return [(e.concurrency, starts[(e.concurrency, e.repeat)], e.t) for e in events if isinstance(e, LevelResult)]


def test_a_host_sweep_records_gpus_over_every_level_and_its_eplb_stragglers_get_a_cause(sim_home: Path) -> None:
    with serving(sim_home, "fast-eplb", "ep8-eplb") as port:
        out = sim_home / "eplb.jsonl"
        rc, _, err = sweep("--host", "sim", "--levels", "4,8", *WORKLOAD, "--idle-s", "4", "--out", str(out))
        assert rc == 0, err
        events = list(read_recording(out).events)
    assert "measuring sim's idle power for 4 s" in err
    assert next(e for e in events if isinstance(e, SweepStarted)).spec.url == f"http://127.0.0.1:{port}"  # its server's
    samples = [e for e in events if isinstance(e, GpuSample)]
    assert {e.host for e in samples} == {"sim"} and {e.host for e in events if isinstance(e, LevelResult)} == {"sim"}
    windows = level_windows(events)
    assert [c for c, _, _ in windows] == [4, 8]
    for c, start, end in windows:
        inside = [s for s in samples if start <= s.t <= end]
        assert inside and all(len(s.gpus) == 8 and all(g.power_w for g in s.gpus) for s in inside), c
    energy = fold(events)
    sweep_id = next(e for e in events if isinstance(e, SweepStarted)).sweep_id
    for c, _, _ in windows:
        level = energy.level(sweep_id, c)
        assert level is not None and level.j_per_token, (c, level)
    idle = energy.idle_of(sweep_id)
    assert idle is not None and idle.ok  # measured before the first level
    assert any(isinstance(e, LogLine) for e in events)  # the server's log, as the cockpit follows it
    assert any(isinstance(e, ProfileState) and e.profile == "fast-eplb" for e in events)
    stragglers = [s for e in events if isinstance(e, LevelResult) for s in e.stragglers]
    assert stragglers, "no straggler: the rebalances did not land inside a level"
    causes = sweep_causes(events)
    named = {a.cause for a in causes.attributions.values()}
    assert "eplb" in named, named  # a --url sweep of the same server reads 'unknown' (test below)


def test_the_same_sweep_by_url_has_no_telemetry_and_no_cause(sim_home: Path) -> None:
    """The before: what `--url` records of the same server (no GPUs, no log, every straggler unknown)."""
    with serving(sim_home, "fast-eplb", "ep8-eplb") as port:
        out = sim_home / "eplb-url.jsonl"
        rc, _, err = sweep("--url", f"http://127.0.0.1:{port}", "--levels", "4", *WORKLOAD, "--out", str(out))
        assert rc == 0, err
        events = list(read_recording(out).events)
    assert not any(isinstance(e, (GpuSample, LogLine)) for e in events)
    assert {a.cause for a in sweep_causes(events).attributions.values()} <= {"unknown"}


def test_with_nothing_running_it_says_how_to_start_one(sim_home: Path) -> None:
    rc, out, err = sweep("--host", "sim", "--levels", "1", "--requests", "1", "--no-progress", "--idle-s", "0")
    assert rc == 2 and out == ""
    assert "no server kimitui started runs on host 'sim'" in err and "kimitui swap PROFILE" in err
    rc, _, err = sweep("--host", "nosuch", "--levels", "1", "--no-progress")
    assert rc == 2 and "no host 'nosuch'" in err


async def test_a_lost_link_mid_sweep_leaves_the_sweep_running_and_says_when_telemetry_stopped(
        sim_home: Path, tmp_path: Path) -> None:
    from tests.support.net import free_port
    from tests.support.sshd import SSHTestServer

    port = free_port()
    path = write_fast(sim_home / "cwd", "fast-tuned", "ep8-tuned", port, time_scale=5.0)
    await _launch(path)
    sshd = SSHTestServer(tmp_path / "sshd")
    await sshd.start()
    try:
        await asyncio.to_thread(_wait_healthy, port)
        host = sshd.make_host("gpu-ssh")
        host.simulated = True  # the in-process server runs commands on this machine: the fake NVML is there
        out = tmp_path / "lost.jsonl"
        args = build_parser().parse_args(
            ["sweep", "--host", "gpu-ssh", "--url", f"http://127.0.0.1:{port}", "--levels", "4,8", "--max-tokens",
             "128", "--prompts", "random:64", "--requests", "24", "--no-progress", "--idle-s", "2", "--out", str(out),
             "--json"])
        spec = build_spec(args, require_url=False)
        session = Session(host="gpu-ssh")
        started = session.subscribe("test", kinds=["level_started", "gpu_sample"])

        async def drop_the_link() -> float:
            seen: set[str] = set()
            while seen != {"level_started", "gpu_sample"}:  # the first level runs, the GPUs stream
                seen.add((await started.get()).kind)
            await asyncio.sleep(0.5)
            dropped = time.time()
            await sshd.stop()  # every connection aborted, every command it ran killed
            return dropped

        dropper = asyncio.create_task(drop_the_link())
        with contextlib.redirect_stdout(io.StringIO()):
            rc = await sweep_on_host(spec, args, host_factory=lambda: host, session=session)
        dropped = await asyncio.wait_for(dropper, 1.0)
    finally:
        await sshd.stop()
        await _stop_all()
    assert rc == 0
    events = list(read_recording(out).events)
    result = next(e for e in events if isinstance(e, SweepResult))
    assert result.outcome == "completed" and len([e for e in events if isinstance(e, LevelResult)]) == 2
    stopped = [e for e in events if isinstance(e, ErrorEvent) and e.source == "telemetry"
               and e.message.startswith("telemetry stopped at")]
    assert len(stopped) == 1, [e.message for e in events if isinstance(e, ErrorEvent)]
    samples = [e.t for e in events if isinstance(e, GpuSample)]
    assert samples and max(samples) <= dropped + 0.5  # nothing after the link went
    assert f"t={max(samples):.3f}" in stopped[0].message  # stopped at the last sample received
    last_level_end = max(e.t for e in events if isinstance(e, LevelResult))
    assert last_level_end > dropped  # the sweep went on after the link was lost
