"""Hosts: the one way kimitui touches a machine (local subprocesses or SSH).

``from kimitui.host import LocalHost`` is cheap; ``SSHHost`` lives in
:mod:`kimitui.host.ssh` (it imports asyncssh) and ``make_host``, which turns the
config's ``[hosts.NAME]`` tables into hosts, in :mod:`kimitui.host.factory`.
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
