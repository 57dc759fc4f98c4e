"""Ask a host's own SGLang whether it accepts a command line, before a swap stops anything.

Why: a flag the host's SGLang does not know (one that upstream deleted, a typo, a choice it never
had) is only found when the new server starts, after the known-good one was stopped.  SGLang's own
parser answers that in a second, without a model or a GPU.  This module holds the script the host's
Python runs (:data:`SCRIPT`, sent with ``python -c``), the request it reads on stdin
(:func:`request`) and the typed reading of its answer (:func:`read_answer`); the I/O is
``kimitui/launcher/preflight_host.py``.

What the script runs, per process: SGLang's ``ServerArgs.add_cli_args`` -> ``parse_args`` ->
``ServerArgs.from_cli_args`` (in 0.5.23 that is all of ``prepare_server_args`` that runs without a
model: resolution waits for the launcher's ``resolve_once``); for the PD router,
``sglang_router.launch_router.parse_router_args``.  An older ``ServerArgs`` whose ``__post_init__``
resolves (reads the model's config, probes the GPU) has that step skipped: parse only, never the
model, never the GPU.  On a simulated host the simulator's parser plays SGLang's and the router's
(:mod:`kimitui.sglang.flag_check` over 0.5.23's dumped options) and answers ``0.5.23 (simulated)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

ProcessKind = Literal["server", "router"]
Verdict = Literal["ok", "refused", "unchecked"]

MARKER = "KIMITUI-PREFLIGHT "
"""The answer's line starts with it (SGLang's imports may print their own lines before it)."""

SIM_SGLANG_ENV = "KIMITUI_SIM_SGLANG"
"""On a simulated host: the SGLang version it plays (default 0.5.23); ``none``: a Python without SGLang."""

HOST_SGLANG = "the host's SGLang"
"""Every warning of the check names it, so a reader can tell them from the lint's."""

SERVER_MODULE = "sglang.launch_server"
ROUTER_MODULE = "sglang_router.launch_router"


@dataclass(frozen=True)
class ProcessArgs:
    """One process of a deployment as the preflight sends it: its role, which parser, its arguments."""

    role: str
    kind: ProcessKind
    args: tuple[str, ...]


def process_args(role: str, argv: Sequence[str]) -> ProcessArgs | None:
    """``[python, "-m", module, *args]`` as the parser's input; None when it runs neither SGLang module."""
    if len(argv) < 3 or argv[1] != "-m":
        return None
    kinds: dict[str, ProcessKind] = {SERVER_MODULE: "server", ROUTER_MODULE: "router"}
    kind = kinds.get(argv[2])
    return ProcessArgs(role, kind, tuple(argv[3:])) if kind is not None else None


def request(processes: Sequence[ProcessArgs], *, simulated: bool = False) -> str:
    """The script's stdin: every process at once (one remote call for a whole deployment)."""
    return json.dumps({"simulated": simulated,
                       "processes": [{"role": p.role, "kind": p.kind, "args": list(p.args)} for p in processes]})


@dataclass(frozen=True)
class ProcessCheck:
    """What the host's parser said of one process."""

    role: str
    verdict: Verdict
    message: str = ""
    """SGLang's own message when refused; why it was not checked when unchecked."""


@dataclass(frozen=True)
class HostAnswer:
    """The host's SGLang on a set of processes: its version, a verdict per process, or why it could not say."""

    version: str | None = None
    checks: tuple[ProcessCheck, ...] = ()
    problem: str = ""
    """Why the check could not run at all (no SGLang, no Python, a timeout); then ``checks`` is empty."""

    @property
    def refused(self) -> list[ProcessCheck]:
        return [c for c in self.checks if c.verdict == "refused"]

    @property
    def unchecked(self) -> list[ProcessCheck]:
        return [c for c in self.checks if c.verdict == "unchecked"]

    def refusals(self, profile: str) -> list[str]:
        """One line per refused process: the profile, the process, SGLang's message."""
        who = f"SGLang {self.version}" if self.version else "SGLang"
        return [f"{who} on the host refuses {profile} {c.role}: {c.message}" for c in self.refused]

    def warnings(self, profile: str) -> list[str]:
        """What an operator should know although nothing was refused: the check did not (fully) run."""
        if self.problem:
            return [f"{HOST_SGLANG} could not check {profile}'s command ({self.problem}); going on unchecked"]
        return [f"{profile} {c.role} not checked by {HOST_SGLANG}: {c.message}" for c in self.unchecked]

    def summary(self, profile: str) -> str:
        """One line for the swap's progress: what checked what."""
        if self.problem:
            return f"{profile} not checked by {HOST_SGLANG}: {self.problem}"
        ok = [c.role for c in self.checks if c.verdict == "ok"]
        who = f"SGLang {self.version}" if self.version else HOST_SGLANG
        if self.refused:
            return f"{who} refuses {profile}: " + ", ".join(c.role for c in self.refused)
        return f"{who} accepts {profile}: " + (", ".join(ok) or "no process checked")


def could_not_check(problem: str) -> HostAnswer:
    return HostAnswer(problem=problem)


def read_answer(stdout: str, stderr: str = "", returncode: int = 0) -> HostAnswer:
    """The script's answer, typed; a run that printed none says why in ``problem``."""
    line = next((ln[len(MARKER):] for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        tail = (stderr.strip() or stdout.strip())[-300:]
        return could_not_check(f"the check printed no answer (exit {returncode})" + (f": {tail}" if tail else ""))
    try:
        data = json.loads(line)
    except ValueError:
        return could_not_check(f"the check's answer is not JSON: {line[:200]!r}")
    if not isinstance(data, dict):
        return could_not_check(f"the check's answer is not an object: {line[:200]!r}")
    version = data.get("version")
    if data.get("problem"):
        return HostAnswer(str(version) if version else None, (), str(data["problem"]))
    checks = []
    for entry in data.get("processes") or []:
        verdict = entry.get("verdict")
        if verdict not in ("ok", "refused", "unchecked"):
            verdict = "unchecked"
        checks.append(ProcessCheck(str(entry.get("role", "?")), verdict, str(entry.get("message") or "")))
    return HostAnswer(str(version) if version else None, tuple(checks))


# --------------------------------------------------------------------------- the script

SCRIPT = r'''
import argparse, dataclasses, json, os, sys

MARKER = "KIMITUI-PREFLIGHT "


class Refused(Exception):
    pass


def _refuse(self, message):
    raise Refused("%s: error: %s" % (self.prog, message))


def _exit(self, status=0, message=None):
    raise Refused((message or "").strip() or "the parser exited (%s)" % status)


argparse.ArgumentParser.error = _refuse
argparse.ArgumentParser.exit = _exit


def answer(data):
    sys.stdout.write("\n" + MARKER + json.dumps(data) + "\n")
    sys.stdout.flush()


def installed_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None


def check_server(args):
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    raw = parser.parse_args(args)
    if dataclasses.is_dataclass(ServerArgs) and "__post_init__" in vars(ServerArgs):
        # an older ServerArgs resolves in __post_init__ (model config, GPU probes): parse only here
        post = ServerArgs.__post_init__
        ServerArgs.__post_init__ = lambda self: None
        try:
            ServerArgs.from_cli_args(raw)
        finally:
            ServerArgs.__post_init__ = post
    else:
        ServerArgs.from_cli_args(raw)


def check_router(args):
    from sglang_router.launch_router import parse_router_args
    sys.argv[0] = "launch_router.py"  # its parser's prog, as `python -m sglang_router.launch_router` names it
    parse_router_args(list(args))


def run_real(processes):
    version = installed_version("sglang")
    try:
        import sglang.srt.server_args  # noqa: F401
    except ImportError as exc:
        return {"version": version, "problem": "no SGLang in %s (%s)" % (sys.executable, exc)}
    out = []
    for proc in processes:
        check = check_router if proc["kind"] == "router" else check_server
        try:
            check(proc["args"])
            out.append({"role": proc["role"], "verdict": "ok"})
        except Refused as exc:
            out.append({"role": proc["role"], "verdict": "refused", "message": str(exc)})
        except ImportError as exc:
            out.append({"role": proc["role"], "verdict": "unchecked",
                        "message": "its parser is not installed here (%s)" % exc})
        except Exception as exc:
            out.append({"role": proc["role"], "verdict": "refused", "message": "%s: %s" % (type(exc).__name__, exc)})
    return {"version": version, "processes": out}


def run_simulated(processes):
    from kimitui.sglang.flag_check import DEFAULT_VERSION, ROUTER_PROG, known_flags, known_router_flags, refusal
    played = os.environ.get("KIMITUI_SIM_SGLANG") or DEFAULT_VERSION
    if played == "none":
        return {"version": None, "problem": "no SGLang in %s (simulated host: KIMITUI_SIM_SGLANG=none)" % sys.executable}
    parsers = {"server": (known_flags(played), "sglang serve"), "router": (known_router_flags(played), ROUTER_PROG)}
    out = []
    for proc in processes:
        flags, prog = parsers[proc["kind"]]
        if flags is None:
            out.append({"role": proc["role"], "verdict": "unchecked",
                        "message": "kimitui has no %s parser data for SGLang %s" % (proc["kind"], played)})
            continue
        message = refusal(flags, proc["args"], prog=prog)
        out.append({"role": proc["role"], "verdict": "refused" if message else "ok", "message": message})
    return {"version": played + " (simulated)", "processes": out}


def main():
    request = json.loads(sys.stdin.read())
    run = run_simulated if request.get("simulated") else run_real
    answer(run(request["processes"]))


main()
'''
"""Runs under the host's own Python (any 3.8+, standard library only besides SGLang itself)."""


@dataclass(frozen=True)
class PreflightPlan:
    """What to ask one host: its interpreter and every process, and whether it is simulated."""

    python: str
    processes: tuple[ProcessArgs, ...] = field(default_factory=tuple)
    simulated: bool = False
    env: tuple[tuple[str, str], ...] = ()
    """The launch's environment (a ``PYTHONPATH`` may be where SGLang is found)."""
    workdir: str | None = None
    """The launch's working directory (``python -m sglang...`` finds a source checkout there)."""

    def argv(self) -> list[str]:
        """``python -c SCRIPT``, from the launch's working directory when it has one."""
        if self.workdir:
            return ["sh", "-c", 'cd -- "$0" && exec "$@"', self.workdir, self.python, "-c", SCRIPT]
        return [self.python, "-c", SCRIPT]

    def same_run(self) -> tuple[str, tuple[tuple[str, str], ...], str | None]:
        """Plans that can share one call: the same interpreter, environment and directory."""
        return self.python, self.env, self.workdir

    def stdin(self) -> str:
        return request(self.processes, simulated=self.simulated)
