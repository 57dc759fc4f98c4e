"""``kimitui profiles list | show | diff | render | lint``: profiles as files, from the shell.

Bad profiles print ``file:line: field: message`` on stderr and exit 2; no tracebacks.
``render`` prints plain text (no markup), so its output can be pasted or redirected as is.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kimitui.config import ConfigError, load_config
from kimitui.profiles import (
    ProfileError,
    diff_profiles,
    has_errors,
    lint_profile,
    load_profile,
    profile_dirs,
    render_command,
    render_unit,
    scan_profiles,
    single_knob_alternatives,
)
from kimitui.profiles.deploy import deployment, process_command
from kimitui.profiles.diff import family_of_alternative, redacted
from kimitui.profiles.keys import stable_keys
from kimitui.profiles.lint import NO_EFFECT_CONTINUOUS
from kimitui.profiles.loader import locate_field
from kimitui.profiles.schema import Profile

if TYPE_CHECKING:
    from kimitui.host.base import Host

EXIT_LINT_ERRORS = 1
EXIT_BAD_PROFILE = 2
# Knobs SGLang parses but ignores: a diff that changes them changes nothing.
INERT_KNOBS = {"num_continuous_decode_steps": NO_EFFECT_CONTINUOUS}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("profiles", help="list, show, diff, render and lint server profiles")
    sub = parser.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="every visible profile (first match in the search path wins)")
    p.set_defaults(func=_list)

    p = sub.add_parser("show", help="a profile's knobs, and which file sets each")
    p.add_argument("profile", metavar="NAME|PATH")
    p.set_defaults(func=_show)

    p = sub.add_parser("diff", help="the launch knobs that differ from A to B")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.set_defaults(func=_diff)

    p = sub.add_parser("render", help="the exact launch command line or systemd unit")
    p.add_argument("profile", metavar="NAME|PATH")
    p.add_argument("--as", dest="form", choices=("cmd", "unit"), default="cmd", help="shell command (default) or systemd unit")
    p.add_argument("--simulated", action="store_true", help="render for the simulated host (kimitui sim serve)")
    p.add_argument("--pretty", action="store_true", help="cmd: one flag per line with \\ continuations")
    p.set_defaults(func=_render)

    p = sub.add_parser("lint", help="check profiles against SGLang's rules (exit 1 on errors)")
    p.add_argument("profiles_to_lint", metavar="NAME|PATH", nargs="*", help="default: every visible profile")
    p.add_argument("--host", metavar="NAME", default=None,
                   help="also ask that host's own SGLang parser (its version, parse only) about every process")
    p.set_defaults(func=_lint)


def _dirs(args: argparse.Namespace) -> list[str] | None:
    """The ``--profiles DIR`` options (the global ones, before the subcommand)."""
    dirs: list[str] | None = args.profiles
    return dirs


def _out() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def _err() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def _fail(exc: ProfileError) -> int:
    _err().print(f"[bold red]error:[/] {escape(str(exc))}")
    return EXIT_BAD_PROFILE


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def _display_path(path: Path | None) -> str:
    if path is None:
        return "(no file)"
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _where(profile: Profile, loc: list[str | int], dirs: list[str] | None) -> str:
    found = locate_field(profile, loc, dirs)
    if found is None:
        return ""
    path, line = found
    return f"{path.name}:{line}" if line else path.name


# --------------------------------------------------------------------------- list


def _own_settings(p: Profile) -> str:
    """What the profile's own file sets (beyond identity): for a variant, its one or two knobs."""
    if p.source_path is None:
        return ""
    try:
        data = tomllib.loads(p.source_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return ""
    own = {k: v for k, v in data.items() if k not in ("name", "description", "extends", "key")}
    if p.extends is None:
        return f"{len(own)} settings"
    return ", ".join(f"{k}={_fmt(v)}" for k, v in own.items())


def _config_order(args: argparse.Namespace) -> list[str]:
    """The config's ``[profiles] order``; a bad config is said once and does not stop the listing."""
    try:
        return list(load_config(args.config).profiles.order)
    except ConfigError as exc:
        _err().print(f"[bold yellow]config:[/] {escape(str(exc))} (profile keys ignore its order)")
        return []


LIST_COLUMNS = ("key", "name", "tp/ep", "extends + own settings", "description")
PLAIN_PAD_MAX = 64


def _plain_lines(rows: list[tuple[str, ...]]) -> list[str]:
    """The listing for a pipe or a file: a line per profile, columns two spaces apart, never wrapped.

    A column is padded to its widest cell up to PLAIN_PAD_MAX; a longer cell pushes the rest of its line."""
    widths = [min(PLAIN_PAD_MAX, max(len(row[i]) for row in rows)) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
            for row in rows]


def _list(args: argparse.Namespace) -> int:
    good, bad = scan_profiles(_dirs(args))
    keys = stable_keys(good, _config_order(args))
    rows = [(keys.key_of(p.name) or "-", p.name, f"{p.tp_size or 1}/{p.ep_size or 1}",
             (f"{p.extends} + " if p.extends else "") + _own_settings(p), p.description)
            for p in sorted(good, key=lambda q: (keys.key_of(q.name) or "~", q.name))]
    out = _out()
    if sys.stdout.isatty():
        table = Table(title="profiles", title_justify="left")
        table.add_column("key", no_wrap=True, justify="right")
        table.add_column("name", no_wrap=True)
        table.add_column("tp/ep", no_wrap=True)
        table.add_column("extends + own settings", overflow="fold")
        table.add_column("description", overflow="fold", ratio=1)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        out.print(table)
    else:  # a table squeezed to 80 columns folds knob names letter by letter: grep and files want lines
        for line in _plain_lines([LIST_COLUMNS, *rows]):
            out.print(escape(line))
    dirs = sorted({str(p.source_path.parent) for p in good if p.source_path})
    out.print("from: " + escape(", ".join(dirs)), style="dim")
    out.print("searched: " + escape(", ".join(str(d) for d in profile_dirs(_dirs(args)))), style="dim")
    for note in keys.notes:
        _err().print(f"[yellow]keys:[/] {escape(note)}")
    for exc in bad:
        _err().print(f"[bold red]invalid:[/] {escape(str(exc))}")
    return EXIT_BAD_PROFILE if bad else 0


# --------------------------------------------------------------------------- show


def _show(args: argparse.Namespace) -> int:
    dirs = _dirs(args)
    try:
        p = load_profile(args.profile, dirs)
    except ProfileError as exc:
        return _fail(exc)
    out = _out()
    good, _bad = scan_profiles(dirs)
    key = stable_keys(good, _config_order(args)).key_of(p.name) if any(
        q.source_path and p.source_path and q.source_path.resolve() == p.source_path.resolve() for q in good) else None
    out.print(f"[bold]{escape(p.name)}[/]  {escape(p.description)}")
    out.print(f"file: {escape(str(p.source_path))}" + (f"   extends: {escape(p.extends)}" if p.extends else "")
              + f"   cockpit key: {key or 'none'}", style="dim")
    table = Table(show_header=True, header_style="bold")
    table.add_column("knob")
    table.add_column("value", overflow="fold")
    table.add_column("set in", style="dim")
    shown = redacted(p)
    for knob, value in shown.knobs().items():
        if value in (None, False, [], {}):
            continue
        table.add_row(knob, escape(_fmt(value)), escape(_where(p, [knob], dirs)))
    for section in ("launcher", "sim"):
        model = getattr(p, section)
        for key in [k for k in type(model).model_fields if k in model.model_fields_set]:
            table.add_row(f"{section}.{key}", escape(_fmt(getattr(model, key))), escape(_where(p, [section, key], dirs)))
    out.print(table)
    issues = lint_profile(p)
    for issue in issues:
        colour = "red" if issue.severity == "error" else "yellow"
        out.print(f"[{colour}]{issue.severity}[/]: {escape(issue.field)}: {escape(issue.message)}")
    if p.is_deployment():
        _show_processes(out, shown)
        return 0
    out.print("[bold]command:[/]")
    out.print(escape(render_command(shown, pretty=True)), soft_wrap=True)
    return 0


def _show_processes(out: Console, p: Profile) -> None:
    """A deployment: every process's command, with its role and the host it runs on."""
    specs = deployment(p)
    out.print(f"[bold]processes ({len(specs)}, started and swapped as one):[/]")
    for spec in specs:
        what = f"{spec.role} on {spec.node or 'the home host'}"
        extra = (", the entry: readiness and clients go through it" if spec.entry else "")
        out.print(f"[bold]{escape(what)}[/]" + (f" (port {spec.port})" if spec.port else "") + escape(extra))
        out.print(escape(process_command(p, spec, pretty=True)), soft_wrap=True)


# --------------------------------------------------------------------------- diff


def _diff(args: argparse.Namespace) -> int:
    dirs = _dirs(args)
    try:
        a = load_profile(args.a, dirs)
        b = load_profile(args.b, dirs)
    except ProfileError as exc:
        return _fail(exc)
    d = diff_profiles(a, b)
    out = _out()
    if not d.changes:
        out.print(f"{escape(a.name)} and {escape(b.name)} launch the same server (no knob differs)")
        return 0
    out.print(f"[bold]{escape(a.name)} -> {escape(b.name)}[/]")
    for line in d.lines():
        out.print("  " + escape(line))
    warning = d.warning()
    if warning:
        out.print(f"[bold yellow]{escape(warning)}[/]: a result cannot be attributed to one knob")
    elif d.summary():
        out.print(escape(d.summary() or ""))
    if d.observability:
        out.print(f"[dim]only where it listens or what it reports: {escape(', '.join(d.observability))} (not a confound)[/]")
    for knob in d.changes:
        if knob in INERT_KNOBS:
            out.print(f"[yellow]note[/]: {knob} {escape(INERT_KNOBS[knob])}")
    if d.confounded:
        good, _ = scan_profiles(dirs)
        alternatives = single_knob_alternatives(a, b, good)
        if alternatives:
            names = ", ".join(f"{c.name} ({family_of_alternative(a, c)})" for c in alternatives)
            out.print(f"single-knob alternatives: {escape(names)}")
    return 0


# --------------------------------------------------------------------------- render


def _render(args: argparse.Namespace) -> int:
    try:
        p = load_profile(args.profile, _dirs(args))
    except ProfileError as exc:
        return _fail(exc)
    try:
        if args.form == "unit":
            text = render_unit(p, simulated=args.simulated)
        else:
            text = render_command(p, simulated=args.simulated, pretty=args.pretty) + "\n"
    except ValueError as exc:
        return _fail(ProfileError(str(exc), path=p.source_path))
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


# --------------------------------------------------------------------------- lint


def _lint(args: argparse.Namespace) -> int:
    dirs = _dirs(args)
    out, err = _out(), _err()
    profiles: list[Profile] = []
    failed = False
    if args.profiles_to_lint:
        for ref in args.profiles_to_lint:
            try:
                profiles.append(load_profile(ref, dirs))
            except ProfileError as exc:
                _fail(exc)
                failed = True
    else:
        good, bad = scan_profiles(dirs)
        profiles = good
        for broken in bad:
            _fail(broken)
        failed = bool(bad)
    errors = 0
    for p in profiles:
        issues = lint_profile(p)
        if not issues:
            out.print(f"[green]ok[/] {escape(p.name)}")
            continue
        for issue in issues:
            loc: list[str | int] = [
                int(part) if part.isdigit() else part for part in issue.field.replace("]", "").replace("[", ".").split(".")
            ]
            found = locate_field(p, loc, dirs)
            where = _display_path(found[0] if found else p.source_path) + (f":{found[1]}" if found and found[1] else "")
            colour = "red" if issue.severity == "error" else "yellow"
            target = err if issue.severity == "error" else out
            target.print(
                f"{escape(where)}: [{colour}]{issue.severity}[/]: {escape(issue.field)}: {escape(issue.message)}"
                + (f" [dim](profile {escape(p.name)})[/]" if found and found[0] != p.source_path else "")
            )
        errors += has_errors(issues)
    if getattr(args, "host", None) and profiles:
        errors += _lint_on_host(args, profiles, out, err)
    if failed:
        return EXIT_BAD_PROFILE
    return EXIT_LINT_ERRORS if errors else 0


def _lint_on_host(args: argparse.Namespace, profiles: list[Profile], out: Console, err: Console) -> int:
    """What the host's own SGLang says of each profile's command (the flags its version does not know...).

    The lint above knows 0.5.23's parser; a host may run another version, and only its parser can say.
    Returns how many profiles it refuses (a host that cannot be reached counts as one).
    """
    import asyncio

    from kimitui.commands.common import on_host
    from kimitui.launcher.preflight_host import ask_host_sglang_each
    from kimitui.launcher.select import is_simulated_host

    refused = 0

    async def work(host: "Host") -> int:
        nonlocal refused
        answers = await ask_host_sglang_each(host, profiles, simulated=is_simulated_host(host))
        for p, answer in zip(profiles, answers, strict=True):
            for line in answer.refusals(p.name):
                err.print(f"{escape(_display_path(p.source_path))}: [red]error[/]: {escape(line)}")
            for line in answer.warnings(p.name):
                out.print(f"{escape(_display_path(p.source_path))}: [yellow]warning[/]: {escape(line)}")
            if not answer.refused and not answer.problem:
                out.print(f"[green]ok[/] {escape(p.name)} [dim](SGLang {escape(answer.version or '?')} on "
                          f"{escape(host.name)})[/]")
            refused += bool(answer.refused)
        return 0

    code = asyncio.run(on_host(args, work, lambda exc: err.print(f"[red]error[/]: {escape(str(exc))}")))
    return refused + (code != 0)


