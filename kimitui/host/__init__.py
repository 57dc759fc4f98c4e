"""Hosts: the one way kimitui touches a machine (local subprocesses or SSH).

``from kimitui.host import LocalHost`` is cheap; ``SSHHost`` lives in
:mod:`kimitui.host.ssh` (it imports asyncssh) and ``build_host``, which turns a resolved
:class:`~kimitui.host.factory.HostPlan` into a host, in :mod:`kimitui.host.factory`.  The room knows
no caller: the config's ``[hosts.NAME]`` tables become plans in :mod:`kimitui.hosts_from_config`.
"""

from kimitui.host.base import (
    CommandResult,
    CommandTimeout,
    Host,
    HostError,
    HostKeyError,
    HostUnavailable,
    Stream,
)
from kimitui.host.local import LocalHost

__all__ = [
    "CommandResult",
    "CommandTimeout",
    "Host",
    "HostError",
    "HostKeyError",
    "HostUnavailable",
    "LocalHost",
    "Stream",
]
