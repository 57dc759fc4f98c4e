"""``kimitui replay FILE [--speed X]``: the cockpit, fed by a recording.

``--info`` prints what the recording holds (no TUI); ``--at`` opens at a time.  A file that is not a
readable recording prints ``file: line N: ...`` on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import datetime

from kimitui.config import Config, ConfigError, load_config
from kimitui.events import ErrorEvent
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


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("replay", help="open the cockpit on a recording (play, pause, seek, jump)")
    p.add_argument("file", metavar="FILE", help="a recording (.jsonl or .jsonl.gz)")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help="playback speed factor, 1..100 (or 'max' for as fast as possible); default 1")
    p.add_argument("--paused", action="store_true", help="open paused")
    p.add_argument("--at", metavar="HH:MM[:SS]|+SECONDS",
                   help="open at this time of the recording (wall clock, or seconds after its start)")
    p.add_argument("--info", action="store_true", help="print what the recording holds and exit (no TUI)")
    p.set_defaults(func=run)


def parse_at(text: str, index: RecordingIndex) -> float:
    """``+90`` = 90 s after the first event; ``10:41:07`` = that local time on the recording's day
    (or the next day, for a recording that runs past midnight).  Raises ValueError with the reason."""
    text = text.strip()
    if text.startswith("+"):
        try:
            return index.start + float(text[1:])
        except ValueError:
            raise ValueError(f"--at {text!r}: '+' takes seconds, like +90") from None
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            clock = datetime.strptime(text, fmt).time()
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"--at {text!r}: a time like 10:41:07, or +SECONDS after the start")
    day = datetime.fromtimestamp(index.start).date()
    t = datetime.combine(day, clock).timestamp()
    if t < index.start - 1:
        t += 86_400
    if not index.start - 1 <= t <= index.end + 1:
        raise ValueError(f"--at {text!r}: the recording runs {_stamp(index.start)} .. {_stamp(index.end)}")
    return t


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def info_lines(index: RecordingIndex) -> list[str]:
    """A plain-text summary of a recording: span, hosts, event counts, skipped lines.

    Every line is parsed first (``RecordingIndex.verify``), so the counts and the skipped lines are
    the ones ``report`` reads, not what the lines' prefixes promise."""
    h = index.header
    good = index.verify()
    lines = [
        f"recording  {index.path}",
        f"format     {h.format} v{h.version} (kimitui {h.kimitui})",
        f"hosts      {', '.join(h.hosts) or '-'}",
        f"span       {_stamp(index.start)} .. {_stamp(index.end)} ({index.end - index.start:.1f} s)",
        f"events     {good}",
    ]
    kinds = Counter(_counted_as(index, i, k) for i, k in enumerate(index.kinds) if index.good(i))
    for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {kind:<16} {n}")
    for s in index.skipped:
        lines.append(f"skipped    line {s.line_no}: {s.reason}")
    return lines


def _counted_as(index: RecordingIndex, i: int, kind: str) -> str:
    """An error event's severity for its kind: a warning or a fact (the guard's advisory) is not counted as an error."""
    if kind != "error":
        return kind
    ev = index.event(i)
    return ev.severity if isinstance(ev, ErrorEvent) else kind


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
    start_at = None
    if args.at:
        try:
            start_at = parse_at(args.at, index)
        except ValueError as exc:
            print(f"kimitui replay: {exc}", file=sys.stderr)
            return EXIT_BAD_RECORDING
    # Imported here, not at the top: every command module is imported to build the parser, and only
    # opening the cockpit pays for Textual (an ImportError of it is said in words, see below).
    from kimitui.replay import ReplayController

    try:
        from kimitui.tui.app import run_app
    except ImportError as exc:
        print(f"kimitui replay: the cockpit is not available ({exc}); try --info", file=sys.stderr)
        return 1
    controller = ReplayController(index, speed=args.speed, start_paused=args.paused, start_at=start_at)
    return int(run_app(controller, config=_prices_config(args)) or 0)


def _prices_config(args: argparse.Namespace) -> Config | None:
    """The config whose ``[cost]`` prices and ``[capacity] slo`` the replayed levels are shown with, as
    ``kimitui report`` prices a recording; a broken config is said (file, line, field) and the replay opens
    without them: the recording is what was asked for."""
    try:
        return load_config(getattr(args, "config", None))
    except ConfigError as exc:
        print(f"kimitui replay: {exc}; the levels are shown without prices", file=sys.stderr)
        return None
