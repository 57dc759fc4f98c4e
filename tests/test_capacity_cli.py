"""``kimitui capacity`` end to end on the real simulated server: a sane answer that a reading of its own
recorded probes agrees with, EPLB holding to a lower C than the tuned profile (as their curves say),
probes reused from a recording, failing at the start, and argument errors."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kimitui.capacity import capacity_from_levels, parse_slo
from kimitui.cli import main
from kimitui.report.sweep_summary import summarize
from tests.support.net import free_port
from tests.support.simserver import SimServerProcess, start_sim

pytestmark = pytest.mark.timeout(120)

SLO = "decode_p50>=8"
"""A real-time SLO: at x50 it reads decode p50 >= 400 tok/s/user, which with 64-token answers the tuned profile
crosses near C=70-80, EPLB's (its per-token rebalancing cost) near C=50-56."""
WORKLOAD = ["--max-tokens", "64", "--prompts", "random:64"]
BEYOND = ["--allow-client-limit"]
"""x50 asks more chunks/s than one load process drives at the default --max: measured anyway, and judged
against what the run itself measured."""


def fast(tmp: Path, profile: str) -> str:
    """The profile with a half-second simulated start-up (the simulator's test-speed knob)."""
    path = tmp / f"fast-{profile}.toml"
    path.write_text(f'name = "fast-{profile}"\nextends = "{profile}"\n[sim]\nstartup_s = 0.5\n')
    return str(path)


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SimServerProcess]]:
    tmp = tmp_path_factory.mktemp("capacity-sims")
    with contextlib.ExitStack() as stack:
        servers = {p: start_sim(fast(tmp, p), time_scale=50, wait_ready=False) for p in ("ep8-tuned", "ep8-eplb")}
        for server in servers.values():  # both start at once, then both are waited for
            stack.enter_context(server)
        for server in servers.values():
            server.wait_healthy(timeout=server.ready_timeout)
        yield servers


def capacity(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["capacity", *argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tuned(sims: dict[str, SimServerProcess], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rec = tmp_path_factory.mktemp("capacity-rec") / "tuned.jsonl"
    rc, out, err = capacity("--url", sims["ep8-tuned"].url, "--slo", SLO, *WORKLOAD, *BEYOND, "--json",
                            "--no-progress", "--out", str(rec))
    assert rc == 0, err
    return dict(json.loads(out))


def test_the_answer_is_sane_and_agrees_with_its_recorded_levels(tuned: dict[str, Any]) -> None:
    probes = tuned["probes"]
    xs = [p["x"] for p in probes]
    assert xs == sorted(xs) and xs[:3] == [1, 2, 4]  # doubled from C=1 ...
    answer, failing = tuned["bracket"]
    assert tuned["time_scale"] == 50 and "scaled to the simulator's time scale 50" in tuned["sentence"]
    assert answer is not None and tuned["answer"] == answer and (failing is None or answer < failing)
    at = next(p for p in probes if p["x"] == answer)
    assert at["values"]["decode_p50"] >= 400 and 0 < tuned["goodput"] <= at["agg_tok_s"]  # the scaled bound
    if tuned["non_monotonic"]:  # a busy machine can invert the curve: then it says so and claims no tight answer
        # the failing point of the inversion is measured again (its partner above, when it only measured
        # clearly better and still failed, is not: seen at load 8), so some point was measured twice
        assert "not monotonic" in tuned["sentence"] and tuned["measured"] > len(probes)
    else:
        assert all(p["holds"] == (p["x"] <= answer) for p in probes)  # what each probe measured decides
        assert failing is None or failing - answer <= max(1, answer // 8)  # ... bisected
        assert tuned["sentence"].startswith(f"holds up to C={answer} ±") and "decode p50 ≥ 400 tok/s/user" in tuned["sentence"]
    assert tuned["measured"] == sum(p["measurements"] for p in probes) >= len(probes)
    assert tuned["client_drive"]["over"]  # x50 beyond the client: measured because it was told to

    summary = summarize(tuned["recording"])  # every probe is a one-level sweep in the recording
    levels = [(lv, row.requests) for run in summary.sweeps for row in run.levels.values() for lv in row.repeats]
    assert len(levels) == tuned["measured"]
    read = capacity_from_levels(levels, parse_slo(SLO).scaled(50))
    assert (read.answer, read.failing if not tuned["non_monotonic"] else failing) == (answer, failing)
    assert read.goodput == pytest.approx(tuned["goodput"], abs=0.01)
    markers = [m.label for m in summary.markers]
    assert len(markers) == tuned["measured"] and f"capacity probe C={answer}" in markers


def test_eplb_holds_to_a_lower_concurrency_as_its_curve_says(sims: dict[str, SimServerProcess],
                                                              tuned: dict[str, Any]) -> None:
    rc, out, err = capacity("--url", sims["ep8-eplb"].url, "--slo", SLO, *WORKLOAD, *BEYOND, "--json", "--no-progress")
    assert rc == 0, err
    eplb = json.loads(out)
    # each answer follows what its own probes measured (a busy machine moves the curves, not the rule)
    for run in (tuned, eplb):
        for p in run["probes"]:
            assert p["holds"] == (p["values"]["decode_p50"] >= 400), p
        if not run["non_monotonic"]:
            assert run["answer"] == max(p["x"] for p in run["probes"] if p["holds"])
    decode = {p["x"]: p["values"]["decode_p50"] for p in tuned["probes"]}
    shared = [p for p in eplb["probes"] if p["x"] in decode]
    assert {1, 2, 4} <= {p["x"] for p in shared}  # both doubled from C=1
    # EPLB's per-token cost shows from C=16 on.  A busy box can starve the load client until it, not the
    # server, sets both curves below 400 tok/s/user before C=16 (tuned's answer was C=7 at load 6-9): then
    # there is no point to compare, and only the rule above is this machine's to check.
    beyond = [p for p in shared if p["x"] >= 16]
    if beyond and all(p["values"]["decode_p50"] < decode[p["x"]] for p in beyond):  # EPLB's curve below, as measured
        assert eplb["answer"] <= tuned["answer"] + (tuned["plus_minus"] or 0) * 2


def test_a_plan_beyond_the_client_is_refused_offering_what_it_can_drive(sims: dict[str, SimServerProcess]) -> None:
    from kimitui.loadgen.drive_budget import check_drive
    from kimitui.loadgen.drive_calibrate import calibrate

    rc, out, err = capacity("--url", sims["ep8-tuned"].url, "--slo", SLO, *WORKLOAD, "--no-progress")
    assert rc == 2 and out == ""
    assert "refusing the plan: this client can drive about" in err and "at time scale 50" in err
    check = check_drive([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], calibrate(), time_scale=50)
    assert check.exceeds and f"--max {check.max_concurrency}" in err and "--allow-client-limit" in err
    assert check.max_time_scale is not None and check.max_time_scale < 50


def test_points_in_a_matching_recording_are_not_measured_again(sims: dict[str, SimServerProcess],
                                                               tuned: dict[str, Any]) -> None:
    rc, out, err = capacity("--url", sims["ep8-tuned"].url, "--slo", SLO, *WORKLOAD, *BEYOND, "--reuse", tuned["recording"])
    assert rc == 0, err
    assert "reused (tuned.jsonl)" in out
    if not tuned["non_monotonic"]:
        assert f"holds up to C={tuned['answer']} ±" in out and "0 level(s) measured" in out
    else:  # the inversion the recording holds is measured again once, as any search does (a busy machine's curve)
        assert "point(s) taken from recordings" in out
    # another workload matches nothing there: measured afresh
    rc, out, err = capacity("--url", sims["ep8-tuned"].url, "--slo", "ttft_p99<=25ms", "--max-tokens", "32",
                            "--prompts", "random:64", *BEYOND, "--reuse", tuned["recording"], "--json", "--no-progress")
    assert rc == 1 and json.loads(out)["measured"] == 1


def test_an_slo_that_fails_at_the_start_exits_1_saying_why(sims: dict[str, SimServerProcess]) -> None:
    rc, out, err = capacity("--url", sims["ep8-tuned"].url, "--slo", "ttft_p99<=25ms", *WORKLOAD, *BEYOND,
                            "--no-progress")
    assert rc == 1, err
    assert "does not hold even at C=1: ttft p99 " in out and "> 0.5 ms" in out  # 25 ms / 50


@pytest.mark.parametrize(("argv", "message"), [
    (["--url", "http://127.0.0.1:9", "--slo", "ttft_p99<=2x"], '--slo "ttft_p99<=2x": unit \'x\''),
    (["--url", "http://127.0.0.1:9", "--slo", "ttft_p99<=2s", "--start", "1.5"], "--start 1.5: a concurrency is a whole number"),
    (["--url", "http://127.0.0.1:9", "--slo", "ttft_p99<=2s", "--start", "64", "--max", "8"], "--max 8 is below --start 64"),
    (["--url", "http://127.0.0.1:9", "--host", "sim", "--slo", "ttft_p99<=2s"], "--url and --host: give one"),
])
def test_bad_arguments_exit_2_naming_the_problem(argv: list[str], message: str) -> None:
    rc, out, err = capacity(*argv)
    assert rc == 2 and out == "" and message in err


def test_an_unreachable_server_exits_2() -> None:
    rc, out, err = capacity("--url", f"http://127.0.0.1:{free_port()}", "--slo", "ttft_p99<=2s", "--no-progress")
    assert rc == 2 and "cannot ask" in err and "for the model" in err


def test_with_no_target_and_nothing_running_it_says_how_to_start_one(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIMITUI_SIM_STATE", str(tmp_path / "gpus.json"))
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("KIMITUI_CONFIG", str(tmp_path / "config.toml"))
    rc, out, err = capacity("--slo", "ttft_p99<=2s,decode_p50>=20", "--no-progress")
    assert rc == 2 and out == "" and "--url is required" not in err
    assert "no server kimitui started runs on host 'sim'" in err and "kimitui swap PROFILE" in err


def test_host_sim_measures_the_server_kimitui_runs_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import time

    import httpx

    from kimitui.host.local import LocalHost
    from kimitui.launcher.process import ProcessLauncher
    from kimitui.profiles import load_profile
    from tests.support.launcher_env import write_profile

    monkeypatch.setenv("KIMITUI_SIM_STATE", str(tmp_path / "gpus.json"))
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("KIMITUI_CONFIG", str(tmp_path / "config.toml"))  # no configured hosts: 'sim' is the simulator
    port = free_port()
    profile = load_profile(str(write_profile(tmp_path, "cap-tuned", "ep8-tuned", port=port, time_scale=5.0,
                                             startup_s=0.5)))

    async def start() -> None:
        async with LocalHost("sim") as host:
            await ProcessLauncher(host, simulated=True).start(profile)

    async def stop() -> None:
        async with LocalHost("sim") as host:
            launcher = ProcessLauncher(host, simulated=True)
            for rec in await launcher.records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2.0)

    asyncio.run(start())
    try:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                    break
            time.sleep(0.2)
        # the story's command as written: no --url, no --host -> the configured default host, 'sim'
        rc, out, err = capacity("--slo", "ttft_p99<=2s,decode_p50>=20", *WORKLOAD, "--max", "4", "--json",
                                "--no-progress")
        assert rc == 0, err
        got = json.loads(out)
        assert got["spec"]["url"] == f"http://127.0.0.1:{port}" and got["time_scale"] == 5
        assert got["slo_described"] == "ttft p99 ≤ 0.4 s, decode p50 ≥ 100 tok/s/user"  # 2 s / 5, 20 x 5
        assert "scaled to the simulator's time scale 5" in got["sentence"] and got["client_drive"]["over"] == []
        at = next(p for p in got["probes"] if p["x"] == got["answer"])
        assert at["values"]["decode_p50"] >= 100 and at["values"]["ttft_p99"] <= 0.4
        rc, out, err = capacity("--host", "sim", "--slo", "decode_p50>=20", *WORKLOAD, "--max", "4", "--json",
                                "--no-progress")
        assert rc == 0, err and json.loads(out)["spec"]["url"] == f"http://127.0.0.1:{port}"
    finally:
        asyncio.run(stop())
