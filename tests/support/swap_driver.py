"""A swap controller as its own process, for the SIGKILL tests.

Runs ``kimitui.launcher.swap`` on the simulated host (locally, or through the
in-process SSH server given ``--ssh JSON``) and prints each event as a JSON
line.  ``--pause-at KEY`` freezes the whole process (a blocking sleep inside
the event sink, so nothing else happens) right after the first event with that
key, prints ``PAUSED``, and waits to be killed: the kill lands exactly at that
moment of the swap.  Keys: ``<role>:<state|progress>:<state or phase>``,
role ``target`` or ``prev`` (e.g. ``prev:state:stopping``, ``target:progress:weights``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time


def key_of(event, target: str) -> str | None:
    role = "target" if getattr(event, "profile", None) == target else "prev"
    if event.kind == "profile_state":
        return f"{role}:state:{event.state}"
    if event.kind == "swap_progress":
        return f"{role}:progress:{event.phase}"
    return None


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("--state", required=True)
    p.add_argument("--ssh")
    p.add_argument("--pause-at")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--systemd-units", metavar="DIR", help="swap with the SystemdLauncher, its units in DIR")
    p.add_argument("--unit", default="sglang")
    args = p.parse_args()

    from kimitui.host.base import Host
    from kimitui.host.local import LocalHost
    from kimitui.launcher.base import Launcher
    from kimitui.launcher.process import ProcessLauncher
    from kimitui.launcher.profiles import load
    from kimitui.launcher.swap import SwapOptions, swap
    from kimitui.session import Session

    host: Host
    if args.ssh:
        from kimitui.host.ssh import SSHHost

        host = SSHHost("sim", **json.loads(args.ssh))
    else:
        host = LocalHost("sim")
    target = load(args.target)
    session = Session(host="sim")
    paused = False

    def sink(event) -> None:
        nonlocal paused
        key = key_of(event, target.name)
        print(json.dumps({"key": key, "kind": event.kind}), flush=True)
        if key is not None and key == args.pause_at and not paused:
            paused = True
            print("PAUSED", flush=True)
            time.sleep(120)  # frozen here until SIGKILL

    session.add_sink(sink)
    # the link's own states (lost, and why) in the same output: a test told "the controller ended" reads why
    host.set_event_callback(lambda ev: print(json.dumps({"link": getattr(ev, "state", None),
                                                         "detail": getattr(ev, "detail", "")}), flush=True))
    async with host:
        launcher: Launcher
        if args.systemd_units:
            from kimitui.launcher.systemd import SystemdLauncher

            launcher = SystemdLauncher(host, unit_dir=args.systemd_units, state_dir=args.state, simulated=True,
                                       unit=args.unit)
        else:
            launcher = ProcessLauncher(host, simulated=True, state_dir=args.state)
        options = SwapOptions(timeout=args.timeout, rollback_timeout=args.timeout)
        out = await swap(host, target, options, session=session, launcher=launcher)
    print(json.dumps({"outcome": out.outcome, "serving": out.serving, "reason": out.reason}), flush=True)
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
