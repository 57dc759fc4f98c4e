"""A swap asks the host's own SGLang first: a command it refuses stops nothing (on the simulated host).

Real pieces only: the simulator started by the ProcessLauncher, the preflight script run by the
host's Python (here the simulator's, playing SGLang 0.5.23 from its dumped options), ``kimitui swap``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kimitui.host.local import LocalHost
from kimitui.launcher.swap import SwapOptions, swap

if TYPE_CHECKING:
    from tests.support.launcher_env import SimEnv

pytest_plugins = ["tests.support.launcher_env"]

pytestmark = pytest.mark.timeout(240)  # a loaded 2-core box is slow to start servers

UNKNOWN = 'extra_args = ["--no-such-flag"]'
BAD_CHOICE = 'extra_args = ["--schedule-policy", "newest-first"]'


async def test_a_flag_the_hosts_sglang_refuses_stops_nothing(sim_env: SimEnv) -> None:
    host = LocalHost("sim")
    launcher = sim_env.launcher(host)
    first = await swap(host, str(sim_env.profile("good", "ep8-tuned")), SwapOptions(timeout=60),
                       session=sim_env.session, launcher=launcher)
    assert first.ok, first.reason
    assert first.sglang_version == "0.5.23 (simulated)"
    before = await launcher.current()
    assert before is not None

    for name, body, said in (
        ("unknown", UNKNOWN, "sglang serve: error: unrecognized arguments: --no-such-flag"),
        ("choice", BAD_CHOICE, "argument --schedule-policy: invalid choice: 'newest-first'"),
    ):
        out = await swap(host, str(sim_env.profile(name, "ep8-tuned", body=body)), SwapOptions(timeout=60),
                         session=sim_env.session, launcher=launcher)
        assert out.outcome == "failed" and out.serving == "good", out.reason
        assert f"refused by preflight: SGLang 0.5.23 (simulated) on the host refuses {name} server: " in out.reason
        assert said in out.reason
        now = await launcher.current()
        assert now is not None and (now.profile, now.pid) == ("good", before.pid)  # the old server never stopped
        assert await launcher.alive(now)
    states = [(e.profile, e.state) for e in sim_env.kinds("profile_state")]
    assert ("good", "stopping") not in states


async def test_a_host_python_without_sglang_warns_and_the_swap_goes_on(sim_env: SimEnv,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIMITUI_SIM_SGLANG", "none")  # the simulated host plays a Python with no SGLang
    host = LocalHost("sim")
    out = await swap(host, str(sim_env.profile("good", "ep8-tuned")), SwapOptions(timeout=60),
                     session=sim_env.session, launcher=sim_env.launcher(host))
    assert out.ok, out.reason
    assert out.sglang_version is None
    (warning,) = [w for w in out.warnings if "could not check" in w]
    assert warning.startswith("the host's SGLang could not check good's command (no SGLang in ")
    assert warning.endswith("going on unchecked")


async def test_the_simulator_itself_refuses_what_0_5_23_refuses(sim_env: SimEnv) -> None:
    """Skipping the preflight, the target starts and its parser refuses at once: the swap rolls back."""
    host = LocalHost("sim")
    launcher = sim_env.launcher(host)
    first = await swap(host, str(sim_env.profile("good", "ep8-tuned")), SwapOptions(timeout=60),
                       session=sim_env.session, launcher=launcher)
    assert first.ok, first.reason
    out = await swap(host, str(sim_env.profile("unknown", "ep8-tuned", body=UNKNOWN)),
                     SwapOptions(timeout=60, host_check=False), session=sim_env.session, launcher=launcher)
    assert out.outcome == "rolled_back" and out.serving == "good", out.reason
    assert any("unrecognized arguments: --no-such-flag" in line for line in out.log_excerpt), out.log_excerpt


def test_kimitui_swap_refuses_with_one_clear_line(sim_env: SimEnv, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import tempfile

    from kimitui.cli import main

    for key, value in {"TMPDIR": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                       "XDG_STATE_HOME": str(tmp_path / "xstate"), "COLUMNS": "400"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(tempfile, "tempdir", None)
    try:
        assert main(["swap", str(sim_env.profile("good", "ep8-tuned")), "--yes", "--timeout", "60"]) == 0
        capsys.readouterr()
        pid = json.loads(_status(capsys))["pid"]
        code = main(["swap", str(sim_env.profile("unknown", "ep8-tuned", body=UNKNOWN)), "--yes", "--timeout", "60"])
        out = capsys.readouterr().out
        assert code == 1
        (line,) = [ln for ln in out.splitlines() if "swap to unknown failed" in ln]
        assert "unrecognized arguments: --no-such-flag" in line and "unknown server" in line
        assert "SGLang on sim: 0.5.23 (simulated)" in out
        status = json.loads(_status(capsys))
        assert (status["profile"], status["pid"]) == ("good", pid)
    finally:
        main(["stop", "--yes"])


def _status(capsys: pytest.CaptureFixture[str]) -> str:
    from kimitui.cli import main

    main(["status", "--json"])
    return capsys.readouterr().out


def test_profiles_lint_asks_the_hosts_own_sglang(sim_env: SimEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The lint knows 0.5.23; ``--host`` adds what the host's own parser (its version) says, in one call."""
    from kimitui.cli import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "400")
    good, bad = sim_env.profile("good", "ep8-tuned"), sim_env.profile("unknown", "ep8-tuned", body=UNKNOWN)
    assert main(["profiles", "lint", str(good), str(bad), "--host", "sim"]) == 1
    out = capsys.readouterr()
    assert "ok good (SGLang 0.5.23 (simulated) on sim)" in out.out
    (refusal,) = [ln for ln in out.err.splitlines() if "refuses unknown server" in ln]
    assert refusal.endswith("sglang serve: error: unrecognized arguments: --no-such-flag")

    monkeypatch.setenv("KIMITUI_SIM_SGLANG", "none")
    assert main(["profiles", "lint", str(bad), "--host", "sim"]) == 0  # 0.5.23's lint only warns; nobody refused
    assert "could not check unknown's command (no SGLang in " in capsys.readouterr().out


async def test_the_preflight_reaches_the_host_over_ssh_too(sim_host, tmp_path: Path) -> None:
    """The script travels as ``python -c`` with its request on stdin, locally and through the SSH server."""
    from kimitui.launcher.preflight_host import ask_host_sglang
    from kimitui.profiles import load_profile
    from tests.support.launcher_env import write_profile

    bad = load_profile(str(write_profile(tmp_path, "unknown", "ep8-tuned", port=1, body=UNKNOWN)))
    answer = await ask_host_sglang(sim_host, bad, simulated=True)
    assert answer.version == "0.5.23 (simulated)", answer.problem
    assert answer.refusals("unknown") == ["SGLang 0.5.23 (simulated) on the host refuses unknown server: "
                                          "sglang serve: error: unrecognized arguments: --no-such-flag"]


async def test_every_process_of_a_pd_deployment_is_asked_in_one_call(tmp_path: Path) -> None:
    from kimitui.launcher.preflight_host import ask_host_sglang, plan_for
    from kimitui.profiles import load_profile

    pd = load_profile("pd-1p1d")
    assert [p.role for p in plan_for(LocalHost("sim"), pd, simulated=True).processes] == [
        "prefill-0", "decode-0", "router"]
    ok = await ask_host_sglang(LocalHost("sim"), pd, simulated=True)
    assert [(c.role, c.verdict) for c in ok.checks] == [("prefill-0", "ok"), ("decode-0", "ok"), ("router", "ok")]

    odd = tmp_path / "pd-odd.toml"
    odd.write_text('name = "pd-odd"\nextends = "pd-1p1d"\n[pd]\nrouter_args = ["--policy", "fastest"]\n'
                   '[pd.prefill]\nbase_gpu_id = 0\nport = 30010\n'
                   '[pd.decode]\nbase_gpu_id = 4\nport = 30020\nextra_args = ["--no-such-flag"]\n')
    refused = await ask_host_sglang(LocalHost("sim"), load_profile(str(odd)), simulated=True)
    assert [(c.role, c.verdict) for c in refused.checks] == [
        ("prefill-0", "ok"), ("decode-0", "refused"), ("router", "refused")]
    assert refused.refusals("pd-odd")[0].endswith("pd-odd decode-0: sglang serve: error: unrecognized arguments: "
                                                  "--no-such-flag")
    assert "pd-odd router: launch_router.py: error: argument --policy: invalid choice: 'fastest'" in \
        refused.refusals("pd-odd")[1]
