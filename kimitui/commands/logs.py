"""``kimitui logs``: SGLang server logs without the cockpit.

- ``kimitui logs parse``: log lines on stdin -> one JSON LogLine event per line.
- ``kimitui logs follow``: follow the server's log on a host (its journal unit or
  log file; by default whatever kimitui started there) and print each line, or
  each event as JSON, resuming across dropped links like the cockpit does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING

from kimitui.events import ErrorEvent, Event, LogLine, dump_event
from kimitui.sglang.log import to_event

if TYPE_CHECKING:
    from kimitui.host.base import Host
    from kimitui.launcher.base import Launcher, RunRecord


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("logs", help="parse or follow SGLang server logs")
    sub = parser.add_subparsers(dest="logs_command", metavar="ACTION", required=True)
    p = sub.add_parser("parse", help="parse log lines from stdin, print one JSON event per line")
    p.add_argument("--host", default="local", help="host name to put on the events (default: local)")
    p.add_argument("--source", default="stdin", help="source name to put on the events")
    p.set_defaults(func=_parse)

    f = sub.add_parser("follow", help="follow the server log on a host (Ctrl-C to stop)")
    f.add_argument("--host", metavar="NAME", help="configured host (default: the first one, else 'sim')")
    where = f.add_mutually_exclusive_group()
    where.add_argument("--unit", metavar="UNIT", help="systemd unit: journalctl -u UNIT")
    where.add_argument("--path", metavar="FILE", help="log file on the host: tail -F FILE")
    f.add_argument("--from-cursor", metavar="CURSOR", help="resume after this journal cursor or file line number")
    f.add_argument("--backlog", type=int, default=20, metavar="N", help="lines of history to show first (default 20)")
    f.add_argument("--json", action="store_true", help="print each event (LogLine, ServerStats, errors) as JSON")
    f.set_defaults(func=_follow)


def _parse(args: argparse.Namespace) -> int:
    out = sys.stdout
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", newline="\n", closefd=False)
    try:
        for lineno, line in enumerate(stdin, 1):
            event = to_event(line, host=args.host, source=args.source, cursor=str(lineno))
            out.write(dump_event(event) + "\n")
    except BrokenPipeError:  # `kimitui logs parse | head` is fine
        return 0
    except KeyboardInterrupt:
        return 130
    out.flush()
    return 0


def _follow(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_follow_async(args))
    except KeyboardInterrupt:
        return 130


def _report_error(exc: BaseException) -> None:
    print(f"kimitui logs follow: {exc}", file=sys.stderr)


async def _follow_async(args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command module is imported to build the parser,
    # and `kimitui --help` should not pay for rich, the launchers and the host factory (~0.2 s).
    from kimitui.commands.common import on_host

    return await on_host(args, lambda host: _follow_on(host, args), _report_error)


async def _follow_on(host: Host, args: argparse.Namespace) -> int:
    from kimitui.launcher.select import find_running  # lazily, as in _follow_async
    from kimitui.session import Session
    from kimitui.telemetry.logs import LogFollower

    unit, path, cursor = args.unit, args.path, args.from_cursor
    if unit is None and path is None:
        found: tuple[Launcher, RunRecord] | None = None
        with contextlib.suppress(Exception):
            found = await find_running(host)
        if found is None:
            print(f"kimitui logs follow: nothing kimitui started runs on {host.name}; give --unit or --path",
                  file=sys.stderr)
            return 1
        record = found[1]
        unit = record.unit if record.launcher == "systemd" else None
        path = record.log_path if unit is None else None
    session = Session(host=host.name)
    session.add_sink(lambda ev: _print(ev, args.json))
    follower = LogFollower(host, session, unit=unit, path=path, from_cursor=cursor, backlog=args.backlog)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await follower.start()
    try:
        await stop.wait()
    finally:
        await follower.stop()
    if follower.cursor is not None:
        print(f"kimitui logs follow: stopped; resume with --from-cursor {follower.cursor!r}", file=sys.stderr)
    return 0


def _print(event: Event, as_json: bool) -> None:
    try:
        if as_json:
            sys.stdout.write(dump_event(event) + "\n")
        elif isinstance(event, LogLine):
            sys.stdout.write(event.raw + "\n")
        elif isinstance(event, ErrorEvent):
            sys.stderr.write(f"kimitui: {event.message} {event.detail}".rstrip() + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise SystemExit(0) from None
