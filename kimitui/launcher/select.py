"""Which launcher runs a profile on a host."""

from __future__ import annotations

from collections.abc import Sequence

from kimitui.host.base import Host, HostError
from kimitui.launcher.base import LaunchError, Launcher, RunRecord
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.systemd import SystemdLauncher
from kimitui.profiles import Profile


def is_simulated_host(host: Host) -> bool:
    """A simulated host runs the simulator instead of SGLang (``Host.simulated``; else the name ``sim``)."""
    return bool(host.simulated) if host.simulated is not None else host.name == "sim"


def launcher_for(host: Host, profile: Profile | None = None, *, simulated: bool | None = None,
                 sim_args: Sequence[str] = ()) -> Launcher:
    """ProcessLauncher on the simulated host or for ``launcher.kind = "process"``; else SystemdLauncher."""
    sim = is_simulated_host(host) if simulated is None else simulated
    kind = profile.launcher.kind if profile is not None else "process"
    if sim or kind == "process":
        return ProcessLauncher(host, simulated=sim, sim_args=sim_args)
    return SystemdLauncher(host)


async def find_running(
    host: Host, *, unit: str | None = None, simulated: bool | None = None, state_dir: str | None = None
) -> tuple[Launcher, RunRecord] | None:
    """The server kimitui started on ``host`` and its launcher: plain process first, then systemd."""
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
