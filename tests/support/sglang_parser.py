"""SGLang 0.5.23's own argument parser, in a venv of its own: does SGLang accept kimitui's commands?

kimitui renders every launch command itself (kimitui/profiles/render.py, deploy.py); a flag
SGLang does not know only shows when the real server refuses to start, on the real host,
after a swap has stopped the known-good server.  This venv holds SGLang's and the router's
real parsers (``sglang==0.5.23`` and ``sglang-router==0.3.2``, both ``--no-deps``, plus the
small packages their imports need and the CPU torch), so tests/test_sglang_parser.py parses
every rendered command with them.  Parse only: no model, no GPU, no kernel.

What "parse" runs (the in-venv half of this file, ``parse``):

- a server command (the arguments after ``-m sglang.launch_server``):
  ``sglang.srt.server_args.prepare_server_args(argv)``, exactly what ``launch_server`` calls
  first: argparse (unknown flags, bad choices, missing or ill-typed values, the
  ``Deprecated*`` actions' refusals) then ``ServerArgs.from_cli_args`` (the dataclass).  In
  0.5.23 ``ServerArgs.__post_init__`` is empty: every semantic check lives in
  ``resolve_once`` (``arg_groups/pipeline.py``), which ``launch_server.run_server`` calls
  next.  It is NOT run: it reads the model's ``config.json`` (after a ``dummy`` model
  short-circuit that would skip most checks anyway), probes the GPU platform, and importing
  it pulls ``sglang.srt.configs``, which needs transformers and torchvision's compiled ops
  (no torchvision build matches this machine's CPU torch: measured, ``torchvision::nms does
  not exist``).
- a router command (after ``-m sglang_router.launch_router``):
  ``sglang_router.launch_router.parse_router_args(argv)``, what its ``main`` calls before
  handing the arguments to the Rust router (not started).

The answer per command: ok, or SGLang's own message (argparse's ``prog: error: ...`` line,
or the exception ``from_cli_args`` raised), plus what the parser logged (deprecation
warnings).  One call parses a whole list: importing torch costs seconds.

Set-up, once per machine (2.1 GB, most of it triton and torch; measured on 2 cores: 65 s to
141 s with a warm pip cache, quiet or loaded, 198 s cold; ``setup`` prints its seconds and size)::

    python3 tests/support/sglang_parser.py setup
    echo '[["python3", "-m", "sglang.launch_server", "--model-path", "m", "--bogus"]]' \
        | python3 tests/support/sglang_parser.py check

The venv lives in ``$KIMITUI_SGLANG_PARSER_VENV`` or, by default, in the user's cache
(``$XDG_CACHE_HOME/kimitui-dev/sglang-parser-venv``).  Tests that need it skip with that
command as the reason when it is missing, unless ``KIMITUI_REQUIRE_SGLANG_PARSER=1`` (set by
``.ci/run``, which builds it first) makes a missing venv a failure.  The known-flags data
(``kimitui/sglang/flags/``) is generated in it by tests/support/sglang_flags_dump.py.

This file runs under two Pythons (kimitui's, and the venv's for ``parse``): stdlib only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:
    from tests.support import dev_venv
except ImportError:  # run as a script (`python3 tests/support/<this>.py setup`): its folder is on sys.path
    import dev_venv  # type: ignore[no-redef]

REPO_ROOT = Path(__file__).resolve().parents[2]
SGLANG_VERSION = "0.5.23"
ROUTER_PACKAGE = "sglang-router"
ROUTER_VERSION = "0.3.2"
"""The last release under this name (the router continues as ``smg``, module ``smg.launch_router``);
kimitui renders ``python -m sglang_router.launch_router``, which this package provides."""
TORCH_VERSION = "2.13.0"
"""What this machine holds as a local CPU wheel (pip's find-links): the parser needs torch importable, not fast."""
PARSER_DEPS = ("numpy", "orjson", "psutil", "pybase64", "requests", "triton", "packaging", "pillow", "starlette",
               "msgspec", "pydantic", "pyzmq", "tqdm", "ipython", "aiohttp")
"""What ``from sglang.srt.server_args import prepare_server_args`` imports (found one ModuleNotFoundError at a
time on a bare venv; triton is imported at the top of sglang.srt.utils.common)."""
ROUTER_DEPS = ("setproctitle", "uvicorn", "fastapi")
"""What ``from sglang_router.launch_router import parse_router_args`` adds (aiohttp and orjson are above)."""
READY_MARK = ".kimitui-sglang-parser-ready"
SERVER_MODULE = "sglang.launch_server"
ROUTER_MODULE = "sglang_router.launch_router"
PROGRAMS = {SERVER_MODULE: "server", ROUTER_MODULE: "router"}


def parser_venv() -> Path:
    """Where the parser's virtualenv lives (the user's cache; ``$KIMITUI_SGLANG_PARSER_VENV`` overrides)."""
    return dev_venv.venv_dir("KIMITUI_SGLANG_PARSER_VENV", "sglang-parser-venv")


def parser_python() -> Path | None:
    """The venv's python, if set-up finished there (the mark is written last)."""
    return dev_venv.ready_python(parser_venv(), READY_MARK)


def required() -> bool:
    """CI builds the venv first: there a missing parser is a failure, not a skip."""
    return os.environ.get("KIMITUI_REQUIRE_SGLANG_PARSER") == "1"


def setup(venv: Path | None = None, *, quiet: bool = True) -> Path:
    """Build the parser's venv (idempotent: a finished one is kept)."""
    venv = venv or parser_venv()
    if (venv / READY_MARK).exists():
        return venv / "bin" / "python"
    pip = dev_venv.fresh_venv(venv, quiet=quiet)
    py = venv / "bin" / "python"
    # --no-compile: the parser imports a sliver of torch, triton and SGLang; byte-compiling all of
    # them at install is most of set-up's CPU (Python compiles what it imports, once, on first use).
    install = [*pip, "install", "--no-compile"]
    subprocess.run([*install, f"torch=={TORCH_VERSION}", *PARSER_DEPS, *ROUTER_DEPS], check=True)
    # --no-deps: their own pins (torch 2.14.1, flashinfer, sgl-kernel, ...) are the serving stack, not the parser.
    subprocess.run([*install, "--no-deps", f"sglang=={SGLANG_VERSION}", f"{ROUTER_PACKAGE}=={ROUTER_VERSION}"],
                   check=True)
    check = subprocess.run([str(py), str(Path(__file__).resolve()), "versions"], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"the parser venv at {venv} does not import SGLang's parsers:\n{check.stderr[-2000:]}")
    (venv / READY_MARK).write_text(_last_line(check.stdout) + "\n")
    return py


def command_of(argv: list[str]) -> dict[str, Any]:
    """A rendered argv (``python -m MODULE ARGS...``) as a request: which parser, which arguments."""
    if "-m" not in argv:
        raise ValueError(f"not a `python -m MODULE` command: {argv[:4]}")
    at = argv.index("-m")
    module = argv[at + 1]
    if module not in PROGRAMS:
        raise ValueError(f"{module}: no SGLang parser for this module (known: {', '.join(PROGRAMS)})")
    return {"program": PROGRAMS[module], "args": list(argv[at + 2:])}


def run_in_venv(python: Path, commands: list[dict[str, Any]], *, dump_flags: bool = False,
                timeout_s: float = 600.0) -> dict[str, Any]:
    """Parse every command in ONE process of the venv; ``dump_flags`` adds the known-flags file's text."""
    request = {"commands": commands, "dump_flags": dump_flags}
    proc = subprocess.run([str(python), str(Path(__file__).resolve()), "parse"], input=json.dumps(request),
                          capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"the parser venv failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    answer: dict[str, Any] = json.loads(_last_line(proc.stdout))
    return answer


def _last_line(text: str) -> str:
    """The answer: the last line (SGLang's imports may print before it)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise RuntimeError("the parser venv answered nothing")
    return lines[-1]


# --------------------------------------------------------------------------- inside the venv


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    from sglang.srt.server_args import prepare_server_args  # type: ignore[import-not-found]  # noqa: F401
    from sglang_router.launch_router import parse_router_args  # type: ignore[import-not-found]  # noqa: F401

    return {"sglang": version("sglang"), "sglang_router": version(ROUTER_PACKAGE), "torch": version("torch")}


def _parse_one(program: str, args: list[str]) -> dict[str, Any]:
    """One command through SGLang's own entry; argparse's exit becomes its message, never an exit."""
    from sglang.srt.server_args import prepare_server_args
    from sglang_router.launch_router import parse_router_args

    err = io.StringIO()
    error: str | None = None
    # prepare_server_args re-roots logging on the stderr of its call: each command gets its own.
    logging.basicConfig(stream=err, format="%(message)s", force=True)
    with contextlib.redirect_stderr(err):
        try:
            if program == "server":
                prepare_server_args(args)
            elif program == "router":
                import sglang_router.launch_router as entry  # type: ignore[import-not-found]

                sys.argv[0] = entry.__file__ or sys.argv[0]  # its parser's prog, as `python -m` names it
                parse_router_args(args)
            else:
                error = f"unknown program {program!r}"
        except SystemExit as exc:  # argparse: usage, then "prog: error: message", exit 2
            lines = [ln for ln in err.getvalue().splitlines() if ": error: " in ln]
            error = lines[-1] if lines else f"the parser exited with {exc.code}"
        except Exception as exc:  # from_cli_args / RouterArgs: the dataclass refused a value
            error = f"{type(exc).__name__}: {exc}"
    log = [ln for ln in err.getvalue().splitlines() if ln.strip() and not ln.startswith(("usage:", " "))
           and ": error: " not in ln]
    return {"ok": error is None, "error": error, "log": log}


def _serve_parse() -> int:
    """``parse``: a JSON request on stdin, one JSON answer on stdout (what each command got)."""
    request = json.load(sys.stdin)
    answer: dict[str, Any] = {"versions": _versions()}
    answer["results"] = [_parse_one(c["program"], list(c["args"])) for c in request.get("commands", [])]
    if request.get("dump_flags"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import sglang_flags_dump  # type: ignore[import-not-found]

        answer["flags_json"] = sglang_flags_dump.render(sglang_flags_dump.dump())
    # SGLang's imports may print on stdout; the answer goes last, on a line of its own.
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    return 0


def _check(python: Path) -> int:
    """``check``: a JSON list of {program, args} (or of full argvs) on stdin; prints each verdict."""
    items = json.load(sys.stdin)
    commands = [command_of(i) if isinstance(i, list) else i for i in items]
    answer = run_in_venv(python, commands)
    for c, r in zip(commands, answer["results"], strict=True):
        print(("ok      " if r["ok"] else "REFUSED ") + " ".join(c["args"])[:110])
        for line in ([r["error"]] if not r["ok"] else []) + r["log"]:
            print(f"  {line}")
    return 0 if all(r["ok"] for r in answer["results"]) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="build the parser's venv (kept; a finished one is reused); prints seconds and size")
    sub.add_parser("where", help="print the venv's path")
    sub.add_parser("check", help="parse the JSON list of commands on stdin with the venv's parsers")
    sub.add_parser("parse", help="(inside the venv) answer a JSON request on stdin")
    sub.add_parser("versions", help="(inside the venv) import the parsers, print their versions")
    args = parser.parse_args(argv)
    if args.cmd == "where":
        print(parser_venv())
        return 0
    if args.cmd == "parse":
        return _serve_parse()
    if args.cmd == "versions":
        print(json.dumps(_versions()))
        return 0
    if args.cmd == "setup":
        t0 = time.monotonic()
        built = setup(quiet=False)
        size = sum(f.stat().st_size for f in parser_venv().rglob("*") if f.is_file() and not f.is_symlink())
        print(f"SGLang parser venv ready in {time.monotonic() - t0:.0f} s ({size / 1e9:.1f} GB): {built}")
        return 0
    py = parser_python()
    if py is None:
        print(f"no parser venv at {parser_venv()}: run `python3 {Path(__file__).relative_to(REPO_ROOT)} setup`",
              file=sys.stderr)
        return 2
    return _check(py)


if __name__ == "__main__":
    sys.exit(main())
