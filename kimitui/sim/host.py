"""The simulated host as the simulator builds it: the function callers pass to
:func:`kimitui.host.factory.build_host`, so the host room never imports the simulator."""

from __future__ import annotations

from kimitui.host.base import EventCallback, Host
from kimitui.host.local import LocalHost
from kimitui.sim.gpustate import SIM_NAME_ENV


def simulated_host(name: str, on_event: EventCallback | None = None) -> Host:
    """A LocalHost whose ``simulated`` flag makes launchers start the simulator instead of SGLang."""
    return LocalHost(name, on_event, simulated=True)


def own_home_env(name: str) -> dict[str, str]:
    """The environment that gives one of several simulated hosts on a machine its own home (``/sim/hosts/NAME``)."""
    return {SIM_NAME_ENV: name}
