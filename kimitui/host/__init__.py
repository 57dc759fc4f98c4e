"""Hosts: the one way kimitui touches a machine (local subprocesses or SSH).

``from kimitui.host import LocalHost`` is cheap; ``SSHHost`` lives in
:mod:`kimitui.host.ssh` (it imports asyncssh) and ``make_host`` in
:mod:`kimitui.host.factory`.
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


def make_host(config, name=None, on_event=None):  # type: ignore[no-untyped-def]
    """See :func:`kimitui.host.factory.make_host` (imported lazily: it needs the config module)."""
    from kimitui.host.factory import make_host as _make_host

    return _make_host(config, name, on_event)


__all__ = [
    "CommandResult",
    "CommandTimeout",
    "Host",
    "HostError",
    "HostKeyError",
    "HostUnavailable",
    "LocalHost",
    "make_host",
    "Stream",
]
