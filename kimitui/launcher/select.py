"""Which launcher runs a profile on a host."""

from __future__ import annotations

from typing import Any

from kimitui.host.base import Host
from kimitui.launcher.base import Launcher


def is_simulated_host(host: Host) -> bool:
    """A simulated host runs the simulator instead of SGLang (``Host.simulated``; else the name ``sim``)."""
    flag = getattr(host, "simulated", None)
    return bool(flag) if flag is not None else host.name == "sim"


def launcher_for(host: Host, profile: Any | None = None, *, simulated: bool | None = None, **kwargs: Any) -> Launcher:
    """ProcessLauncher on the simulated host or for ``launcher.kind = "process"``; else SystemdLauncher."""
    from kimitui.launcher.process import ProcessLauncher

    sim = is_simulated_host(host) if simulated is None else simulated
    kind = getattr(getattr(profile, "launcher", None), "kind", "process")
    if sim or kind == "process":
        return ProcessLauncher(host, simulated=sim, **kwargs)
    from kimitui.launcher.systemd import SystemdLauncher

    kwargs.pop("sim_args", None)
    return SystemdLauncher(host, **kwargs)


async def find_running(
    host: Host, *, unit: str | None = None, simulated: bool | None = None, state_dir: str | None = None
) -> tuple[Launcher, Any] | None:
    """The server kimitui started on ``host`` and its launcher: plain process first, then systemd."""
    from kimitui.host.base import HostError
    from kimitui.launcher.base import LaunchError
    from kimitui.launcher.process import ProcessLauncher
    from kimitui.launcher.systemd import SystemdLauncher

    sim = is_simulated_host(host) if simulated is None else simulated
    candidates: list[Launcher] = [ProcessLauncher(host, simulated=sim, state_dir=state_dir)]
    if not sim:
        candidates.append(SystemdLauncher(host, unit=unit))
    for launcher in candidates:
        try:
            record = await launcher.current()
        except (LaunchError, HostError):
            continue
        if record is not None:
            return launcher, record
    return None
