"""A profile as the processes of its deployment: one server, the nodes of a multi-node server, or PD.

:func:`deployment` is the one place that says which processes a profile runs, where, with
which command, and which of them is the entry (readiness and clients go through it):

- one server (the usual profile): role ``server``, the entry, on the home host;
- ``nodes = [A, B, ...]``: role ``node-i`` on host ``nodes[i]`` (node 0 on the home host),
  each with ``--nnodes N --node-rank i --dist-init-addr ADDR``; node 0 is the entry;
- ``[pd]``: ``prefill-i`` and ``decode-i`` servers (``--disaggregation-mode ...``) and the
  ``router`` on the profile's own port, the entry.

See docs/deployments.md.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kimitui.profiles.render import knob_args, render_argv, shell_line
from kimitui.profiles.schema import PD_BOOTSTRAP_PORT, PdServer, Profile

ROUTER_MODULE = "sglang_router.launch_router"
SIM_ROUTER_MODULE = "kimitui.sim.router"


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a deployment: what runs, where, and what it answers on."""

    role: str
    """``server``; ``node-0``, ``node-1``...; ``prefill-0``, ``decode-0``..., ``router``."""
    node: str | None
    """The configured host it runs on; None: the deployment's home host."""
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    """Where it answers HTTP (None: it serves none itself, e.g. a rank > 0)."""
    bind_host: str = "127.0.0.1"
    entry: bool = False
    """Readiness is judged on it (``/health``, the warm-up); clients and sweeps go through it."""
    waits_ready: bool = True
    """Its log must say "ready to roll" before the deployment counts as ready (an SGLang server)."""
    gpus: tuple[int, ...] = ()
    """The GPU indices it uses on its host (for lint)."""
    run_key: str | None = None
    """Its folder in the host's state dir (default: its port)."""

    @property
    def where(self) -> str:
        return self.node or "home"


def _gpus(first: int, count: int | None) -> tuple[int, ...]:
    return tuple(range(first, first + (count or 1)))


def _addr(host: str) -> str:
    """A bind address as a client reaches it (a wildcard bind answers on loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "", "localhost") else host


def _server_argv(profile: Profile, *, simulated: bool, python: str | None, sim_args: Sequence[str],
                 extra: Sequence[str]) -> list[str]:
    """One SGLang server of the deployment: the profile's command (or the simulator's) plus ``extra`` flags."""
    if simulated:
        return [*render_argv(profile, simulated=True, python=python), *extra, *sim_args]
    argv = render_argv(profile, python=python)
    n_extra = len(profile.extra_args)
    head, tail = argv[: len(argv) - n_extra], argv[len(argv) - n_extra:]
    return [*head, *extra, *tail]


def _multinode(profile: Profile, *, simulated: bool, python: str | None, sim_args: Sequence[str]) -> list[ProcessSpec]:
    n = len(profile.nodes)
    specs: list[ProcessSpec] = []
    for rank, node in enumerate(profile.nodes):
        extra = ["--nnodes", str(n), "--node-rank", str(rank), "--dist-init-addr", str(profile.dist_init_addr)]
        argv = _server_argv(profile, simulated=simulated, python=python, sim_args=sim_args, extra=extra)
        per_node = (profile.tp_size or n) // n
        specs.append(ProcessSpec(
            role=f"node-{rank}", node=None if rank == 0 else node, argv=argv, env=dict(profile.env),
            port=profile.port if rank == 0 else None, bind_host=profile.host, entry=rank == 0,
            waits_ready=rank == 0, gpus=_gpus(0, max(1, per_node)),
            run_key=None if rank == 0 else f"{profile.port}-node{rank}"))
    return specs


def pd_server_profile(profile: Profile, server: PdServer) -> Profile:
    """The profile as one PD server runs it: its own port, sizes and memory over the profile's."""
    update = {k: getattr(server, k) for k in PdServer.OVERRIDES if getattr(server, k) is not None}
    update.update(pd=None, extra_args=[*profile.extra_args, *server.extra_args])
    return profile.model_copy(update=update)


def _pd_server(profile: Profile, server: PdServer, mode: str, index: int, *, simulated: bool, python: str | None,
               sim_args: Sequence[str]) -> ProcessSpec:
    assert profile.pd is not None
    own = pd_server_profile(profile, server)
    extra = ["--disaggregation-mode", mode]
    if mode == "prefill":
        extra += ["--disaggregation-bootstrap-port", str(server.bootstrap_port or PD_BOOTSTRAP_PORT)]
    extra += ["--disaggregation-transfer-backend", profile.pd.transfer_backend, "--base-gpu-id", str(server.base_gpu_id)]
    argv = _server_argv(own, simulated=simulated, python=python, sim_args=sim_args, extra=extra)
    return ProcessSpec(role=f"{mode}-{index}", node=server.node, argv=argv, env=dict(profile.env), port=server.port,
                       bind_host=profile.host, waits_ready=True, gpus=_gpus(server.base_gpu_id, own.tp_size))


def server_url(profile: Profile, server: PdServer, addresses: Mapping[str, str] | None = None) -> str:
    """Where the router reaches a PD server: its node's address (or its name), else the home's bind address."""
    host = (addresses or {}).get(server.node, server.node) if server.node else _addr(profile.host)
    return f"http://{host}:{server.port}"


def router_argv(profile: Profile, *, simulated: bool, python: str | None = None,
                addresses: Mapping[str, str] | None = None) -> list[str]:
    """``python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP ... --decode URL ...``."""
    assert profile.pd is not None
    module = SIM_ROUTER_MODULE if simulated else ROUTER_MODULE
    exe = python or (sys.executable if simulated else profile.launcher.python_path())
    argv = [exe, "-m", module, "--pd-disaggregation"]
    for server in profile.pd.prefill:
        argv += ["--prefill", server_url(profile, server, addresses), str(server.bootstrap_port or PD_BOOTSTRAP_PORT)]
    for server in profile.pd.decode:
        argv += ["--decode", server_url(profile, server, addresses)]
    return [*argv, "--host", profile.host, "--port", str(profile.port), *profile.pd.router_args]


def _pd(profile: Profile, *, simulated: bool, python: str | None, sim_args: Sequence[str],
        addresses: Mapping[str, str] | None) -> list[ProcessSpec]:
    assert profile.pd is not None
    specs = [_pd_server(profile, s, "prefill", i, simulated=simulated, python=python, sim_args=sim_args)
             for i, s in enumerate(profile.pd.prefill)]
    specs += [_pd_server(profile, s, "decode", i, simulated=simulated, python=python, sim_args=sim_args)
              for i, s in enumerate(profile.pd.decode)]
    router = router_argv(profile, simulated=simulated, python=python, addresses=addresses)
    specs.append(ProcessSpec(role="router", node=None, argv=router, env=dict(profile.env), port=profile.port,
                             bind_host=profile.host, entry=True, waits_ready=False))
    return specs


def deployment(profile: Profile, *, simulated: bool = False, python: str | None = None, sim_args: Sequence[str] = (),
               addresses: Mapping[str, str] | None = None) -> list[ProcessSpec]:
    """Every process the profile runs, the entry last (its start finds the others started).

    A single-server profile gives one ``server`` whose argv is exactly :func:`render_argv`'s.
    ``addresses``: node name -> the address other nodes reach it at (default: the name itself).
    """
    if profile.pd is not None:
        return _pd(profile, simulated=simulated, python=python, sim_args=sim_args, addresses=addresses)
    if len(profile.nodes) > 1:
        specs = _multinode(profile, simulated=simulated, python=python, sim_args=sim_args)
        return [*specs[1:], specs[0]]
    argv = render_argv(profile, simulated=simulated, python=python, sim_args=tuple(sim_args))
    return [ProcessSpec(role="server", node=None, argv=argv, env=dict(profile.env), port=profile.port,
                        bind_host=profile.host, entry=True, gpus=_gpus(0, profile.tp_size))]


def process_command(profile: Profile, spec: ProcessSpec, *, pretty: bool = False) -> str:
    """One process's POSIX shell line, as :func:`kimitui.profiles.render.render_command` writes a server's."""
    return shell_line(spec.argv, spec.env, profile.launcher.workdir, pretty=pretty)


_LOWEST, _HIGHEST = 1024, 65535
"""Where a moved port stays: above the privileged ports, so a simulated host's user can bind it."""


def _moved(port: int, offset: int) -> int:
    """``port + offset``, wrapped into ``_LOWEST.._HIGHEST`` (one-to-one, so a deployment's ports stay apart)."""
    span = _HIGHEST - _LOWEST + 1
    return (port + offset - _LOWEST) % span + _LOWEST


def on_port(profile: Profile, port: int) -> Profile:
    """The profile serving on ``port`` instead of its own (the simulated host's ``--sim-port`` / ``sim_port``).

    A PD deployment moves whole: every prefill and decode server's port and every bootstrap port
    shift by the same amount as the router's, so its layout holds and the deployments of two
    simulated hosts on one machine (``sim_port = 30011``, ``30012``) never share a port."""
    if port == profile.port:
        return profile
    offset = port - profile.port
    update: dict[str, object] = {"port": port}
    if profile.pd is not None:
        prefill = [s.model_copy(update={"port": _moved(s.port, offset),
                                        "bootstrap_port": _moved(s.bootstrap_port or PD_BOOTSTRAP_PORT, offset)})
                   for s in profile.pd.prefill]
        decode = [s.model_copy(update={"port": _moved(s.port, offset)}) for s in profile.pd.decode]
        update["pd"] = profile.pd.model_copy(update={"prefill": prefill, "decode": decode})
    return profile.model_copy(update=update)


def entry_of(specs: Sequence[ProcessSpec]) -> ProcessSpec:
    """The process readiness is judged on."""
    return next(s for s in specs if s.entry)


__all__ = ["ProcessSpec", "deployment", "entry_of", "knob_args", "on_port", "pd_server_profile", "process_command",
           "router_argv", "server_url"]
