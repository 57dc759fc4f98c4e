"""The ``kimitui`` command: the cockpit by default, plus headless subcommands.

argparse (stdlib) is enough: subcommands are few, and each lives in its own
module under ``kimitui.commands`` exposing ``register(subparsers)``; the
registered handler is ``args.func(args) -> int`` (the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from kimitui import __version__

# Order is the order in --help.
COMMAND_MODULES = (
    "run",
    "sweep",
    "capacity",
    "swap",
    "tune",
    "stop",
    "status",
    "replay",
    "report",
    "profiles",
    "sim",
    "logs",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kimitui",
        description="Operator's cockpit for SGLang on 8-GPU hosts. "
        "With no subcommand it opens the cockpit (on the simulated host 'sim' when none is configured).",
    )
    parser.add_argument("--version", action="version", version=f"kimitui {__version__}")
    parser.add_argument("--config", metavar="PATH", help="config file (default: $KIMITUI_CONFIG or the platform config dir)")
    parser.add_argument("--profiles", metavar="DIR", action="append", help="extra profile directory (repeatable; also $KIMITUI_PROFILES)")
    parser.add_argument("--sim-port", metavar="N", type=port_number, default=None,
                        help="the simulated host's profiles serve on port N (overrides [sim] port; for when "
                             "another process holds their own port)")
    parser.set_defaults(func=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"kimitui.commands.{name}")
        except ModuleNotFoundError as exc:  # a command still being built is simply absent
            if exc.name == f"kimitui.commands.{name}":
                continue
            raise
        module.register(sub)
    return parser


_GLOBAL_OPTS_WITH_VALUE = {"--config", "--profiles", "--sim-port"}


def port_number(text: str) -> int:
    """An argparse type: a TCP port 1-65535, refused in words otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1-65535)")
    return value


def _with_default_command(argv: list[str], commands: set[str]) -> list[str]:
    """``kimitui [global opts] [run opts]`` means ``kimitui [global opts] run [run opts]``."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in commands or arg in ("-h", "--help", "--version"):
            return argv
        if arg in _GLOBAL_OPTS_WITH_VALUE:
            i += 2
            continue
        if arg.split("=", 1)[0] in _GLOBAL_OPTS_WITH_VALUE:
            i += 1
            continue
        break
    return [*argv[:i], "run", *argv[i:]] if "run" in commands else argv


def _command_names(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommands ``build_parser`` registered."""
    return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction)  # noqa: SLF001
            for name in action.choices}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = _with_default_command(list(sys.argv[1:] if argv is None else argv), _command_names(parser))
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int | None] | None = args.func
    if func is None:
        parser.print_help()
        return 0
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
