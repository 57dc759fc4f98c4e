"""``kimitui status [--host H] [--json]``: what runs, since when, healthy or not, and drift.

Drift: where the running server's effective args (``/server_info``) differ from
the profile that was meant to run.  Exit 0 when a server runs and is healthy,
1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from kimitui.host.base import Host


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("status", help="what runs on the host, since when, and drift from its profile")
    p.add_argument("--host", metavar="NAME", help="configured host (default: the first one, else the simulated host 'sim')")
    p.add_argument("--unit", metavar="NAME", help="systemd unit to look at (default: sglang)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command module is imported to build the parser,
    # and `kimitui --help` should not pay for rich and the launchers.
    from rich.console import Console

    from kimitui.commands.common import console_errors, on_host

    console = Console(highlight=False, soft_wrap=True)  # a path is never split from its label: the terminal wraps
    return asyncio.run(on_host(args, lambda host: _report(console, host, args), console_errors(console)))


def _ago(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


async def collect(
    host: Host, *, unit: str | None = None, extra_dirs: list[str] | None = None, state_dir: str | None = None
) -> dict[str, Any]:
    """Everything ``status`` reports, as a dict (the tests read it too).

    ``last_swap``: how the last swap on the host ended, from its supervisor's
    record, so a swap whose controller died or detached is named.
    """
    import httpx  # lazily, as in run

    from kimitui.launcher.drift import drift, fetch_server_info
    from kimitui.launcher.http_ready import client
    from kimitui.launcher.profiles import load
    from kimitui.launcher.select import find_running
    from kimitui.launcher.reach import reach_server

    found = await find_running(host, unit=unit, state_dir=state_dir)
    out: dict[str, Any] = {"host": host.name, "running": found is not None}
    await _last_swap(host, out, state_dir)
    if found is None:
        return out
    launcher, record = found
    url = await reach_server(host, record.extra.get("bind_host"), record.port)
    out.update(
        profile=record.profile,
        launcher=launcher.kind,
        pid=record.pid,
        unit=record.unit,
        since=record.started_at,
        uptime_s=round(time.time() - record.started_at, 1),
        url=url,
        log=record.log_path or (f"journalctl -u {record.unit}" if record.unit else None),
    )
    if record.deployment:
        out["deployment"] = record.deployment
        out["processes"] = [{"role": m.role, "node": m.node, "pid": m.pid, "port": m.port, "log": m.log_path}
                            for m in [*record.members, record]]
    try:
        async with client(url, 5.0) as http:
            out["health"] = (await http.get(f"{url}/health")).status_code
    except httpx.HTTPError as exc:
        out["health"] = None
        out["health_error"] = f"{type(exc).__name__}: {exc}"
    try:
        info = await fetch_server_info(url)
    except (httpx.HTTPError, ValueError) as exc:
        out["drift_error"] = f"/server_info unavailable: {type(exc).__name__}: {exc}"
        return out
    out["version"] = info.get("version")
    try:
        profile = load(record.profile_path or record.profile, extra_dirs)
    except Exception as exc:  # noqa: BLE001 - a missing profile is reported, not raised
        out["drift_error"] = f"cannot load profile {record.profile}: {exc}"
        return out
    out["drift"] = drift(profile, info)
    return out


async def _last_swap(host: Host, out: dict[str, Any], state_dir: str | None) -> None:
    from kimitui.host.base import HostError  # lazily, as in run
    from kimitui.launcher.base import LaunchError
    from kimitui.launcher.process import ProcessLauncher
    from kimitui.launcher.select import is_simulated_host
    from kimitui.launcher.supervisor import describe, last_swap

    try:
        directory = await ProcessLauncher(host, simulated=is_simulated_host(host), state_dir=state_dir).state_dir()
        last = await last_swap(host, directory)
    except (HostError, LaunchError):
        return
    if last is not None:
        out["last_swap"] = last
        out["last_swap_text"] = describe(last, running=out["running"])


async def _report(console: Console, host: Host, args: argparse.Namespace) -> int:
    info = await collect(host, unit=args.unit, extra_dirs=list(args.profiles or []))
    if args.json:
        print(json.dumps(info, default=str))
    else:
        _print(console, info)
    return 0 if info.get("running") and info.get("health") == 200 else 1


def _print(console: Console, info: dict[str, Any]) -> None:
    from rich.markup import escape  # lazily, as in run

    host = escape(info["host"])
    if not info["running"]:
        console.print(f"{host}: nothing kimitui started is running")
        if info.get("last_swap_text"):
            console.print(f"  {escape(info['last_swap_text'])}")
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["since"]))
    console.print(
        f"{host}: [bold]{escape(info['profile'])}[/] via {info['launcher']}"
        f" (pid {info.get('pid')}) since {since} ({_ago(info['uptime_s'])} ago)"
    )
    health = info.get("health")
    state = "[green]healthy[/]" if health == 200 else f"[red]not healthy[/] ({escape(str(health or info.get('health_error')))})"
    console.print(f"  {escape(info['url'])}: {state}" + (f", SGLang {escape(str(info['version']))}" if info.get("version") else ""))
    if info.get("log"):
        console.print(f"  log: {escape(info['log'])}")
    for proc in info.get("processes") or []:
        where = f" on {proc['node']}" if proc.get("node") else ""
        console.print(f"  {escape(str(proc['role']))}{escape(where)}: pid {proc.get('pid')}"
                      + (f", port {proc['port']}" if proc.get("port") else "") + f", log {escape(str(proc.get('log')))}")
    if info.get("last_swap_text"):
        console.print(f"  {escape(info['last_swap_text'])}")
    if "drift" in info:
        if info["drift"]:
            console.print(f"  [yellow]drift[/]: the server runs differently from profile {escape(info['profile'])}:")
            for knob, (meant, running) in info["drift"].items():
                console.print(f"    {escape(knob)}: profile {escape(repr(meant))}, server {escape(repr(running))}")
        else:
            console.print("  no drift: the server runs with the profile's args")
    elif info.get("drift_error"):
        console.print(f"  [dim]{escape(info['drift_error'])}[/]")
