"""The autopilot end to end on the simulated host: the loop, the end state, the resume — locally, killed with
SIGKILL at a step and resumed, and over the in-process SSH server.

Each tune tries three changes from ``ep8-tuned`` on a short workload (C=1,64, 64 tokens of the seeds' prompts, 10x clock): EPLB
on (the simulator's per-token recorder cost makes it slower: reverted, its cause named), the DFlash
drafter (faster in the simulator at these levels: kept) and ``--moe-dense-tp-size 1`` (the simulator does
not model it: no change, reverted).  Every tune must end with the best (the drafter) serving.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kimitui.events import SweepSpec, TuneProgress
from kimitui.live import LiveController
from kimitui.profiles import load_profile
from kimitui.tune import candidates as cands
from kimitui.tune import state as store
from kimitui.live.tunes import ControllerHost
from kimitui.tune.state import TunePlan, TuneState
from kimitui.tune.tuner import Tuner, new_state

REPO = Path(__file__).resolve().parent.parent
CHANGES = ["enable_eplb=true", "speculative_algorithm=DFLASH", "moe_dense_tp_size=1"]
WORKLOAD = ["--levels", "1,64", "--max-tokens", "64", "--prompts", "seed", "--warmup", "1"]


@pytest.fixture
def tune_home(sim_home: Path) -> Path:
    """sim_home with a 10x clock: at 40x a C=64 level asks ~36k tok/s of two cores, and the noise of a
    starved load process would decide the verdicts."""
    for f in (Path.cwd() / "profiles").glob("*.toml"):
        f.write_text(f.read_text().replace("time_scale = 40.0", "time_scale = 10.0"))
    return sim_home


def _plan(*, with_noop: bool = True) -> TunePlan:
    start = load_profile("ep8-tuned")
    found = [cands.parse_change("enable_eplb=true"),
             cands.from_profile(start, load_profile("ep8-dflash"))[0]]
    if with_noop:  # a change the simulator does not model: its verdict is the noise's
        found.append(cands.parse_change("moe_dense_tp_size=1"))
    spec = SweepSpec(url="", model="", levels=[1, 64], max_tokens=64, prompts="seed", warmup_requests=1)
    return TunePlan(start="ep8-tuned", candidates=[c for c in found if c is not None], workload=spec)


def dense_kept_last(st: TuneState) -> bool:
    """The no-op was kept after the drafter (noise): it is then the best, on top of the drafter."""
    last = st.steps[-1]
    return last.candidate.family == "moe_dense_tp_size" and last.status == "kept"


def _check_end_over_the_link(st: TuneState, serving: str | None) -> None:
    """What resuming through the link must give: a finished tune, EPLB reverted, the best serving.

    At C=64 through the in-process SSH forward the test's own event loop carries every stream (the
    forwarder, not the server, may set the peak on a loaded machine: a CI run saw DFlash -16 % there
    with +46 % at C=1), so the drafter's keep-or-revert is the local tests' to check, not this one's."""
    assert st.status == "finished", st.note
    by = {s.candidate.family: s for s in st.steps}
    eplb, dflash = by["enable_eplb"], by["speculative decoding"]
    assert eplb.status == "reverted" and dflash.status in ("kept", "reverted"), [s.reason for s in st.steps]
    assert serving == st.best and st.best in ("ep8-tuned", dflash.profile)
    assert st.report_path and Path(st.report_path).read_text().count("### ") == len(st.steps)


def _client_could_not_judge(reason: str) -> bool:
    """The drafter's step left unjudged because the load client itself fell behind (the machine, not the
    drafter): the autopilot must then revert it as "not judged", never keep it; on a quiet machine it is kept."""
    return reason.startswith("not judged") and "the client could not keep up" in reason


def _check_end(st: TuneState, serving: str | None) -> None:
    assert st.status == "finished", st.note
    by = {s.candidate.family: s for s in st.steps}
    eplb, dflash = by["enable_eplb"], by["speculative decoding"]
    assert eplb.status == "reverted", [s.reason for s in st.steps]
    assert eplb.verdict == "regressed" and "enable_eplb" in eplb.cause, eplb
    assert "worse beyond noise" in eplb.reason or _client_could_not_judge(eplb.reason), eplb.reason
    assert dflash.profile is not None and dflash.profile.endswith("dflash")  # ep8-dflash, or on top of a kept no-op
    if _client_could_not_judge(dflash.reason):  # a machine too busy to drive C=64: evidence before verdicts
        assert dflash.status == "reverted" and serving == st.best, dflash.reason
    else:
        assert dflash.status == "kept", [s.reason for s in st.steps]
        assert serving == st.best == dflash.profile or (dense_kept_last(st) and serving == st.best)
    dense = by.get("moe_dense_tp_size")
    if dense is not None:  # not modelled: usually "no change", but on a loaded machine the noise may exceed the floor
        assert dense.status in ("reverted", "kept") and dense.objective_change, dense.reason
        if dense.index > dflash.index and dflash.status == "kept":
            assert dense.against == "ep8-dflash" and dense.profile == "ep8-tuned-dflash-dense-tp1"
        else:
            assert dense.against == "ep8-tuned" and dense.profile == "ep8-tuned-dense-tp1"
    assert st.report_path and Path(st.report_path).read_text().count("### ") == len(st.steps)
    assert json.loads(Path(st.report_path).with_suffix(".json").read_text())["best"] == st.best


async def _tune(ctl: LiveController, st: TuneState, where: Path) -> TuneState:
    await ctl.start()
    for _ in range(600):
        if ctl.connected:
            break
        await asyncio.sleep(0.1)
    return await Tuner(ControllerHost(ctl), st, where).run()


@pytest.mark.timeout(360)  # past 120 s with both cores kept busy beside the suite (it was recording step 1)
async def test_a_tune_keeps_what_wins_reverts_the_rest_and_ends_with_the_best_serving(tune_home: Path) -> None:
    tune_id, where = store.new_tune_dir("sim")
    st = new_state(tune_id, "sim", _plan())
    ctl = LiveController(autostart=False)
    ctl.keep_serving = False  # the test's simulated server goes with it
    sub = ctl.session.subscribe("t", kinds=["tune_progress", "marker"], maxsize=100_000)
    try:
        st = await _tune(ctl, st, where)
        _check_end(st, ctl.running_profile)
    finally:
        await ctl.shutdown()
    seen = sub.drain()
    progress = [e for e in seen if isinstance(e, TuneProgress)]
    assert {p.status for p in progress} >= {"running", "finished"}
    assert any(p.step == 2 and p.phase == "sweeping" for p in progress)
    assert any(getattr(e, "label", "").startswith("tune step 1: reverted") for e in seen)
    assert store.load(where).status == "finished"


def _cli(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "kimitui", "tune", *args], cwd=Path.cwd(), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.timeout(420)  # two tunes' worth of sweeps, and a refused third start between them, on a loaded machine
def test_killed_at_a_step_and_resumed_it_ends_the_same(tune_home: Path) -> None:
    args = ["--from", "ep8-tuned", "--change", CHANGES[0], "--variant", "ep8-dflash", "--change", CHANGES[2], *WORKLOAD]
    proc = _cli(tune_home, *args)
    started = [proc]  # every autopilot this test starts is killed before the stop, or one outlives it
    try:
        where = _wait_for_step(proc, 2, 180)
        second = _cli(tune_home, "--resume")
        started.append(second)  # one autopilot per tune: the first one still drives it
        refused, _ = second.communicate(timeout=120)
        assert second.returncode == 3 and f"is already being run by pid {proc.pid} (kimitui tune," in refused, refused
        os.kill(proc.pid, signal.SIGKILL)  # kimitui dies mid-sweep of step 2: no clean-up of any kind
        proc.wait(10)
        assert store.load(where).status == "running"
        resumed = _cli(tune_home, "--resume")
        started.append(resumed)
        out, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, out
        assert f"took over the lock of pid {proc.pid} (kimitui tune, started " in out  # the dead one's, said once
        st = store.load(where)
        status = subprocess.run([sys.executable, "-m", "kimitui", "status", "--json"], capture_output=True, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
        serving = json.loads(status.stdout).get("profile")
        _check_end(st, serving)
        assert f"best {st.best}" in out and "report:" in out
    finally:
        # a resumed autopilot still running (its communicate timed out on a loaded machine) would start a
        # server after the stop below: kill each one first, then stop what they left serving
        for p in started:
            p.kill()
            p.wait(30)
        _stop_what_serves()


def _stop_what_serves(tries: int = 3) -> None:
    """`kimitui stop --yes` until `status` finds nothing: a swap's supervisor, which finishes alone when its
    autopilot is killed, may start its server just after the first stop looked."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(tries):
        subprocess.run([sys.executable, "-m", "kimitui", "stop", "--yes"], capture_output=True, timeout=60, env=env)
        status = subprocess.run([sys.executable, "-m", "kimitui", "status", "--json"], capture_output=True,
                                text=True, timeout=60, env=env)
        try:
            if not json.loads(status.stdout).get("running"):
                return
        except json.JSONDecodeError:
            return
        time.sleep(2)


def _wait_for_step(proc: subprocess.Popen[str], index: int, timeout: float) -> Path:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        where = store.resumable("sim")
        if where is not None:
            st = store.load(where)
            step = st.steps[index - 1]
            if step.status == "running" and step.phase == "sweeping":
                return where
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.2)
    raise AssertionError(f"step {index} never started sweeping")


@pytest.mark.timeout(360)  # past 120 s with both cores kept busy beside the suite (it was recording step 1)
async def test_over_ssh_a_tune_cut_off_mid_step_resumes_and_ends_with_the_best_serving(tune_home: Path,
                                                                                      ssh_server) -> None:
    cfg = tune_home / "config.toml"
    cfg.write_text(
        "[hosts.ct200]\n"
        f'address = "127.0.0.1"\nport = {ssh_server.port}\nuser = "{ssh_server.user}"\n'
        f'key = "{ssh_server.client_key_path}"\nknown_hosts = "{ssh_server.known_hosts_path}"\n'
        f'agent = false\nkeepalive_s = 2\nconnect_timeout_s = 3\nsim = true\npython = "{sys.executable}"\n')
    tune_id, where = store.new_tune_dir("ct200")
    st = new_state(tune_id, "ct200", _plan(with_noop=False))  # through the link the no-op's noise is larger still
    first = LiveController(config_path=str(cfg), autostart=False, record=False)
    first.keep_serving = True
    sub = first.session.subscribe("t", kinds=["tune_progress"], maxsize=100_000)
    run = asyncio.ensure_future(_tune(first, st, where))
    try:
        while True:  # cut kimitui off while step 1 sweeps over the link
            ev = await asyncio.wait_for(sub.get(), 120)
            if isinstance(ev, TuneProgress) and ev.step == 1 and ev.phase == "sweeping":
                break
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    finally:
        await first.shutdown()
    st = store.load(where)
    assert st.status == "running" and st.steps[0].status == "running" and st.best_runs
    second = LiveController(config_path=str(cfg), autostart=False, record=False)
    try:
        st = await _tune(second, st, where)
        _check_end_over_the_link(st, second.running_profile)
    finally:
        await second.shutdown()
        stop = await asyncio.create_subprocess_exec(  # the first session started it: nobody here stops it on quit
            sys.executable, "-m", "kimitui", "--config", str(cfg), "stop", "--host", "ct200", "--yes",
            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(stop.communicate(), 60)
        assert stop.returncode == 0, out.decode()


async def test_a_variant_that_fails_to_start_is_rolled_back_recorded_failed_and_skipped(tune_home: Path) -> None:
    """Its swap's rollback brings the best back; the step says why; the next step still runs."""
    (Path.cwd() / "profiles" / "ep8-tuned-graph128.toml").write_text(
        'name = "ep8-tuned-graph128"\nextends = "ep8-tuned"\ncuda_graph_max_bs = 128\n[sim]\nfault = "oom_start"\n')
    start = load_profile("ep8-tuned")
    crashy, _ = cands.from_profile(start, load_profile("ep8-tuned-graph128"))
    assert crashy is not None
    spec = SweepSpec(url="", model="", levels=[1], max_tokens=32, prompts="seed")
    plan = TunePlan(start="ep8-tuned", candidates=[crashy, cands.parse_change("moe_dense_tp_size=1")], workload=spec)
    tune_id, where = store.new_tune_dir("sim")
    ctl = LiveController(autostart=False, record=False)
    try:
        st = await _tune(ctl, new_state(tune_id, "sim", plan), where)
        assert st.status == "finished" and ctl.running_profile == "ep8-tuned" == st.best
    finally:
        await ctl.shutdown()
    failed, after = st.steps
    assert failed.status == "failed" and failed.profile == "ep8-tuned-graph128"
    assert "did not start" in failed.reason and "ep8-tuned rolled back" in failed.reason
    assert after.status == "reverted" and after.against == "ep8-tuned"
