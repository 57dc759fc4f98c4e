"""``kimitui sim serve``: run one simulated SGLang server in the foreground.

It logs to stdout/stderr exactly like SGLang (the launcher redirects them),
exits 0 on Ctrl-C/SIGTERM and non-zero when a start-up fault or the hang
watchdog ends it.
"""

from __future__ import annotations

import argparse
import sys

from kimitui.sim.settings import DISAGG_MODES, FAULT_KINDS, TRANSFER_BACKENDS, SimConfigError, load_settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("sim", help="the simulated host: run a simulated SGLang server")
    sim_sub = parser.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    serve = sim_sub.add_parser("serve", help="run a simulated SGLang server for a profile (foreground)")
    serve.add_argument("--profile", required=True, metavar="NAME|PATH", help="profile name or TOML path")
    serve.add_argument("--host", default=None, help="bind address (default: the profile's, normally 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: the profile's; 0 = any free port)")
    serve.add_argument("--time-scale", type=float, default=None, metavar="S", help="run the simulated clock S times faster")
    serve.add_argument("--seed", type=int, default=None, help="seed of every random choice (default: the profile's)")
    serve.add_argument("--fault", choices=FAULT_KINDS, default=None, help="inject a fault")
    serve.add_argument("--fault-rate", type=float, default=None, metavar="R", help="per-request probability for http_500/drop/stall")
    serve.add_argument("--fault-after", type=float, default=None, metavar="SECONDS", help="simulated seconds after ready before 'hang' fires")
    serve.add_argument("--enable-metrics", action="store_true", default=None, help="serve /metrics even if the profile does not enable it")
    _deployment_args(serve)
    serve.set_defaults(func=_serve)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=usage)


def _deployment_args(serve: argparse.ArgumentParser) -> None:
    """Multi-node and PD flags, spelled as SGLang 0.5.23 spells them (docs/pd.md)."""
    serve.add_argument("--nnodes", type=int, default=None, help="nodes the model is split over (default 1)")
    serve.add_argument("--node-rank", type=int, default=None, help="this node's rank (default 0; only rank 0 serves HTTP)")
    serve.add_argument("--dist-init-addr", default=None, metavar="HOST:PORT", help="rank 0's rendezvous address (needed with --nnodes > 1)")
    serve.add_argument("--dist-timeout", type=float, default=None, metavar="SECONDS", help="how long the nodes wait for each other (default 60)")
    serve.add_argument("--base-gpu-id", type=int, default=None, metavar="B", help="first GPU of the host this server owns (default 0)")
    serve.add_argument("--disaggregation-mode", choices=DISAGG_MODES, default=None, help="PD disaggregation role (default null)")
    serve.add_argument("--disaggregation-bootstrap-port", type=int, default=None, metavar="P", help="bootstrap port a prefill server listens on (default 8998)")
    serve.add_argument("--disaggregation-transfer-backend", choices=TRANSFER_BACKENDS, default=None, help="KV transfer backend (default mooncake)")


def _serve(args: argparse.Namespace) -> int:
    from kimitui.sim.server import run_server  # not at the top: uvicorn and starlette only for `sim serve`, not every command

    try:
        settings = load_settings(
            args.profile,
            host=args.host,
            port=args.port,
            time_scale=args.time_scale,
            seed=args.seed,
            fault=args.fault,
            fault_rate=args.fault_rate,
            fault_after_s=args.fault_after,
            enable_metrics=args.enable_metrics,
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            dist_init_addr=args.dist_init_addr,
            dist_timeout=args.dist_timeout,
            base_gpu_id=args.base_gpu_id,
            disaggregation_mode=args.disaggregation_mode,
            disaggregation_bootstrap_port=args.disaggregation_bootstrap_port,
            disaggregation_transfer_backend=args.disaggregation_transfer_backend,
        )
    except SimConfigError as exc:
        print(f"kimitui sim serve: {exc}", file=sys.stderr)
        return 2
    if settings.node_rank > 0:
        from kimitui.sim.multinode import run_peer_node  # a node rank >= 1 serves no HTTP

        return run_peer_node(settings)
    return run_server(settings)
