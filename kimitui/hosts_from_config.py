"""The config's ``[hosts.NAME]`` tables as hosts: resolves a name to a :class:`~kimitui.host.factory.HostPlan`
and builds it, with the simulator's own builder for simulated hosts.

Lives outside ``kimitui/host/`` so that the host room knows neither the config nor the simulator.
"""

from __future__ import annotations

from kimitui.config import LOCAL_HOST, SIM_HOST, Config, ConfigError, HostConfig
from kimitui.host.base import EventCallback, Host
from kimitui.host.factory import HostPlan, build_host
from kimitui.sim.host import own_home_env, simulated_host


def choose_host_name(config: Config, name: str | None = None) -> str:
    """``name``, else ``default_host``, else the first configured host, else ``sim``."""
    if name:
        return name
    if config.default_host:
        return config.default_host
    return next(iter(config.hosts), SIM_HOST)


def host_plan(config: Config, name: str | None = None) -> HostPlan:
    """What the host called ``name`` (see :func:`choose_host_name`) needs; ConfigError for a name not defined.

    ``sim`` with no such table is the embedded simulated host; ``local`` is this machine itself.
    """
    chosen = choose_host_name(config, name)
    entry = config.hosts.get(chosen)
    if entry is None:
        if chosen == SIM_HOST:
            return HostPlan(SIM_HOST, simulated=True)
        if chosen == LOCAL_HOST:
            return HostPlan(LOCAL_HOST)
        where = f" in {config.path}" if config.path else " (no config file)"
        raise ConfigError(f"no host {chosen!r}{where}; configured: {', '.join(config.hosts) or 'none'}, "
                          "or 'sim' (simulated), or 'local' (this machine)")
    return _plan(config, chosen, entry, seen=())


def _plan(config: Config, name: str, entry: HostConfig, seen: tuple[str, ...]) -> HostPlan:
    if name in seen:
        raise ConfigError(f"{config.path or '<config>'}: hosts.{name}.jump: jump hosts form a loop: {' -> '.join([*seen, name])}")
    jump: HostPlan | str | None = entry.jump
    if entry.jump and entry.jump in config.hosts:
        jump = _plan(config, entry.jump, config.hosts[entry.jump], seen=(*seen, name))
    return HostPlan(
        name,
        address=entry.address,
        simulated=entry.sim,
        python=entry.python,
        env=own_home_env(name) if entry.sim else {},  # one of several simulated hosts a machine may play
        user=entry.user,
        port=entry.port,
        key=entry.key,
        agent=entry.agent,
        known_hosts=entry.known_hosts,
        trust_on_first_use=entry.trust_on_first_use,
        jump=jump,
        keepalive_s=entry.keepalive_s,
        connect_timeout_s=entry.connect_timeout_s,
    )


def make_host(config: Config, name: str | None = None, on_event: EventCallback | None = None) -> Host:
    """The Host called ``name`` (see :func:`host_plan`), not yet connected."""
    return build_host(host_plan(config, name), simulated_host, on_event)
