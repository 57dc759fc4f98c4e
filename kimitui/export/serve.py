"""Serve an exporter's registry over HTTP: prometheus_client's own server, on a thread, on 127.0.0.1 by default.

kimitui runs on the operator's machine: what it serves is reachable from that machine only unless the
operator names another address (``--metrics-addr`` / ``[metrics] addr``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

from kimitui.export.prometheus import MetricsExporter
from kimitui.session import Session

DEFAULT_ADDR = "127.0.0.1"


class MetricsPortError(OSError):
    """The metrics port could not be bound (in use, not permitted, no such address): one line says which."""

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass
class MetricsServer:
    """A running metrics endpoint: ``http://{addr}:{port}/metrics``."""

    exporter: MetricsExporter
    addr: str
    port: int
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port (the exporter keeps its sink; :meth:`MetricsExporter.detach` ends it)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)


def serve(exporter: MetricsExporter, port: int, addr: str = DEFAULT_ADDR) -> MetricsServer:
    """Serve ``exporter`` on ``addr:port`` (port 0: a free one, read back from ``.port``).

    Raises :class:`MetricsPortError` when the address cannot be bound."""
    try:
        server, thread = start_http_server(port, addr=addr, registry=exporter.registry)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise MetricsPortError(exc.errno, f"cannot serve metrics on {addr}:{port}: {reason}") from None
    return MetricsServer(exporter, addr, int(server.server_port), server, thread)


def start_metrics(session: Session, port: int, addr: str = DEFAULT_ADDR) -> MetricsServer:
    """An exporter sinking ``session``, served on ``addr:port``: what ``kimitui run --metrics-port`` starts.

    Raises :class:`MetricsPortError` (and leaves the session as it was) when the port cannot be bound."""
    exporter = MetricsExporter(session)
    try:
        return serve(exporter, port, addr)
    except MetricsPortError:
        exporter.detach()
        raise
