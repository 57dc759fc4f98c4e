"""Idle connections to the ``--metrics-port`` endpoint cost no thread and never slow a scrape: real
sockets on 127.0.0.1 against the real endpoint, threads counted from ``/proc/self/task``."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kimitui.export import MetricsExporter, MetricsServer, serve
from kimitui.session import Session
from tests.support.recordings import gpu_sample, synthetic_sweep
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@contextmanager
def _endpoint(**options: float) -> Iterator[MetricsServer]:
    session = Session()
    server = serve(MetricsExporter(session), 0, **options)  # type: ignore[arg-type]
    for ev in [*synthetic_sweep(levels=[1, 4]), gpu_sample(1e6)]:
        session.publish(ev)
    try:
        yield server
    finally:
        server.close()
        server.exporter.detach()


def _closed_by_server(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _scrape(server: MetricsServer) -> tuple[float, str]:
    t0 = time.monotonic()
    reply = httpx.get(server.url, timeout=30.0, trust_env=False)
    took = time.monotonic() - t0
    assert reply.status_code == 200, reply.text
    return took, reply.text


def test_300_idle_connections_hold_no_thread_and_a_scrape_answers_at_once() -> None:
    before = _threads()
    with _endpoint(max_connections=128) as server:
        idle = []
        try:
            for _ in range(300):
                s = socket.create_connection(("127.0.0.1", server.port))
                idle.append(s)
            idle[-1].sendall(b"GET /metrics HTTP/1.1\r\n")  # a request that never ends, too
            time.sleep(0.5)  # every connection accepted by now
            assert _threads() - before <= 1, f"{_threads() - before} threads for 300 idle connections"
            took, text = _scrape(server)
            assert took < 2.0, f"a scrape took {took:.2f} s beside 300 idle connections"
            names = {f.name for f in text_string_to_metric_families(text)}
            assert "kimitui_gpu_utilization_percent" in names, names
            # past the bound the longest-waiting were closed: at most 128 stay open
            wait_until(lambda: sum(not _closed_by_server(s) for s in idle) <= 128, 5, "the oldest to be closed")
            assert not _closed_by_server(idle[-1])  # the newest are kept
        finally:
            for s in idle:
                s.close()
        assert server.thread is not None
    assert not server.thread.is_alive(), [t.name for t in threading.enumerate()]  # close() ends its one thread


def test_a_connection_that_sends_no_whole_request_is_closed_after_the_idle_timeout() -> None:
    with _endpoint(idle_timeout_s=0.5) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as silent, \
                socket.create_connection(("127.0.0.1", server.port)) as slow:
            slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            wait_until(lambda: _closed_by_server(silent) and _closed_by_server(slow), 5, "idle connections closed")
        assert _scrape(server)[0] < 2.0


def test_the_endpoint_answers_as_prometheus_clients_expect() -> None:
    with _endpoint() as server:
        base = f"http://127.0.0.1:{server.port}"
        with httpx.Client(trust_env=False, timeout=10.0) as http:
            om = http.get(base + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
            assert om.status_code == 200 and om.headers["content-type"].startswith("application/openmetrics-text")
            assert om.text.rstrip().endswith("# EOF")
            zipped = http.get(base + "/metrics", headers={"Accept-Encoding": "gzip"})
            assert zipped.status_code == 200 and zipped.headers["content-encoding"] == "gzip"
            assert "# HELP kimitui_gpu_utilization_percent" in zipped.text  # httpx inflated it
            assert http.get(base + "/metrics", params={"name[]": "kimitui_gpu_utilization_percent"}).status_code == 200
            assert http.post(base + "/metrics").status_code == 405
