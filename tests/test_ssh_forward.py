"""Reaching a server bound to the GPU host's loopback, through the SSH link."""

from __future__ import annotations

import asyncio

import httpx

from kimitui.launcher.reach import reach_server


async def _http_server() -> tuple[asyncio.base_events.Server, int]:
    """A one-route HTTP/1.1 server on 127.0.0.1 (the 'GPU host' loopback in this test)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"ok": true}'
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_loopback_bind_is_reached_through_the_link_and_survives_a_reconnect(ssh_server):
    server, port = await _http_server()
    host = ssh_server.make_host("gpu")
    try:
        await host.connect()
        url = await reach_server(host, "127.0.0.1", port)
        local_port = int(url.rsplit(":", 1)[1])
        assert url.startswith("http://127.0.0.1:") and local_port != port
        async with httpx.AsyncClient(trust_env=False) as http:
            assert (await http.get(url + "/health")).json() == {"ok": True}
            # the link dies and comes back: the same local port works again
            await ssh_server.stop()
            await ssh_server.restart()
            await host.wait_connected(20)
            assert await reach_server(host, "127.0.0.1", port) == url
            assert (await http.get(url + "/health")).json() == {"ok": True}
    finally:
        await host.close()
        server.close()


async def test_wildcard_bind_uses_the_address_the_link_reached(ssh_server):
    host = ssh_server.make_host("gpu")
    try:
        await host.connect()
        assert await reach_server(host, "0.0.0.0", 30001) == "http://127.0.0.1:30001"
    finally:
        await host.close()
