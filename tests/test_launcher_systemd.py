"""SystemdLauncher against faithful systemctl/journalctl stand-ins (systemd cannot run here).

The stand-ins parse units with systemd's rules, honour daemon-reload, run
ExecStart as a real process and serve its output from a journal with cursors
(tests/support/fake_systemd).  The unit runs the simulator, so readiness,
/health and the warm-up request are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kimitui.launcher.base import LaunchError
from kimitui.launcher.swap import SwapOptions, swap
from kimitui.launcher.systemd import SystemdLauncher, check_unit_text
from kimitui.profiles import load_profile, render_unit
from tests.support.waiting import wait_for

if TYPE_CHECKING:
    from tests.support.launcher_env import SimEnv

pytest_plugins = ["tests.support.launcher_env"]

pytestmark = pytest.mark.timeout(240)  # generous: a loaded 2-core CI box is slow to start servers

OPERATORS_UNIT = """# typed by hand, as in the field notes
[Service]
ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /root/models/Kimi-K2.6 --tp 8
"""


def _calls(root: Path) -> list[list[str]]:
    return [json.loads(line) for line in (root / "calls.log").read_text().splitlines()]


def _systemd_profile(env: SimEnv, name: str, extends: str, unit: str, **sim) -> Path:
    return env.profile(name, extends, body=f'[launcher]\nkind = "systemd"\nunit = "{unit}"\n', **sim)


async def _systemd_story(host, env: SimEnv, root: Path) -> None:
    unit = f"sglang-{host.name}"
    units = root / "units"
    (units / f"{unit}.service").write_text(OPERATORS_UNIT)
    launcher = SystemdLauncher(host, unit_dir=str(units), state_dir=str(env.state), simulated=True, unit=unit)
    good = _systemd_profile(env, "good", "ep8-tuned", unit)
    bad = _systemd_profile(env, "bad", "ep8-eplb", unit, fault="oom_start")

    first = await swap(host, str(good), SwapOptions(timeout=60), session=env.session, launcher=launcher)
    assert first.ok, first.reason
    unit_file = units / f"{unit}.service"
    assert unit_file.read_text() == render_unit(load_profile(str(good)), simulated=True)
    assert (units / f"{unit}.service.bak").read_text() == OPERATORS_UNIT  # the hand-typed unit is kept
    mine = [c for c in _calls(root) if unit in " ".join(c) or c[1:] == ["daemon-reload"]]
    verbs = [c[1] for c in mine if c[1] in ("daemon-reload", "start", "stop")]
    assert verbs.index("daemon-reload") < verbs.index("start")
    assert first.record.journal_cursor is None or first.record.journal_cursor.startswith("s=fake")
    good_unit = unit_file.read_text()

    out = await swap(host, str(bad), SwapOptions(timeout=60), session=env.session, launcher=launcher)
    assert out.outcome == "rolled_back" and out.serving == "good", out.reason
    assert "out of memory" in out.reason
    assert unit_file.read_text() == good_unit  # restored from the backup
    # only this start's lines: the failed start's journal excerpt holds one start-up, not the first one's
    assert sum("server_args=" in line for line in out.log_excerpt) <= 1
    assert any("OutOfMemoryError" in line for line in out.log_excerpt)
    current = await launcher.current()
    assert current is not None and current.profile == "good"
    tail = await launcher.read_log_tail(current, 1000)
    assert sum("server_args=" in line for line in tail) == 1  # the rollback's start only
    assert await launcher.alive(current)
    # start good; stop good, start bad; (it fails) stop bad, start good from the restored unit
    verbs = [c[1] for c in _calls(root) if f"{unit}.service" in c and c[1] in ("start", "stop")]
    assert verbs == ["start", "stop", "start", "stop", "start"]


async def test_systemd_swap_writes_the_unit_keeps_a_backup_and_restores_it_on_failure(sim_env, fake_systemd) -> None:
    from kimitui.host.local import LocalHost

    async with LocalHost("sim") as host:
        await _systemd_story(host, sim_env, fake_systemd)


async def test_unit_values_are_escaped_so_nothing_runs_and_no_directive_is_injected(
    tmp_path: Path, fake_systemd: Path, sim_host
) -> None:
    """Locally and through the in-process SSH server (``sim_host`` is parametrized over both)."""
    marker = tmp_path / "pwned"
    dump = Path(__file__).parent / "support" / "argv_dump.py"
    prof = tmp_path / "evil.toml"
    prof.write_text(
        'name = "evil"\n'
        f'model_path = "/m; touch {marker}"\n'
        f'served_model_name = "$(touch {marker})"\n'
        'extra_args = ["%n", "%%", "$HOME", "${HOME}", "a\\\\b", "q\\"uote", "it\'s"]\n'
        f'env = {{ KT_A = "%n $HOME; touch {marker}" }}\n'
        f'[launcher]\nkind = "systemd"\nunit = "evil"\npython = "{dump}"\n'
    )
    profile = load_profile(str(prof))
    launcher = SystemdLauncher(sim_host, unit_dir=str(fake_systemd / "units"), state_dir=str(tmp_path / "st"))
    rec = await launcher.start(profile)
    lines: list[str] = []

    async def dumped() -> bool:  # the argv dumper's one JSON line is in the unit's log
        lines[:] = await launcher.read_log_tail(rec, 50)
        return any(line.startswith("{") for line in lines)

    await wait_for(dumped, 10, "the argv dump in the log", interval=0.02, detail=lambda: lines)
    await launcher.stop(rec)
    seen = json.loads(next(line for line in lines if line.startswith("{")))
    from kimitui.profiles import render_argv

    assert seen["argv"] == render_argv(profile)[1:]
    assert ["%n", "%%", "$HOME", "${HOME}", "a\\b", 'q"uote', "it's"] == seen["argv"][-7:]
    assert seen["env"] == {"KT_A": f"%n $HOME; touch {marker}"}
    assert not marker.exists()
    loaded = json.loads((fake_systemd / "loaded" / "evil.service.json").read_text())
    assert "Service.ExecStartPre" not in loaded["directives"] and len(loaded["exec_start"]) == 1


def test_a_unit_with_an_injected_line_is_refused_before_it_is_written() -> None:
    good = "[Service]\nExecStart=\"/usr/bin/python3\" \"-m\" \"sglang.launch_server\"\n"
    check_unit_text(good)
    for bad in (
        good + "ExecStartPre=/bin/touch /tmp/x\n",
        good.replace("launch_server\"", "launch_server\" \\\n"),
        "[Service]\nExecStart=/bin/true\r\nExecStartPost=/bin/sh\n",
        "[Service]\n/bin/sh -c id\n",
    ):
        with pytest.raises(LaunchError):
            check_unit_text(bad)


async def test_a_swap_that_fails_before_writing_its_unit_leaves_the_running_unit_alone(
    sim_env, fake_systemd: Path
) -> None:
    import socket

    from kimitui.host.local import LocalHost

    unit, units = "sglang-port", fake_systemd / "units"
    async with LocalHost("sim") as host:
        launcher = SystemdLauncher(host, unit_dir=str(units), state_dir=str(sim_env.state), simulated=True, unit=unit)
        (units / f"{unit}.service").write_text(OPERATORS_UNIT)
        good = _systemd_profile(sim_env, "good", "ep8-tuned", unit)
        assert (await swap(host, str(good), SwapOptions(timeout=60), session=sim_env.session, launcher=launcher)).ok
        good_unit = (units / f"{unit}.service").read_text()
        other = _systemd_profile(sim_env, "other", "ep8-eplb", unit)
        other_port = other.read_text().replace(f"port = {sim_env.port}", f"port = {sim_env.port + 1}")
        other.write_text(other_port)
        with socket.socket() as stranger:  # the target's port is taken: the swap fails before start()
            stranger.bind(("127.0.0.1", sim_env.port + 1))
            stranger.listen()
            out = await swap(host, str(other), SwapOptions(timeout=60, port_wait_s=0.2), session=sim_env.session, launcher=launcher)
        assert out.outcome == "rolled_back" and "port" in out.reason
        assert (units / f"{unit}.service").read_text() == good_unit  # not the operator's .bak from the first swap
        assert (await launcher.current()).profile == "good"
