"""``kimitui sweep --host NAME``: the headless sweep with the host's telemetry beside it, as the cockpit has.

The host named (a configured one, ``sim`` for the embedded simulated host, ``local``) is connected; its
GPUs are streamed by the NVML agent and the server kimitui runs there is followed (its log, its
metrics), all into the sweep's session, so the recording carries GPU samples, log lines and EPLB's
rebalances beside every request: the levels get their power and energy, the stragglers their causes.
The URL is the followed server's (reached through the link when it listens on the host's loopback)
unless ``--url`` names one.  Before the first level the GPUs are streamed for ``--idle-s`` seconds, so
the idle power the energy figures are read against is measured.

A host that cannot be reached, an unknown name or no server (and no ``--url``) exits 2 with one line.
A link lost mid-sweep does not stop the sweep (:mod:`kimitui.live.headless_host` says when telemetry
stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from kimitui.config import ConfigError, load_config
from kimitui.events import SweepSpec
from kimitui.host.base import HostError
from kimitui.hosts_from_config import make_host
from kimitui.live.headless_host import HeadlessHost
from kimitui.live.profiles import ProfileBook
from kimitui.session import Session

PROG = "kimitui sweep"
EXIT_BAD_ARGS = 2
IDLE_S = 10.0
"""Seconds of GPU samples before the first level: the idle power is read over them (at least 3 s count)."""


def run_on_host(spec: SweepSpec, args: argparse.Namespace) -> int:
    return asyncio.run(sweep_on_host(spec, args))


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_BAD_ARGS


async def sweep_on_host(spec: SweepSpec, args: argparse.Namespace, *, host_factory: object = None,
                        gpu_interval: float | None = None, session: Session | None = None) -> int:
    """Connect, stream, follow, sweep, close.  ``host_factory``: a test's own host (``() -> Host``) instead of
    the config's; ``gpu_interval``: the agent's tick (default the cockpit's); ``session``: one to publish into
    (a test's, to watch the sweep), else a new one named after the host."""
    from kimitui.commands.sweep import _run  # the sweep itself, shared with --url

    try:
        config = load_config(getattr(args, "config", None))
        host = host_factory() if callable(host_factory) else make_host(config, args.host, None)
    except (ConfigError, ValueError) as exc:
        return _fail(str(exc))
    session = session if session is not None else Session(host=host.name)
    session.bind_loop(asyncio.get_running_loop())
    host.set_event_callback(session.publish)
    entry = config.hosts.get(host.name)
    telemetry = HeadlessHost(host, session, profiles=ProfileBook(list(getattr(args, "profiles", None) or [])),
                             python=(entry.python if entry is not None else None) or "python3",
                             gpu_interval=gpu_interval)
    try:
        try:
            await host.connect()
        except HostError as exc:
            return _fail(f"cannot connect to host {host.name!r}: {exc}")
        await telemetry.start_gpus()
        try:
            serving = await telemetry.follow_server()
        except HostError as exc:
            return _fail(f"cannot tell what runs on host {host.name!r}: {exc}")
        if serving is None and not spec.url:
            hint = "" if host.name == "sim" else f" --host {host.name}"
            return _fail(f"no server kimitui started runs on host {host.name!r} (start one with `kimitui swap "
                         f"PROFILE{hint}` or the cockpit, or pass --url)")
        if not spec.url and serving is not None:
            spec = spec.model_copy(update={"url": serving.url})
        if args.profile is None and serving is not None:
            args.profile = serving.profile
        if not spec.model:
            from kimitui.loadgen.sweep import resolve_model

            try:
                spec = spec.model_copy(update={"model": await resolve_model(spec.url)})
            except Exception as exc:
                return _fail(f"cannot ask {spec.url} for the model: {str(exc) or type(exc).__name__}; pass --model")
        idle_s = IDLE_S if getattr(args, "idle_s", None) is None else args.idle_s

        async def before() -> None:
            """In the recording: what serves there, then the idle GPUs for ``idle_s``."""
            if telemetry.found is not None:
                session.publish(telemetry.found)
            if idle_s > 0:
                if not args.json or sys.stderr.isatty():
                    print(f"{PROG}: measuring {host.name}'s idle power for {idle_s:g} s", file=sys.stderr)
                await asyncio.sleep(idle_s)

        return await _run(spec, args, session=session, host_name=host.name, before=before)
    finally:
        await telemetry.close()
