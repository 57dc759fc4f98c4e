"""``kimitui replay FILE [--speed X]``: the cockpit, fed by a recording.

``--info`` prints what the recording holds (no TUI).  A file that is not a
readable recording prints ``file: line N: ...`` on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import datetime

from kimitui.recording import RecordingError, RecordingIndex

EXIT_BAD_RECORDING = 2


def _speed(text: str) -> float | None:
    if text.lower() in ("max", "fast", "inf"):
        return None
    try:
        value = float(text.rstrip("xX"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed {text!r}: a factor like 1, 10x, 100 or 'max'") from None
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"speed {text!r}: must be > 0 and <= 1000")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("replay", help="open the cockpit on a recording (play, pause, seek, jump)")
    p.add_argument("file", metavar="FILE", help="a recording (.jsonl or .jsonl.gz)")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help="playback speed factor, 1..100 (or 'max' for as fast as possible); default 1")
    p.add_argument("--paused", action="store_true", help="open paused at the start")
    p.add_argument("--info", action="store_true", help="print what the recording holds and exit (no TUI)")
    p.set_defaults(func=run)


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def info_lines(index: RecordingIndex) -> list[str]:
    """A plain-text summary of a recording: span, hosts, event counts, skipped lines."""
    h = index.header
    lines = [
        f"recording  {index.path}",
        f"format     {h.format} v{h.version} (kimitui {h.kimitui})",
        f"hosts      {', '.join(h.hosts) or '-'}",
        f"span       {_stamp(index.start)} .. {_stamp(index.end)} ({index.end - index.start:.1f} s)",
        f"events     {len(index)}",
    ]
    for kind, n in sorted(Counter(index.kinds).items(), key=lambda kv: -kv[1]):
        lines.append(f"  {kind:<16} {n}")
    for s in index.skipped:
        lines.append(f"skipped    line {s.line_no}: {s.reason}")
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        index = RecordingIndex.open(args.file)
    except RecordingError as exc:
        print(f"kimitui replay: {exc}", file=sys.stderr)
        return EXIT_BAD_RECORDING
    if args.info:
        print("\n".join(info_lines(index)))
        return 0
    for s in index.skipped:
        print(f"kimitui replay: {index.path}: line {s.line_no} skipped: {s.reason}", file=sys.stderr)
    from kimitui.replay import ReplayController

    try:
        from kimitui.tui.app import run_app
    except ImportError as exc:
        print(f"kimitui replay: the cockpit is not available ({exc}); try --info", file=sys.stderr)
        return 1
    return int(run_app(ReplayController(index, speed=args.speed, start_paused=args.paused)) or 0)
