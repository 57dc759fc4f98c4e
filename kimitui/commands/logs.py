"""``kimitui logs parse``: SGLang log lines on stdin -> one JSON LogLine event per line."""

from __future__ import annotations

import argparse
import sys

from kimitui.events import dump_event
from kimitui.telemetry.logparse import to_event


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("logs", help="work with SGLang server logs")
    sub = parser.add_subparsers(dest="logs_command", metavar="ACTION", required=True)
    p = sub.add_parser("parse", help="parse log lines from stdin, print one JSON event per line")
    p.add_argument("--host", default="local", help="host name to put on the events (default: local)")
    p.add_argument("--source", default="stdin", help="source name to put on the events")
    p.set_defaults(func=_parse)


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
