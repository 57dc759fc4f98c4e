"""Dump SGLang's own command-line flags as data: run INSIDE the parser venv (tests/support/sglang_parser.py).

kimitui never imports SGLang; the simulator's parser and the profile lint still need
to know which flags a given SGLang accepts.  This script asks the real parsers
(``ServerArgs.add_cli_args`` for ``sglang.launch_server``, ``RouterArgs.add_cli_args``
for ``sglang_router.launch_router``) and writes what they declare, so the committed
``kimitui/sglang/flags/sglang-<version>.json`` is generated, never hand-written;
tests/test_sglang_parser.py checks the committed file equals this script's output.

The schema is the one ``kimitui/sglang/flag_check.py`` reads: ``{"version", "options": [...],
"router": {...}}``, one entry per option in argparse's own order: ``option_strings`` (every
spelling, aliases included), ``dest``, ``takes_value`` (False for a bare switch), ``nargs``
(argparse's: null, "?", "*", "+" or a count), ``choices`` (null when free; sorted when the
parser holds them in a set, whose order changes per run), ``type`` (the converter's name),
``required``, ``default`` (JSON-able defaults only, else their repr), ``deprecated`` (null,
or why: the parser's own help text when it says so -- a ``Deprecated*`` action or a help
that starts with "Deprecated" -- or a kimitui note for what the parser cannot say, such as a
flag that parses but does nothing), ``action`` and ``help``.

    <venv>/bin/python tests/support/sglang_flags_dump.py > kimitui/sglang/flags/sglang-0.5.23.json
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from typing import Any

NOTES: dict[str, str] = {
    "--num-continuous-decode-steps":
        "no-op since late 2024 (sgl-project/sglang#2095 removed the continuous-decode loop): declared in "
        "sglang/srt/arg_groups/fields/schedule.py, read nowhere else in the 0.5.23 wheel; 0.5.23 still accepts "
        "it. Deletion pending upstream: the open sgl-project/sglang#37551 removes the field, after which the "
        "parser refuses the flag and a profile carrying it fails to start",
}
"""What the parser cannot tell, found by reading the 0.5.23 wheel (a grep of the package)."""


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return repr(value)


def _deprecated(action: argparse.Action) -> str | None:
    flag = action.option_strings[0]
    if flag in NOTES:
        return NOTES[flag]
    text = (action.help or "").strip()
    if type(action).__name__.startswith("Deprecated") or text.lstrip("( ").lower().startswith("deprecated"):
        return text or "deprecated"
    return None


def _choices(action: argparse.Action, unordered: tuple[str, ...]) -> list[Any] | None:
    if action.choices is None:
        return None
    values = [_jsonable(c) for c in action.choices]
    shuffled = isinstance(action.choices, (set, frozenset)) or action.option_strings[0] in unordered
    return sorted(values, key=str) if shuffled else values


def describe(parser: argparse.ArgumentParser, unordered: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every optional argument of ``parser``, in argparse's own order.

    ``unordered``: options whose choices come in a different order each run (sorted here).
    """
    out: list[dict[str, Any]] = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        out.append({
            "option_strings": list(action.option_strings),
            "dest": action.dest,
            "takes_value": action.nargs != 0,
            "nargs": action.nargs,
            "choices": _choices(action, unordered),
            "type": None if action.type is None else getattr(action.type, "__name__", repr(action.type)),
            "required": bool(action.required),
            "default": _jsonable(action.default),
            "deprecated": _deprecated(action),
            "action": type(action).__name__,
            "help": action.help,
        })
    return out


def server_parser() -> argparse.ArgumentParser:
    """The parser ``prepare_server_args`` builds (``sglang serve`` / ``python -m sglang.launch_server``)."""
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def router_parser() -> argparse.ArgumentParser:
    """The parser ``sglang_router.launch_router.parse_router_args`` builds."""
    from sglang_router.router_args import RouterArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(prog="sglang_router.launch_router")
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser


ROUTER_HASHED_CHOICES = ("--tool-call-parser",)
"""The router takes these choices from its Rust core's hash map: a new order in every process."""


def dump() -> dict[str, Any]:
    """The whole data file, as the venv's SGLang and router declare it."""
    return {
        "version": version("sglang"),
        "generated_by": "tests/support/sglang_flags_dump.py, inside the venv of tests/support/sglang_parser.py",
        "options": describe(server_parser()),
        "router": {
            "package": "sglang-router",
            "version": version("sglang-router"),
            "module": "sglang_router.launch_router",
            "options": describe(router_parser(), unordered=ROUTER_HASHED_CHOICES),
        },
    }


def render(data: dict[str, Any]) -> str:
    """The file's exact text (sorted keys are NOT used: argparse's order is the help's order)."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(dump()))
