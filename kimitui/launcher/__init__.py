"""Safe profile swaps: launchers (plain process, systemd), readiness, rollback, confound guard.

Public API::

    from kimitui.launcher import swap, SwapOutcome, ProcessLauncher, SystemdLauncher, launcher_for
    outcome = await swap(host, "ep8-tuned", session=session, timeout=900)
"""

from kimitui.launcher.base import LaunchError, Launcher, RunRecord
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.select import find_running, is_simulated_host, launcher_for
from kimitui.launcher.swap import SwapOutcome, server_url, swap
from kimitui.launcher.systemd import SystemdLauncher

__all__ = [
    "LaunchError",
    "Launcher",
    "ProcessLauncher",
    "RunRecord",
    "SwapOutcome",
    "SystemdLauncher",
    "find_running",
    "is_simulated_host",
    "launcher_for",
    "server_url",
    "swap",
]
