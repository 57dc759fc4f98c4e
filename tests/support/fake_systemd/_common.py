"""Shared by the systemctl/journalctl stand-ins: where state lives, the journal, unit parsing.

State lives under ``$FAKE_SYSTEMD_ROOT``::

    calls.log             one JSON argv per systemctl call (tests read it)
    units/                the unit dir kimitui writes to (``unit_dir`` of SystemdLauncher)
    loaded/<unit>.json    what ``daemon-reload`` parsed: a unit edited without reload is not used
    run/<unit>.json       the running instance: pump pid, main pid, state, exit status
    journal.jsonl         {"o": offset, "u": unit, "t": time, "m": message}; cursor = "s=fake;o=<offset>"

Unit files are parsed with systemd's own rules (systemd.syntax(7), systemd.service(5)):
line continuations, quoting with C escapes, ``%`` specifiers, ``$VAR`` / ``${VAR}``
expansion and ``$$`` in ExecStart=, specifiers only in Environment=.  So a value that
rendering failed to escape behaves here exactly as it would under systemd.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import socket
import time
import sys
from pathlib import Path

# These stand-ins run as scripts: the unit reader beside them (tests/support) is imported by path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from systemd_unit import split_words as _systemd_split_words  # noqa: E402

ROOT = Path(os.environ.get("FAKE_SYSTEMD_ROOT", "/nonexistent-fake-systemd"))


def unit_file_name(unit: str) -> str:
    return unit if "." in unit else f"{unit}.service"


class UnitError(Exception):
    pass


# --------------------------------------------------------------------------- journal


def journal_append(unit: str, message: str) -> None:
    path = ROOT / "journal.jsonl"
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0, os.SEEK_END)
        off = f.tell()
        f.write((json.dumps({"o": off, "u": unit, "t": time.time(), "m": message}) + "\n").encode())
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def cursor_of(entry: dict) -> str:
    return f"s=fake;o={entry['o']}"


def offset_of(cursor: str) -> int:
    for part in cursor.split(";"):
        if part.startswith("o="):
            return int(part[2:])
    raise ValueError(f"Failed to seek to cursor: {cursor}")


# --------------------------------------------------------------------------- unit parsing


def _specifiers(text: str, unit: str) -> str:
    name = unit_file_name(unit)
    prefix = name.rsplit(".", 1)[0]
    user = pwd.getpwuid(os.getuid())
    table = {
        "%": "%", "n": name, "N": prefix, "p": prefix.split("@")[0], "i": "", "I": "",
        "u": user.pw_name, "U": str(os.getuid()), "h": user.pw_dir, "s": user.pw_shell,
        "t": f"/run/user/{os.getuid()}", "H": socket.gethostname(), "j": prefix, "J": prefix,
    }
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "%":
            if i + 1 >= len(text) or text[i + 1] not in table:
                raise UnitError(f"Failed to resolve unit specifiers in {text!r}")
            out.append(table[text[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def split_words(text: str) -> list[str]:
    """extract_first_word() with EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE: quotes and C escapes.

    The same reading the tests apply to rendered units (``tests/support/systemd_unit.py``).
    """
    try:
        return _systemd_split_words(text)
    except ValueError as exc:
        raise UnitError(str(exc)) from None


def _expand_env(word: str, env: dict[str, str]) -> list[str]:
    """ExecStart= variable expansion: ``$$`` -> ``$``; ``${A}`` in place; a lone ``$A`` word splits."""
    if word.startswith("$") and not word.startswith("$$") and not word.startswith("${"):
        name = word[1:]
        if name.isidentifier():
            return env.get(name, "").split()
    out, i = [], 0
    while i < len(word):
        if word.startswith("$$", i):
            out.append("$")
            i += 2
        elif word.startswith("${", i) and "}" in word[i:]:
            end = word.index("}", i)
            out.append(env.get(word[i + 2 : end], ""))
            i = end + 1
        else:
            out.append(word[i])
            i += 1
    return ["".join(out)]


def parse_unit(text: str, unit: str) -> dict:
    """The directives systemd would load, with continuations joined and comments skipped."""
    logical: list[str] = []
    buf = ""
    for line in text.split("\n"):
        if not buf and line.lstrip().startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)
    section = None
    directives: dict[str, list[str]] = {}
    for line in logical:
        s = line.strip()
        if not s:
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            continue
        if "=" not in s:
            raise UnitError(f"Missing '=', ignoring line: {s!r}")
        key, value = s.split("=", 1)
        directives.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    env: dict[str, str] = {}
    for value in directives.get("Service.Environment", []):
        for assignment in split_words(_specifiers(value, unit)):
            k, _, v = assignment.partition("=")
            env[k] = v

    def command(value: str) -> list[str]:
        words = split_words(_specifiers(value, unit))
        if words and words[0][:1] in "@-:+!|":
            words[0] = words[0].lstrip("@-:+!|")
        argv: list[str] = []
        for w in words:
            argv += _expand_env(w, env)
        return argv

    return {
        "unit": unit_file_name(unit),
        "env": env,
        "exec_start": [command(v) for v in directives.get("Service.ExecStart", [])],
        "exec_start_pre": [command(v) for v in directives.get("Service.ExecStartPre", [])],
        "exec_start_post": [command(v) for v in directives.get("Service.ExecStartPost", [])],
        "working_directory": _specifiers(directives.get("Service.WorkingDirectory", [""])[-1], unit) or None,
        "timeout_stop_s": float(directives.get("Service.TimeoutStopSec", ["90"])[-1].rstrip("s") or 90),
        "directives": sorted(directives),
    }


# --------------------------------------------------------------------------- processes


def pid_alive(pid: int | None) -> bool:
    """Alive and not a zombie (nobody reaps here: pid 1 of a sandbox may not)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run_state(unit: str) -> dict:
    path = ROOT / "run" / f"{unit_file_name(unit)}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
