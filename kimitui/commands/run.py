"""``kimitui [--host NAME ...] [--url URL] [--sim-port N] [--record PATH | --no-record] [--metrics-port P]``: open the
cockpit on a live host."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kimitui.export import MetricsServer
    from kimitui.live import FleetController, LiveController


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("run", help="open the cockpit (the default command)",
                              description="Open the cockpit. With no hosts configured it runs on the "
                                          "embedded simulated host 'sim'.")
    p.add_argument("--host", metavar="NAME", action="append",
                   help="a host from the config file (default: [fleet] hosts, else the first, or 'sim'); "
                        "repeat it for a fleet: several hosts in one session (docs/fleet.md)")
    p.add_argument("--url", metavar="URL",
                   help="watch a server kimitui did not start (metrics, health, sweeps; never swapped), "
                        "e.g. http://127.0.0.1:30000; its GPUs are read on --host (default: this machine)")
    from kimitui.cli import port_number  # noqa: PLC0415 - kimitui.cli imports this module to build its parser

    p.add_argument("--sim-port", metavar="N", type=port_number, default=argparse.SUPPRESS,
                   help="the simulated host's profiles serve on port N (overrides [sim] port in the config)")
    rec = p.add_mutually_exclusive_group()
    rec.add_argument("--record", metavar="PATH", help="write the session recording here")
    rec.add_argument("--no-record", action="store_true", help="do not record this session")
    p.add_argument("--metrics-port", metavar="P", type=port_number, default=None,
                   help="serve kimitui's figures for Prometheus on port P (overrides [metrics] port; "
                        "docs/prometheus.md)")
    p.add_argument("--metrics-addr", metavar="A", default=None,
                   help="the address the metrics endpoint listens on (default: [metrics] addr, else 127.0.0.1)")
    p.add_argument("--otlp-endpoint", metavar="URL", default=None,
                   help="send each finished sweep as a trace to this OpenTelemetry collector (OTLP/HTTP, e.g. "
                        "http://127.0.0.1:4318; overrides [otlp] endpoint; docs/prometheus.md)")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    """Build the live controller and run the app.

    Both are imported here, not at the top: every command module is imported to build the
    parser, and the others should not pay for Textual, hosts, telemetry and sweeps."""
    from kimitui.tui.app import run_app  # noqa: PLC0415

    try:
        controller = make_controller(args)
    except Exception as exc:  # a bad config or host must read as one clear line, not a traceback
        print(f"kimitui: cannot start the cockpit: {exc}", file=sys.stderr)
        return 2
    from kimitui.export import MetricsPortError  # noqa: PLC0415

    try:
        metrics = start_metrics(args, controller)
    except MetricsPortError as exc:  # a port in use is one clear line, not a traceback
        print(f"kimitui: {exc} (--metrics-port / [metrics] port)", file=sys.stderr)
        return 2
    if metrics is not None:
        print(f"kimitui: metrics for Prometheus at {metrics.url}", file=sys.stderr)
    from kimitui.commands.common import start_otlp_if_asked  # noqa: PLC0415

    otlp = start_otlp_if_asked(args, controller.session, controller.config)
    try:
        rc = run_app(controller, config_keys=_config_keys(controller))
    finally:
        if metrics is not None:
            metrics.close()
        if otlp is not None:
            otlp.close()
    saved = controller.last_recording_path
    if saved is not None:  # after quitting: the recording's final name on disk
        print(f"kimitui: recording saved to {saved}", file=sys.stderr)
    return rc


def make_controller(args: argparse.Namespace) -> LiveController | FleetController:
    """One host's controller, or a fleet's when several hosts are named (``--host`` twice, or ``[fleet] hosts``)."""
    from kimitui.config import load_config  # noqa: PLC0415
    from kimitui.live import FleetController, LiveController  # noqa: PLC0415

    config_path = getattr(args, "config", None)
    hosts = list(args.host or [])
    if not hosts and args.url is None:
        hosts = list(load_config(config_path).fleet.hosts)
    if len(hosts) > 1:
        if args.url is not None:
            raise ValueError("--url watches one server: name one --host with it")
        if getattr(args, "sim_port", None) is not None:
            raise ValueError("--sim-port is one simulated host's: in a fleet set each host's `sim_port` in the config")
        return FleetController(hosts, config_path=config_path, profile_dirs=getattr(args, "profiles", None),
                               record_path=args.record, record=not args.no_record)
    return LiveController(
        config_path=config_path,
        host=hosts[0] if hosts else None,
        profile_dirs=getattr(args, "profiles", None),
        record_path=args.record,
        record=not args.no_record,
        watch_url=args.url,
        sim_port=getattr(args, "sim_port", None),
    )


def start_metrics(args: argparse.Namespace, controller: LiveController | FleetController) -> MetricsServer | None:
    """The Prometheus endpoint ``--metrics-port`` or ``[metrics] port`` asks for (the flag wins), its exporter
    sinking the live controller's session; None when neither asks.  Raises ``MetricsPortError``."""
    from kimitui.export import start_metrics as serve_session  # noqa: PLC0415

    conf = controller.config.metrics
    flag = getattr(args, "metrics_port", None)
    port = flag if flag is not None else conf.port
    if port is None:
        return None
    return serve_session(controller.session, port, getattr(args, "metrics_addr", None) or conf.addr,
                         rates=controller.config.cost.rates())  # [cost]: each level's cost per M tokens too


def _config_keys(controller: LiveController | FleetController) -> dict[str, str]:
    """The config's ``[keys]`` table (binding name -> key)."""
    return dict(controller.config.keys)
