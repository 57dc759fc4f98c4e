"""Preflight: the host's own SGLang asked about the target, a port held by a stranger, the swap plan."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kimitui.events import Event, ProfileSwitch
from kimitui.host.local import LocalHost
from kimitui.launcher import ports
from kimitui.launcher.plan import plan_swap
from kimitui.launcher.preflight_host import ask_host_sglang, plan_for
from kimitui.launcher.swap import SwapOptions, swap
from tests.support.waiting import wait_for
from kimitui.profiles import load_profile

if TYPE_CHECKING:
    from tests.support.launcher_env import SimEnv

pytest_plugins = ["tests.support.launcher_env"]

async def test_a_real_hosts_own_python_is_asked_and_a_check_that_cannot_run_only_warns(tmp_path: Path) -> None:
    """The target's interpreter runs the preflight script; without SGLang (this venv) or without a Python at
    all, the answer says why and refuses nothing."""
    prof = tmp_path / "p.toml"
    prof.write_text(f'name = "p"\nextends = "ep8-v2"\n[launcher]\npython = "{sys.executable}"\n')
    plan = plan_for(LocalHost("gpu"), load_profile(str(prof)), simulated=False)
    assert plan.python == sys.executable and [p.role for p in plan.processes] == ["server"]
    assert "--enable-eplb" in plan.processes[0].args
    answer = await ask_host_sglang(LocalHost("gpu"), load_profile(str(prof)), simulated=False)
    assert answer.problem.startswith(f"no SGLang in {sys.executable}") and answer.refusals("p") == []

    prof.write_text(f'name = "p"\nextends = "ep8-v2"\n[launcher]\npython = "{tmp_path / "missing"}"\n')
    missing = await ask_host_sglang(LocalHost("gpu"), load_profile(str(prof)), simulated=False)
    assert "command not found" in missing.problem and missing.warnings("p")[0].endswith("going on unchecked")

    # from the launch's working directory, with its environment (where a source checkout or PYTHONPATH is)
    prof.write_text(f'name = "p"\nextends = "ep8-v2"\nenv = {{ PYTHONPATH = "{tmp_path}" }}\n'
                    f'[launcher]\npython = "{sys.executable}"\nworkdir = "{tmp_path / "nowhere"}"\n')
    plan = plan_for(LocalHost("gpu"), load_profile(str(prof)), simulated=False)
    assert ("PYTHONPATH", str(tmp_path)) in plan.env and plan.argv()[:2] == ["sh", "-c"]
    nowhere = await ask_host_sglang(LocalHost("gpu"), load_profile(str(prof)), simulated=False)
    assert "nowhere" in nowhere.problem and nowhere.refusals("p") == []
    (tmp_path / "nowhere").mkdir()
    there = await ask_host_sglang(LocalHost("gpu"), load_profile(str(prof)), simulated=False)
    assert there.problem.startswith(f"no SGLang in {sys.executable}")


async def test_a_port_held_by_a_stranger_stops_the_swap_and_the_stranger_lives(sim_env: SimEnv) -> None:
    host = LocalHost("sim")
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", sim_env.port))
        stranger.listen()
        assert await ports.listening(host, sim_env.port)
        target = sim_env.profile("t", "ep8-tuned")
        out = await swap(host, str(target), SwapOptions(timeout=30, port_wait_s=0.3), session=sim_env.session,
                         launcher=sim_env.launcher(host))
        assert out.outcome == "failed" and f"port {sim_env.port}" in out.reason
        assert "did not start" in out.reason
        assert stranger.fileno() != -1 and await ports.listening(host, sim_env.port)
    assert await ports.listening(host, sim_env.port) == ""
    assert await sim_env.launcher(host).current() is None


# Ports whose hex awk reads as the same number (1E10 and 10E9 are both 1e10; 70E7, 07E8 and 7E08 are 7e8).
AWK_TWINS = [(0x1E10, 0x10E9), (0x2E10, 0x20E9), (0x3E10, 0x30E9), (0x4E10, 0x40E9), (0x5E10, 0x50E9),
             (0x6E10, 0x60E9), (0x07E8, 0x70E7), (0x7E08, 0x70E7)]


async def test_a_port_is_never_taken_for_another_whose_hex_reads_as_the_same_number() -> None:
    """Seen on a busy run: a swap to port 28903 (70E7) was refused because something listened on 2024 (07E8)."""
    host = LocalHost("sim")
    for held, asked in AWK_TWINS:
        with socket.socket() as listener, socket.socket() as probe:
            try:
                listener.bind(("127.0.0.1", held))
                probe.bind(("127.0.0.1", asked))  # free: nothing may claim to hold it
            except OSError:
                continue  # one of the pair is in use here: try the next pair
            listener.listen()
            assert await ports.listening(host, asked) == "", (held, asked)
            found = await ports.holder(host, held)
            assert found is not None and found.pid == os.getpid(), (held, found)
            return
    raise AssertionError("every pair of ports was in use")


def test_the_swap_plan_shows_changes_the_confound_warning_and_lint_errors(tmp_path: Path) -> None:
    tuned, v2 = load_profile("ep8-tuned"), load_profile("ep8-v2")
    plan = plan_swap(v2, running=tuned, baseline=tuned)
    assert plan.confounded and {k: plan.changes[k] for k in ("enable_eplb", "num_continuous_decode_steps")} == {
        "enable_eplb": (False, True), "num_continuous_decode_steps": (8, 16)}
    assert set(plan.changes) - {"enable_eplb", "num_continuous_decode_steps"} == {
        "expert_balancedness_report_mode", "env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL"}  # reporting only
    assert plan.warnings[0].startswith("confounded: 2 knobs changed")
    assert any("has no effect in this SGLang" in w for w in plan.warnings)
    assert plan.variants == ["ep8-eplb"] and plan.errors == []  # ep8-cont16 changes only a knob with no effect

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nextends = "ep8-tuned"\nep_size = 3\n')
    refused = plan_swap(load_profile(str(bad)), running=tuned, baseline=None)
    assert refused.errors and "ep_size" in refused.errors[0]


async def test_an_unreachable_host_fails_the_swap_with_a_reason_not_a_traceback(tmp_path: Path) -> None:
    from kimitui.launcher.process import ProcessLauncher
    from kimitui.session import Session
    from tests.support.sshd import SSHTestServer

    server = SSHTestServer(tmp_path / "sshd")
    await server.start()
    host = server.make_host("gpu")
    await host.connect()
    await server.stop()  # the link is gone
    session = Session("gpu")
    events: list[Event] = []
    session.add_sink(events.append)
    try:
        launcher = ProcessLauncher(host, simulated=True, state_dir=str(tmp_path / "state"))
        out = await swap(host, "ep8-tuned", SwapOptions(timeout=5), session=session, launcher=launcher)
    finally:
        await host.close()
    assert out.outcome == "failed" and "gpu" in out.reason and not out.ok
    last = events[-1]
    assert isinstance(last, ProfileSwitch) and last.outcome == "failed"


async def test_an_unknown_profile_is_refused_with_the_search_path(tmp_path: Path) -> None:
    out = await swap(LocalHost("sim"), "no-such-profile", SwapOptions(timeout=5))
    assert out.outcome == "failed" and "refused" in out.reason and "no profile named 'no-such-profile'" in out.reason


async def test_a_second_swap_on_the_same_host_is_refused_while_one_runs(tmp_path: Path) -> None:
    import subprocess

    from kimitui.launcher.process import ProcessLauncher

    state = tmp_path / "state"
    state.mkdir()
    # another kimitui process holds the host's swap lock
    holder = subprocess.Popen(["flock", str(state / "swap.lock"), "sleep", "30"], start_new_session=True)
    try:
        await wait_for(lambda: subprocess.run(["flock", "-n", str(state / "swap.lock"), "true"]).returncode == 1,
                       5, "the other process to hold the swap lock", interval=0.02)
        launcher = ProcessLauncher(LocalHost("sim"), simulated=True, state_dir=str(state))
        out = await swap(LocalHost("sim"), "ep8-tuned", SwapOptions(timeout=5), launcher=launcher)
        assert out.outcome == "failed" and "another swap is running on sim" in out.reason
        assert await launcher.current() is None  # nothing was touched
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock and the sleep that holds the lock
        holder.wait()
    # released (and a lock held by a swap goes away with it): the next swap may take it
    from kimitui.launcher.hostlock import swap_lock

    async with swap_lock(LocalHost("sim"), str(state)) as held:
        assert held


def test_drift_counts_only_knobs_the_profile_sets() -> None:
    from kimitui.launcher.drift import drift

    tuned = load_profile("ep8-tuned")  # max_running_requests 256; chunked_prefill_size left to SGLang
    info = {"max_running_requests": 128, "chunked_prefill_size": 8192, "enable_eplb": False,
            "internal_states": [{"ep_size": 4}]}
    assert drift(tuned, info) == {"max_running_requests": [256, 128], "ep_size": [8, 4]}
    assert drift(tuned, {"max_running_requests": 256, "ep_size": 8, "tp_size": 8}) == {}
