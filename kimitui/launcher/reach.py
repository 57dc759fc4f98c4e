"""Where kimitui reaches a server it started on a host, from *this* machine.

A server bound to the host's loopback is reached through the SSH link (``Host.forward``); a
wildcard bind at the address the link really connected to; locally, at the address it binds.
"""

from __future__ import annotations

from kimitui.host.base import Host

_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_WILDCARD = ("0.0.0.0", "::", "")


def server_url(host: Host, bind_host: str | None, port: int | None) -> str:
    """Where kimitui reaches the server: the host's address for wildcard/loopback binds."""
    addr = bind_host or "127.0.0.1"
    if addr in _LOOPBACK or addr in _WILDCARD:
        addr = host.address or "127.0.0.1"
    return _http_url(addr, port)


def _http_url(addr: str, port: int | None) -> str:
    if ":" in addr and not addr.startswith("["):
        addr = f"[{addr}]"  # IPv6
    return f"http://{addr}:{port or 30000}"


async def reach_server(host: Host, bind_host: str | None, port: int | None) -> str:
    """The URL kimitui should use for the server, reachable from *this* machine.

    Over SSH a server bound to the GPU host's loopback is reached through the
    link (``SSHHost.forward``); a wildcard bind is reached at the address the
    link actually connected to (the configured name may be an ~/.ssh/config
    alias).  Locally this is :func:`server_url`.
    """
    if not host.can_forward:
        return server_url(host, bind_host, port)
    addr = bind_host or "127.0.0.1"
    if addr in _LOOPBACK:
        local = await host.forward("127.0.0.1" if addr == "localhost" else addr, port or 30000)
        return f"http://127.0.0.1:{local}"
    if addr in _WILDCARD:
        addr = host.peer_address or host.address or addr
    return _http_url(addr, port)
