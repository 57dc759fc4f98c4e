"""Turning the config's ``[hosts.NAME]`` tables into Host objects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kimitui.config import LOCAL_HOST, SIM_HOST, Config, ConfigError, HostConfig
from kimitui.host.base import EventCallback, Host
from kimitui.host.local import LocalHost
from kimitui.sim.gpustate import SIM_NAME_ENV

if TYPE_CHECKING:
    from kimitui.host.ssh import SSHHost


def choose_host_name(config: Config, name: str | None = None) -> str:
    """``name``, else ``default_host``, else the first configured host, else ``sim``."""
    if name:
        return name
    if config.default_host:
        return config.default_host
    return next(iter(config.hosts), SIM_HOST)


def make_host(config: Config, name: str | None = None, on_event: EventCallback | None = None) -> Host:
    """The Host called ``name`` (see :func:`choose_host_name`), not yet connected.

    ``sim`` with no such table is the embedded simulated host: a LocalHost
    whose ``simulated`` flag makes launchers start the simulator; ``local`` is
    this machine itself.  Raises
    ConfigError for a name the config does not define.
    """
    chosen = choose_host_name(config, name)
    entry = config.hosts.get(chosen)
    if entry is None:
        if chosen == SIM_HOST:
            return LocalHost(SIM_HOST, on_event, simulated=True)
        if chosen == LOCAL_HOST:
            return LocalHost(LOCAL_HOST, on_event)
        where = f" in {config.path}" if config.path else " (no config file)"
        raise ConfigError(f"no host {chosen!r}{where}; configured: {', '.join(config.hosts) or 'none'}, "
                          "or 'sim' (simulated), or 'local' (this machine)")
    if entry.sim and not entry.address:
        host: Host = LocalHost(chosen, on_event, simulated=True)
    else:
        host = _ssh_host(config, chosen, entry, on_event, seen=())
    host.python = entry.python
    if entry.sim:  # one of several simulated hosts a machine may play: its own home there
        host.env[SIM_NAME_ENV] = chosen
    return host


def _ssh_host(
    config: Config, name: str, entry: HostConfig, on_event: EventCallback | None, seen: tuple[str, ...]
) -> "SSHHost":
    from kimitui.host.ssh import SSHHost  # not at the top: asyncssh costs ~0.18 s, paid only for an SSH host

    if name in seen:
        raise ConfigError(f"{config.path or '<config>'}: hosts.{name}.jump: jump hosts form a loop: {' -> '.join([*seen, name])}")
    jump: SSHHost | str | None = entry.jump
    if entry.jump and entry.jump in config.hosts:
        jump_entry = config.hosts[entry.jump]
        jump = _ssh_host(config, entry.jump, jump_entry, on_event, seen=(*seen, name))
    assert entry.address is not None
    host = SSHHost(
        name,
        entry.address,
        user=entry.user,
        port=entry.port,
        client_keys=[entry.key] if entry.key else None,
        agent=entry.agent,
        known_hosts=entry.known_hosts,
        trust_on_first_use=entry.trust_on_first_use,
        jump=jump,
        keepalive_s=entry.keepalive_s,
        connect_timeout_s=entry.connect_timeout_s,
        on_event=on_event,
    )
    host.simulated = entry.sim
    return host
