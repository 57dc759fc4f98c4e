"""Render: argv, a shell line whose values stay inert, a systemd unit nothing can inject into."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kimitui.profiles import Profile, load_profile, render_argv, render_command, render_unit
from tests.support.profiles import ProfileDirs, profile_env  # noqa: F401
from tests.support.systemd_unit import environment, exec_argv, parse_unit

NASTY = [
    "; touch {d}/semicolon",
    "$(touch {d}/subst)",
    "`touch {d}/backtick`",
    "a'b\"c\\d",
    "&& touch {d}/and",
    "| tee {d}/pipe",
    "$HOME ${{HOME}} $$",
    "50% %n %% %i",
    "* ? [a] ~",
    "--flag=' spaced '",
    "",
]


def nasty_profile(d: Path) -> Profile:
    return Profile(
        name="nasty",
        model_path=f"/models/my model $(touch {d}/model)",
        served_model_name="kimi; touch x",
        tp_size=8,
        ep_size=8,
        enable_eplb=True,
        chunked_prefill_size=-1,
        extra_args=[a.format(d=d) for a in NASTY],
        env={"NCCL_P2P_DISABLE": "1", "EVIL": f"$(touch {d}/env) ; touch {d}/env2 %n \"q\" \\"},
    )


def test_argv_shape(profile_env: ProfileDirs) -> None:
    argv = render_argv(load_profile("ep8-v2"))
    assert argv[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6"]
    flags = argv[3:]
    assert flags == [
        "--model-path", "/root/models/Kimi-K2.6", "--host", "127.0.0.1", "--port", "30001",
        "--tp-size", "8", "--ep-size", "8", "--enable-eplb", "--expert-balancedness-report-mode", "both",
        "--num-continuous-decode-steps", "16",
        "--max-running-requests", "256", "--mem-fraction-static", "0.88", "--context-length", "32768",
        "--enable-metrics", "--tokenizer-metrics-allowed-custom-labels", "kimitui_sweep", "kimitui_level",
        "--trust-remote-code",
    ]  # fmt: skip


def test_argv_booleans_none_negative_and_extra_args() -> None:
    p = Profile(name="p", model_path="/m", chunked_prefill_size=-1, disable_cuda_graph=True, extra_args=["--x", "1"])
    argv = render_argv(p)
    assert "--disable-cuda-graph" in argv and "--enable-eplb" not in argv and "--tp-size" not in argv
    assert "--chunked-prefill-size=-1" in argv  # a negative value cannot be taken for a flag
    assert argv[-2:] == ["--x", "1"]


def test_launcher_venv_and_python_override() -> None:
    p = Profile(name="p", model_path="/m", launcher={"venv": "/opt/sglang/.venv", "python": "python3"})
    assert render_argv(p)[0] == "/opt/sglang/.venv/bin/python3"
    assert render_argv(p, python="/usr/bin/python3.11")[0] == "/usr/bin/python3.11"


def test_simulated_argv_runs_the_simulator(profile_env: ProfileDirs) -> None:
    p = load_profile("ep8-tuned")
    argv = render_argv(p, simulated=True, sim_args=["--time-scale", "50"])
    assert argv == [
        sys.executable, "-m", "kimitui", "sim", "serve", "--profile", str(p.source_path),
        "--host", "127.0.0.1", "--port", "30001", "--time-scale", "50",
    ]  # fmt: skip
    assert render_argv(Profile(name="mem", model_path="/m"), simulated=True)[6] == "mem"


def test_command_round_trips_through_shlex(tmp_path: Path) -> None:
    p = nasty_profile(tmp_path)
    line = render_command(p)
    words = shlex.split(line)
    assert words[0] == "env"
    assert words[1:3] == ["NCCL_P2P_DISABLE=1", f"EVIL={p.env['EVIL']}"]
    assert words[3:] == render_argv(p)
    for value in p.extra_args:
        assert words.count(value) == 1  # each hostile value is exactly one intact argv element


def test_command_executes_nothing_in_bash(tmp_path: Path) -> None:
    """Run the rendered line in bash with an argv printer as 'python': every value arrives verbatim."""
    printer = tmp_path / "print argv.sh"
    printer.write_text('#!/bin/sh\nprintf "%s\\0" "$EVIL" "$@"\n')
    printer.chmod(0o755)
    p = nasty_profile(tmp_path)
    p = p.model_copy(update={"launcher": p.launcher.model_copy(update={"workdir": str(tmp_path / "work dir $(touch x)")})})
    (tmp_path / "work dir $(touch x)").mkdir()
    line = render_command(p, python=str(printer))
    out = subprocess.run(["bash", "-c", line], capture_output=True, check=True, cwd=tmp_path, env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"})
    got = out.stdout.decode().split("\0")[:-1]
    assert got[0] == p.env["EVIL"]
    assert got[1:] == render_argv(p, python=str(printer))[1:]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["print argv.sh", "work dir $(touch x)"]  # nothing was touched


def test_pretty_command_is_the_same_command_in_bash(tmp_path: Path) -> None:
    printer = tmp_path / "argv.sh"
    printer.write_text('#!/bin/sh\nprintf "%s\\0" "$@"\n')
    printer.chmod(0o755)
    p = nasty_profile(tmp_path)
    pretty = render_command(p, python=str(printer), pretty=True)
    assert pretty.count("\n") > 5
    out = subprocess.run(["bash", "-c", pretty], capture_output=True, check=True, cwd=tmp_path)
    assert out.stdout.decode().split("\0")[:-1] == render_argv(p, python=str(printer))[1:]


def test_unit_exec_start_and_environment_parse_back_exactly(tmp_path: Path) -> None:
    p = nasty_profile(tmp_path)
    unit = render_unit(p)
    entries = parse_unit(unit)
    execs = [v for s, k, v in entries if (s, k) == ("Service", "ExecStart")]
    assert len(execs) == 1
    assert exec_argv(execs[0]) == render_argv(p)
    env: dict[str, str] = {}
    for s, k, v in entries:
        if (s, k) == ("Service", "Environment"):
            env.update(environment(v))
    assert env == p.env
    service = {k: v for s, k, v in entries if s == "Service"}
    assert service["Restart"] == "no" and service["KillMode"] == "control-group"
    assert service["TimeoutStopSec"] == "60" and service["Type"] == "exec"


def test_unit_cannot_be_injected_even_without_validation(tmp_path: Path) -> None:
    """The model rejects newlines; the escaper still encodes them (defence in depth)."""
    with pytest.raises(ValidationError):
        Profile(name="p", model_path="/m", extra_args=["x\nExecStartPre=/bin/touch /tmp/pwned"])
    good = Profile(name="p", model_path="/m", description="ok")
    hostile = good.model_copy(
        update={
            "extra_args": ["x\nExecStartPre=/bin/touch /tmp/pwned", "tail\\"],
            "description": "d %n\n[Service]\nExecStartPre=/bin/true \\",
            "env": {"A": "1\nExecStopPost=/bin/sh"},
        }
    )
    unit = render_unit(hostile)
    keys = [(s, k) for s, k, _ in parse_unit(unit)]
    assert ("Service", "ExecStartPre") not in keys and ("Service", "ExecStopPost") not in keys
    assert keys.count(("Service", "ExecStart")) == 1 and keys.count(("Unit", "Description")) == 1
    execs = [v for s, k, v in parse_unit(unit) if k == "ExecStart"]
    assert exec_argv(execs[0])[-2:] == ["x\nExecStartPre=/bin/touch /tmp/pwned", "tail\\"]
    description = next(v for s, k, v in parse_unit(unit) if k == "Description")
    assert "%n" not in description.replace("%%", "")


def test_unit_settings(tmp_path: Path) -> None:
    p = Profile(name="p", model_path="/m", launcher={"unit": "sglang-k2.service", "user": "svc", "workdir": "/srv/50%", "stop_timeout_s": 90})
    unit = render_unit(p)
    service = {k: v for s, k, v in parse_unit(unit) if s == "Service"}
    assert service["User"] == "svc" and service["WorkingDirectory"] == "/srv/50%%"
    assert service["TimeoutStopSec"] == "90" and service["SyslogIdentifier"] == "sglang-k2"
    assert p.launcher.unit_file_name == "sglang-k2.service"


def test_simulated_unit(profile_env: ProfileDirs) -> None:
    p = load_profile("ep8-tuned")
    execs = [v for s, k, v in parse_unit(render_unit(p, simulated=True)) if k == "ExecStart"]
    assert exec_argv(execs[0])[1:5] == ["-m", "kimitui", "sim", "serve"]
