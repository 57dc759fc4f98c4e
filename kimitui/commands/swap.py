"""``kimitui swap NAME [--host H] [--yes] [--timeout S]``: swap profiles headless, with a progress bar.

Shows what changes (vs the running profile and the host's baseline, with the
confound guard's warning), asks to confirm unless ``--yes``, then runs the swap
with automatic rollback.  Exit 0 only when the target is serving.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from kimitui.host.base import Host
    from kimitui.launcher.base import RunRecord
    from kimitui.launcher.swap import SwapOutcome
    from kimitui.profiles import Profile

DEFAULT_TIMEOUT_S = 1800.0

EXIT_OK = 0
EXIT_NOT_SERVING = 1
EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("swap", help="swap the server to another profile (progress, rollback on failure)")
    p.add_argument("profile", metavar="NAME|PATH")
    p.add_argument("--host", metavar="NAME", help="configured host (default: the first one, else the simulated host 'sim')")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S", help="readiness timeout in seconds")
    p.add_argument("--no-sglang-check", dest="sglang_check", action="store_false",
                   help="do not ask the host's own SGLang parser about the target's command before stopping anything")
    p.add_argument("--out", metavar="FILE.jsonl", help="record the swap's events (progress, states, the switch) to FILE")
    p.set_defaults(func=run)


def _confirm(console: "Console", question: str) -> bool:
    if not sys.stdin.isatty():
        console.print("[red]not confirmed[/]: stdin is not a terminal; pass --yes to swap without asking")
        return False
    return console.input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command module is imported to build the parser,
    # and `kimitui --help` should not pay for rich, the launchers and the profiles.
    from rich.console import Console
    from rich.markup import escape

    from kimitui.commands.common import console_errors, on_host
    from kimitui.launcher.profiles import load
    from kimitui.profiles import ProfileError

    console = Console(stderr=False, highlight=False)
    extra = list(getattr(args, "profiles", None) or [])
    try:
        target = load(args.profile, extra)
    except ProfileError as exc:
        console.print(f"[red]error[/]: {escape(str(exc))}")
        return EXIT_USAGE

    async def work(host: "Host") -> int:
        return await _swap(console, host, _on_sim_port(args, host, target), args, extra)

    return await on_host(args, work, console_errors(console))


async def _swap(console: "Console", host: "Host", target: "Profile", args: argparse.Namespace, extra: list[str]) -> int:
    from rich.markup import escape  # lazily, as in _run

    from kimitui.commands.common import SwapBar
    from kimitui.launcher.select import find_running
    from kimitui.launcher.swap import SwapOptions, swap
    from kimitui.launcher.nodes import NodeHosts

    nodes = NodeHosts(host, getattr(args, "config", None))  # a deployment's other nodes, from the config
    from kimitui.recording import RecordingError, RecordingWriter
    from kimitui.session import Session

    found = await find_running(host, unit=target.launcher.unit)
    running = found[1] if found else None
    _show_plan(console, host.name, running, target, extra)
    if not args.yes and not _confirm(console, f"swap {host.name} to {target.name}?"):
        return EXIT_NOT_SERVING
    session = Session(host=host.name)
    writer = None
    if args.out:
        try:
            writer = RecordingWriter(args.out, hosts=[host.name], meta={"command": "swap"}).start()
        except (RecordingError, OSError) as exc:
            console.print(f"[red]error[/]: --out: {escape(str(exc))}")
            return EXIT_USAGE
        session.add_sink(writer)
    try:
        with SwapBar(console) as bar:
            session.add_sink(bar)
            options = SwapOptions(timeout=args.timeout, extra_dirs=tuple(extra), host_check=args.sglang_check,
                                  hosts=nodes)
            outcome = await swap(host, target, options, session=session)
    finally:
        await nodes.close()
        path = await writer.aclose() if writer is not None else None
    if path is not None:
        console.print(f"recorded to {escape(str(path))}")
    _show_outcome(console, host.name, outcome)
    return EXIT_OK if outcome.ok else EXIT_NOT_SERVING


def _on_sim_port(args: argparse.Namespace, host: "Host", target: "Profile") -> "Profile":
    """On a simulated host every profile serves where the cockpit would start it (``Config.sim_port``)."""
    from kimitui.config import load_config  # lazily, as in _run
    from kimitui.launcher.select import is_simulated_host
    from kimitui.profiles.deploy import on_port

    port = load_config(getattr(args, "config", None)).sim_port(host.name, getattr(args, "sim_port", None))
    if port and is_simulated_host(host):
        return on_port(target, port)  # a PD deployment moves whole
    return target


def _show_plan(console: "Console", host: str, running: "RunRecord | None", target: "Profile", extra: list[str]) -> None:
    """What changes: vs the running profile, and the confound guard vs the baseline."""
    from rich.markup import escape  # lazily, as in _run

    from kimitui.launcher import guard
    from kimitui.launcher.profiles import load
    from kimitui.profiles import diff_profiles

    name = running.profile if running is not None else None
    console.print(f"[bold]{escape(host)}[/]: {escape(name or 'nothing running')} -> [bold]{escape(target.name)}[/]")
    current = None
    if running is not None:
        try:
            current = load(running.profile_path or running.profile, extra)
        except Exception:  # noqa: BLE001 - the plan is informative; the swap itself does not need it
            current = None
    base = guard.load_baseline(host, None, extra) or current
    if current is not None and (base is None or base.name != current.name):
        for line in diff_profiles(current, target).lines():
            console.print(f"  {escape(line)}")
    if base is not None:
        report = guard.check(base, target)
        style = "yellow" if report.confounded else "dim"
        for i, line in enumerate(report.lines()):
            console.print(f"[{style}]{escape(line)}[/]" if i == 0 else escape(line))


def _show_outcome(console: "Console", host: str, outcome: "SwapOutcome") -> None:
    from rich.markup import escape  # lazily, as in _run

    from kimitui.sglang.preflight import HOST_SGLANG

    timings = ", ".join(f"{k} {v:.1f}s" for k, v in outcome.phases.items())
    for warning in outcome.warnings:
        if HOST_SGLANG in warning:
            console.print(f"[yellow]warning[/]: {escape(warning)}")
    if outcome.sglang_version:
        console.print(f"[dim]SGLang on {escape(host)}: {escape(outcome.sglang_version)}[/]")
    if outcome.ok:
        console.print(f"[green]{escape(outcome.target)} serving on {escape(host)}[/] ({escape(timings)})")
    elif outcome.outcome == "rolled_back":
        console.print(f"[red]swap to {escape(outcome.target)} failed[/]: {escape(outcome.reason)}")
        console.print(f"[yellow]rolled back: {escape(outcome.serving or '?')} is serving again[/] ({escape(timings)})")
    elif outcome.outcome == "rollback_failed":
        console.print(f"[red]swap to {escape(outcome.target)} failed and the rollback failed too[/]: {escape(outcome.reason)}")
    else:
        console.print(f"[red]swap to {escape(outcome.target)} failed[/]: {escape(outcome.reason)}")
    for line in outcome.log_excerpt:
        console.print(f"  [dim]|[/] {escape(line)}")
