"""Run a command while N busy-loop processes keep N cores at 100 %: the suite on a loaded box.

    python tests/support/busy.py 2 -- .venv/bin/python -m pytest -q tests/test_client_timing.py

A test that passes only on an idle machine is a test of the machine; this makes the busy
machine repeatable.  The loops run at normal priority (no nice), are started before the
command and killed (and reaped) after it, whatever way it ends; the command's exit status
is this script's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import signal
import subprocess
import sys


def _spin() -> None:
    """One core's worth of work, until killed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the command's; the loops end when it does
    while True:
        pass


def run_busy(n: int, argv: list[str]) -> int:
    """Start n spinners, run argv to its end, stop the spinners; argv's exit status."""
    ctx = multiprocessing.get_context("spawn")
    spinners = [ctx.Process(target=_spin, name=f"busy-{i}", daemon=True) for i in range(n)]
    for p in spinners:
        p.start()
    child: subprocess.Popen[bytes] | None = None

    def on_term(signum: int, _frame: object) -> None:  # an outer `timeout` or kill: nothing stays busy
        if child is not None and child.poll() is None:
            child.terminate()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        child = subprocess.Popen(argv)
        return child.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.join(5)


def main(args: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="busy.py N -- COMMAND [ARG ...]")
    ap.add_argument("n", type=int, help="busy-loop processes to run (one keeps one core busy)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    ns = ap.parse_args(args)
    argv = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if ns.n < 0:
        ap.error(f"N must be 0 or more, not {ns.n}")
    if not argv:
        ap.error("no command: busy.py N -- COMMAND [ARG ...]")
    return run_busy(ns.n, argv)


if __name__ == "__main__":
    sys.exit(main())
