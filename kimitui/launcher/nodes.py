"""A deployment's other nodes, by the names the config gives them (``[hosts.NAME]``).

The swap, the follower and ``kimitui status``/``stop`` reach a multi-node deployment's
other processes through :class:`NodeHosts`, a host resolver built from the config.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from kimitui.config import load_config
from kimitui.host.base import Host
from kimitui.hosts_from_config import make_host

log = logging.getLogger(__name__)


class NodeHosts:
    """A deployment's other nodes by their config name, connected on first use and closed with the cockpit."""

    def __init__(self, home: Host, config_path: Path | None) -> None:
        self._home = home
        self._config_path = config_path
        self._open: dict[str, Host] = {}
        self._lock = asyncio.Lock()

    async def __call__(self, name: str) -> Host:
        if name == self._home.name:
            return self._home
        async with self._lock:
            if name not in self._open:
                host = make_host(load_config(self._config_path), name)
                await host.connect()
                self._open[name] = host
            return self._open[name]

    async def close(self) -> None:
        hosts, self._open = list(self._open.values()), {}
        for host in hosts:
            try:
                await host.close()
            except Exception as exc:
                log.debug("node close: %s", exc)
