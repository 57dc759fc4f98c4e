"""SGLang's argument parser, played from data: which command lines a given SGLang version refuses.

Why: the simulated host must refuse what the real server refuses (an unknown flag, a bad choice, a
missing value), and the lint must say which of a profile's flags a version does not know, both
without SGLang installed.  The data is the real parser's own options, dumped per version into
``kimitui/sglang/flags/sglang-<version>.json`` (``tests/support/sglang_flags_dump.py``); this module
walks an argument list the way ``argparse`` does (long options, ``--flag=value``, unique-prefix
abbreviations, ``nargs``, ``choices``, ``int``/``float`` values) and answers with argparse's own
wording, so the operator reads the message SGLang would print.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

DEFAULT_VERSION = "0.5.23"
"""The SGLang version kimitui renders for and the simulator plays: its parser, its preflight answer
(``0.5.23 (simulated)``) and its ``/server_info`` ``version`` all read this one constant."""

PROG = "sglang serve"
"""The program name 0.5.23's ``prepare_server_args`` gives its parser (argparse prefixes its errors with it)."""
ROUTER_PROG = "launch_router.py"
"""``python -m sglang_router.launch_router``'s parser (argparse names it after the script)."""

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True)
class FlagSpec:
    """One option of the parser: every spelling of it, and what it takes."""

    names: tuple[str, ...]
    takes_value: bool
    nargs: str | int | None = None
    """argparse's ``nargs``: None (one value), ``"?"``, ``"*"``, ``"+"`` or a count."""
    choices: tuple[str, ...] | None = None
    value_type: str | None = None
    """``"int"`` or ``"float"`` when argparse converts the value; anything else is taken as text."""
    required: bool = False
    deprecated: str | None = None
    """Why the version keeps it only for compatibility (a no-op, a removal pending); None when it is live."""

    @property
    def display(self) -> str:
        """How argparse names it in an error: every spelling, joined by ``/``."""
        return "/".join(self.names)


@dataclass(frozen=True)
class KnownFlags:
    """Every option of one SGLang version's ``launch_server`` parser."""

    version: str
    specs: tuple[FlagSpec, ...]

    @functools.cached_property
    def by_name(self) -> dict[str, FlagSpec]:
        return {name: spec for spec in self.specs for name in spec.names}

    def resolve(self, flag: str) -> FlagSpec | str:
        """The option ``flag`` names (exactly, or as argparse's unique prefix); else argparse's complaint.

        ``""``: no option; an ambiguous prefix lists its matches in the parser's order, as argparse does.
        """
        exact = self.by_name.get(flag)
        if exact is not None:
            return exact
        matches = [name for name in self.by_name if name.startswith(flag)] if flag.startswith("--") else []
        if len({id(self.by_name[m]) for m in matches}) == 1:
            return self.by_name[matches[0]]
        if matches:
            return f"ambiguous option: {flag} could match {', '.join(matches)}"
        return ""


class FlagsDataError(ValueError):
    """A known-flags file that does not say what this module needs."""


def _spec_from(entry: Mapping[str, Any]) -> FlagSpec:
    names = entry.get("option_strings") or entry.get("flags") or entry.get("names")
    if not isinstance(names, list) or not names:
        raise FlagsDataError(f"an option without its option strings: {entry!r}")
    nargs = entry.get("nargs")
    takes = entry.get("takes_value")
    if takes is None:
        takes = nargs != 0
    choices = entry.get("choices")
    value_type = entry.get("type")
    deprecated = entry.get("deprecated")
    return FlagSpec(
        names=tuple(str(n) for n in names),
        takes_value=bool(takes),
        nargs=nargs if isinstance(nargs, (str, int)) and not isinstance(nargs, bool) else None,
        choices=tuple(str(c) for c in choices) if isinstance(choices, list) else None,
        value_type=str(value_type) if value_type in ("int", "float") else None,
        required=bool(entry.get("required", False)),
        deprecated=str(deprecated) if isinstance(deprecated, str) and deprecated else
        ("deprecated" if deprecated is True else None),
    )


def known_flags_from(data: Mapping[str, Any]) -> KnownFlags:
    """The parsed known-flags document (``{"version": ..., "options": [...]}``)."""
    options = data.get("options")
    if not isinstance(options, list):
        raise FlagsDataError("a known-flags file needs an 'options' list")
    return KnownFlags(str(data.get("version") or DEFAULT_VERSION), tuple(_spec_from(o) for o in options))


@functools.cache
def _data(version: str) -> dict[str, Any] | None:
    try:
        text = resources.files("kimitui.sglang").joinpath("flags").joinpath(f"sglang-{version}.json").read_text()
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        return None
    data = json.loads(text)
    return data if isinstance(data, dict) else None


@functools.cache
def known_flags(version: str = DEFAULT_VERSION) -> KnownFlags | None:
    """The packaged ``launch_server`` options of ``version``; None when kimitui carries no data for it."""
    data = _data(version)
    return known_flags_from(data) if data is not None else None


@functools.cache
def known_router_flags(version: str = DEFAULT_VERSION) -> KnownFlags | None:
    """The ``sglang_router.launch_router`` options dumped beside ``version``'s server options; None without them."""
    data = _data(version)
    router = data.get("router") if data is not None else None
    return known_flags_from(router) if isinstance(router, dict) else None


# --------------------------------------------------------------------------- the walk


def _looks_like_option(token: str) -> bool:
    """argparse's test: a token starting with '-' is an option unless it is a negative number."""
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def _bad_value(spec: FlagSpec, value: str) -> str:
    """argparse's complaint about one value of ``spec`` (type first, then choices), or ""."""
    if spec.value_type is not None:
        try:
            (int if spec.value_type == "int" else float)(value)
        except ValueError:
            return f"argument {spec.display}: invalid {spec.value_type} value: {value!r}"
    if spec.choices is not None and value not in spec.choices:
        shown = ", ".join(repr(c) for c in spec.choices)
        return f"argument {spec.display}: invalid choice: {value!r} (choose from {shown})"
    return ""


def _expected(spec: FlagSpec) -> str:
    nargs = spec.nargs
    if nargs is None:
        return "expected one argument"
    if nargs == "+":
        return "expected at least one argument"
    return f"expected {nargs} arguments"


def _take_values(spec: FlagSpec, rest: Sequence[str]) -> tuple[list[str], str]:
    """The values ``spec`` consumes from ``rest`` (tokens after the flag), or argparse's complaint."""
    following: list[str] = []
    for token in rest:
        if _looks_like_option(token):
            break
        following.append(token)
    nargs = spec.nargs
    if nargs is None:
        return (following[:1], "") if following else ([], _expected(spec))
    if nargs == "?":
        return following[:1], ""
    if nargs == "*":
        return following, ""
    if nargs == "+":
        return (following, "") if following else ([], _expected(spec))
    count = int(nargs)
    return (following[:count], "") if len(following) >= count else ([], _expected(spec))


def refusal(flags: KnownFlags, argv: Sequence[str], *, prog: str = PROG) -> str:
    """What the version's parser says of ``argv`` (the arguments after ``-m sglang.launch_server``).

    ``""``: it parses.  Otherwise argparse's message, as ``launch_server`` prints it:
    ``sglang serve: error: unrecognized arguments: --no-such-flag``.
    """
    unrecognized: list[str] = []
    seen: set[int] = set()
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _looks_like_option(token):
            unrecognized.append(token)
            continue
        flag, eq, inline = token.partition("=")
        found = flags.resolve(flag)
        if isinstance(found, str):
            if found:
                return f"{prog}: error: {found}"
            unrecognized.append(token)
            continue
        seen.add(id(found))
        if not found.takes_value:
            if eq:
                return f"{prog}: error: argument {found.display}: ignored explicit argument {inline!r}"
            continue
        if eq:
            values = [inline]
        else:
            values, problem = _take_values(found, argv[i:])
            if problem:
                return f"{prog}: error: argument {found.display}: {problem}"
            i += len(values)
        for value in values:
            problem = _bad_value(found, value)
            if problem:
                return f"{prog}: error: {problem}"
    missing = [spec.display for spec in flags.specs if spec.required and id(spec) not in seen]
    if missing:
        return f"{prog}: error: the following arguments are required: {', '.join(missing)}"
    if unrecognized:
        return f"{prog}: error: unrecognized arguments: {' '.join(unrecognized)}"
    return ""


def unknown_flags(flags: KnownFlags, argv: Sequence[str]) -> list[str]:
    """The flags of ``argv`` the version does not know (each once, in order); values are not judged."""
    out: list[str] = []
    for token in argv:
        if not token.startswith("--"):
            continue
        flag = token.partition("=")[0]
        if isinstance(flags.resolve(flag), str) and flag not in out:
            out.append(flag)
    return out


def deprecated_flags(flags: KnownFlags, argv: Sequence[str]) -> list[tuple[str, str]]:
    """(flag, why) for each flag of ``argv`` the version keeps only for compatibility."""
    out: list[tuple[str, str]] = []
    for token in argv:
        if not token.startswith("--"):
            continue
        spec = flags.resolve(token.partition("=")[0])
        if isinstance(spec, FlagSpec) and spec.deprecated and all(f != token.partition("=")[0] for f, _ in out):
            out.append((token.partition("=")[0], spec.deprecated))
    return out
