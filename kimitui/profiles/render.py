"""Render a profile as the command that runs it: argv, a shell line, a systemd unit.

Every value is quoted for its destination: ``shlex.quote`` for a shell, systemd's
own quoting for a unit (C-style escapes inside double quotes, ``%`` -> ``%%`` for
specifiers, ``$`` -> ``$$`` for variable expansion). Control characters are
already rejected by the model; the escapers still encode them, so a profile
built without validation cannot inject a line either.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence

from kimitui.profiles.schema import DEPLOY_FIELDS, Profile
from kimitui.sglang.knob_names import knob_flag

SGLANG_MODULE = "sglang.launch_server"


def _flag(knob: str) -> str:
    """The knob's SGLang flag (``cuda_graph_max_bs`` -> ``--cuda-graph-max-bs-decode``: see knob_names)."""
    return knob_flag(knob)


def _value(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def knob_args(profile: Profile) -> list[str]:
    """The SGLang flags for the profile's knobs: booleans bare, lists space-separated, ``None`` omitted, extra_args last."""
    argv: list[str] = []
    for knob, value in profile.knobs().items():
        if knob in ("extra_args", "env") or knob in DEPLOY_FIELDS or value is None or value is False:
            continue
        if value is True:
            argv.append(_flag(knob))
            continue
        if isinstance(value, list):  # List[str] args are nargs="+" in SGLang: "--flag a b"
            if value:
                argv += [_flag(knob), *(_value(v) for v in value)]
            continue
        text = _value(value)
        # "--chunked-prefill-size=-1": a value that starts with '-' must not look like a flag.
        argv += [f"{_flag(knob)}={text}"] if text.startswith("-") else [_flag(knob), text]
    return [*argv, *profile.extra_args]


def render_argv(
    profile: Profile,
    *,
    simulated: bool = False,
    python: str | None = None,
    sim_args: Sequence[str] = (),
) -> list[str]:
    """The argv that starts the server.

    Real host: ``[python, "-m", "sglang.launch_server", "--model-path", ...]``.
    Simulated host: ``[python, "-m", "kimitui", "sim", "serve", "--profile", <file or name>,
    "--host", H, "--port", P, *sim_args]`` (the simulator reads the rest from the profile).
    """
    if simulated:
        ref = str(profile.source_path) if profile.source_path else profile.name
        return [
            python or sys.executable,
            "-m",
            "kimitui",
            "sim",
            "serve",
            "--profile",
            ref,
            "--host",
            profile.host,
            "--port",
            str(profile.port),
            *sim_args,
        ]
    return [python or profile.launcher.python_path(), "-m", SGLANG_MODULE, *knob_args(profile)]


def render_command(profile: Profile, *, simulated: bool = False, python: str | None = None, pretty: bool = False) -> str:
    """One POSIX shell line: ``[cd DIR && ][env K=V ...] python -m sglang.launch_server ...``.

    ``pretty`` breaks the line before each flag with `` \\`` continuations (for reading; bash
    accepts it, ``shlex.split`` does not).
    """
    return shell_line(render_argv(profile, simulated=simulated, python=python), profile.env,
                      profile.launcher.workdir, pretty=pretty)


def shell_line(argv: Sequence[str], env: Mapping[str, str], workdir: str | None, *, pretty: bool = False) -> str:
    """``[cd DIR && ][env K=V ...] ARGV`` quoted for a POSIX shell; ``pretty``: one ``--flag value`` per line."""
    words = [shlex.quote(a) for a in argv]
    if pretty:
        joined = words[0]
        for word, raw in zip(words[1:], argv[1:], strict=True):
            joined += (" \\\n    " if raw.startswith("--") else " ") + word
    else:
        joined = " ".join(words)
    if env:
        joined = "env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + " " + joined
    if workdir:
        joined = f"cd {shlex.quote(workdir)} && {joined}"
    return joined


# --------------------------------------------------------------------------- systemd


def _c_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def systemd_exec_quote(word: str) -> str:
    """One ExecStart= word: double-quoted, C-escaped, ``%`` and ``$`` doubled."""
    return '"' + _c_escape(word).replace("%", "%%").replace("$", "$$") + '"'


def systemd_env_assignment(name: str, value: str) -> str:
    """One Environment= assignment (no ``$`` expansion there; specifiers are expanded)."""
    return '"' + _c_escape(f"{name}={value}").replace("%", "%%") + '"'


def _plain_setting(text: str) -> str:
    """A free-text setting (Description=): specifiers escaped, no control characters, no continuation."""
    cleaned = "".join(" " if ord(ch) < 0x20 or ord(ch) == 0x7F else ch for ch in text)
    return cleaned.replace("%", "%%").rstrip(" \\")


_EXEC_PREFIXES = "@-:+!|"


def render_unit(profile: Profile, *, simulated: bool = False, python: str | None = None) -> str:
    """A systemd service unit running the profile.

    Restart=no: kimitui decides about restarts and rollback itself.
    KillMode=control-group: every scheduler/detokenizer child goes with the server.
    """
    argv = render_argv(profile, simulated=simulated, python=python)
    if argv[0][:1] in _EXEC_PREFIXES:
        raise ValueError(f"launcher.python {argv[0]!r} starts with a systemd ExecStart prefix character")
    launcher = profile.launcher
    description = f"kimitui profile {profile.name}" + (f": {profile.description}" if profile.description else "")
    lines = [
        f"# Generated by kimitui from profile {_plain_setting(profile.name)}; edits are overwritten on the next swap.",
        "[Unit]",
        f"Description={_plain_setting(description)}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=exec",
    ]
    if launcher.user:
        lines.append(f"User={_plain_setting(launcher.user)}")
    if launcher.workdir:
        lines.append(f"WorkingDirectory={_plain_setting(launcher.workdir)}")
    lines += [f"Environment={systemd_env_assignment(k, v)}" for k, v in profile.env.items()]
    lines += [
        "ExecStart=" + " ".join(systemd_exec_quote(a) for a in argv),
        "Restart=no",
        "KillMode=control-group",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={launcher.stop_timeout_s}",
        "StandardOutput=journal",
        "StandardError=journal",
        f"SyslogIdentifier={launcher.unit}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)
