"""Building a Host from what it needs (:class:`HostPlan`), whoever decided it.

The host room knows no caller: the config's ``[hosts.NAME]`` tables become plans in
:mod:`kimitui.hosts_from_config`, and a simulated host is built by the function the caller
passes (the simulator's own, :func:`kimitui.sim.host.simulated_host`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kimitui.host.base import EventCallback, Host
from kimitui.host.local import LocalHost

if TYPE_CHECKING:
    from kimitui.host.ssh import SSHHost

SimulatedHost = Callable[[str, EventCallback | None], Host]
"""Builds the simulated host called NAME on this machine (the simulator package provides it)."""


@dataclass(frozen=True)
class HostPlan:
    """One host as its caller resolved it: no ``address`` means this machine."""

    name: str
    address: str | None = None
    simulated: bool = False
    python: str | None = None
    """Left as the host's default (find one on its PATH) when None."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Set for every command run there (one of several simulated hosts carries its name)."""
    user: str | None = None
    port: int | None = None
    key: str | None = None
    agent: bool = True
    known_hosts: str | None = None
    trust_on_first_use: bool = False
    jump: HostPlan | str | None = None
    """Another host's plan, or ``user@host:port``."""
    keepalive_s: float = 1.0
    connect_timeout_s: float = 10.0


def build_host(plan: HostPlan, simulated_host: SimulatedHost, on_event: EventCallback | None = None) -> Host:
    """The host ``plan`` describes, not yet connected: a simulated or plain LocalHost, or an SSHHost."""
    host: Host
    if plan.address is None:
        host = simulated_host(plan.name, on_event) if plan.simulated else LocalHost(plan.name, on_event)
    else:
        host = _ssh_host(plan, on_event)
    if plan.python is not None:
        host.python = plan.python
    host.env.update(plan.env)
    return host


def _ssh_host(plan: HostPlan, on_event: EventCallback | None) -> "SSHHost":
    from kimitui.host.ssh import SSHHost  # not at the top: asyncssh costs ~0.18 s, paid only for an SSH host

    assert plan.address is not None
    jump = _ssh_host(plan.jump, on_event) if isinstance(plan.jump, HostPlan) else plan.jump
    host = SSHHost(
        plan.name,
        plan.address,
        user=plan.user,
        port=plan.port,
        client_keys=[plan.key] if plan.key else None,
        agent=plan.agent,
        known_hosts=plan.known_hosts,
        trust_on_first_use=plan.trust_on_first_use,
        jump=jump,
        keepalive_s=plan.keepalive_s,
        connect_timeout_s=plan.connect_timeout_s,
        on_event=on_event,
    )
    host.simulated = plan.simulated
    return host
