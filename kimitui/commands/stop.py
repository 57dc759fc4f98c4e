"""``kimitui stop [--host H] [--yes]``: stop the server kimitui started on a host.

Only a server kimitui itself started (its run record: pid, start time, run id;
or its systemd unit) is stopped.  Exit 0 when nothing runs afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from kimitui.host.base import Host
    from kimitui.launcher.base import Launcher, RunRecord


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("stop", help="stop the server kimitui started on the host")
    p.add_argument("--host", metavar="NAME", help="configured host (default: the first one, else the simulated host 'sim')")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--unit", metavar="NAME", help="systemd unit to look at (default: sglang)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command module is imported to build the parser,
    # and `kimitui --help` should not pay for rich and the launchers.
    from rich.console import Console

    from kimitui.commands.common import console_errors, on_host

    console = Console(highlight=False)
    return await on_host(args, lambda host: _stop(console, host, args), console_errors(console))


async def _stop(console: Console, host: Host, args: argparse.Namespace) -> int:
    from rich.markup import escape  # lazily, as in _run

    from kimitui.launcher.base import LaunchError
    from kimitui.launcher.select import find_running

    found = await find_running(host, unit=args.unit)
    if found is None:
        console.print(f"{escape(host.name)}: nothing kimitui started is running")
        return 0
    launcher, running = found
    if not args.yes:
        if not sys.stdin.isatty():
            console.print("[red]not confirmed[/]: stdin is not a terminal; pass --yes to stop without asking")
            return 1
        if console.input(f"stop {running.profile} on {host.name}? [y/N] ").strip().lower() not in ("y", "yes"):
            return 1
    if running.deployment:
        return await _stop_deployment(console, host, launcher, running, args)
    try:
        how = await launcher.stop(running)
    except LaunchError as exc:
        console.print(f"[red]error[/]: {escape(str(exc))}")
        return 1
    console.print(f"{escape(host.name)}: {escape(running.profile)} stopped ({escape(how)})")
    return 0


async def _stop_deployment(console: Console, host: Host, launcher: Launcher, running: RunRecord,
                           args: argparse.Namespace) -> int:
    """Every process of a deployment (the other nodes' through the config's hosts), at once."""
    from rich.markup import escape  # lazily, as in _run

    from kimitui.host.base import HostError
    from kimitui.launcher.base import LaunchError
    from kimitui.launcher.deploy import Nodes, running_members, stop_members
    from kimitui.launcher.nodes import NodeHosts

    nodes = NodeHosts(host, getattr(args, "config", None))
    try:
        members = await running_members(Nodes(launcher, nodes), running)
        errors = await stop_members(members, grace_s=float(running.extra.get("stop_grace_s") or 10.0))
    except (LaunchError, HostError) as exc:
        errors = [str(exc)]
        members = []
    finally:
        await nodes.close()
    if errors:
        console.print(f"[red]error[/]: {escape('; '.join(errors))}")
        return 1
    roles = ", ".join(m.tag for m in members)
    console.print(f"{escape(host.name)}: {escape(running.profile)} stopped ({len(members)} processes: {escape(roles)})")
    return 0
