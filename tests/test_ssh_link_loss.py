"""An SSH link lost under a forwarded request (issue 30): the request ends within seconds as ``link_lost``.

Real pieces only: the in-process SSH server (``tests/support/sshd.py``), whose connection is
aborted as a killed sshd session would be; ``SSHHost.forward`` to
``tests/support/minimal_server.py``; the load client, and for the sweep the real load process.
Before the fix the forward closed neither side: the request waited for its 900 s deadline.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kimitui.events import Event, LevelResult, RequestResult, RequestStarted, SweepSpec
from kimitui.host.ssh import SSHHost
from kimitui.launcher.reach import reach_server
from kimitui.loadgen.client import Deadlines, RequestTrace, build_body
from kimitui.loadgen.h1client import Pool, run_request
from kimitui.loadgen.runner import SweepRunner
from kimitui.paths import STATE_ENV
from kimitui.session import Session
from tests.support.net import free_port
from tests.support.sshd import SSHTestServer
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(120)

SOON_S = 5.0
"""A lost link must end what was in flight through it within this (it used to wait for the 900 s deadline)."""


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))  # the forward's marks, and the load process's


def _cut_the_link(server: SSHTestServer) -> int:
    """Abort every connection of the SSH server (it keeps listening, so the host reconnects)."""
    conns = list(server.connections)
    for conn in conns:
        conn.abort()
    return len(conns)


async def _forwarded(ssh_server: SSHTestServer, server_url: str) -> tuple[SSHHost, str]:
    host = ssh_server.make_host("gpu")
    await host.connect()
    return host, await reach_server(host, "127.0.0.1", int(server_url.rsplit(":", 1)[1]))


async def _request(url: str, **knobs: Any) -> tuple[asyncio.Task[RequestTrace], RequestTrace]:
    deadlines = Deadlines()
    pool = Pool(url + "/v1/chat/completions", deadlines)
    trace = RequestTrace("r1", 1, False, time.perf_counter_ns())
    data = pool.request_bytes(build_body("minimal", "hello", 400, extra=knobs), "r1")
    return asyncio.ensure_future(run_request(pool, data, trace, deadlines)), trace


async def _streaming(trace: RequestTrace) -> None:
    while trace.tokens < 3:
        assert trace.error_class is None, trace.error
        await asyncio.sleep(0.02)


async def test_a_request_in_flight_when_the_link_drops_ends_at_once_as_link_lost(ssh_server, minimal_server) -> None:
    host, url = await _forwarded(ssh_server, minimal_server.url)
    try:
        task, trace = await _request(url, tick_ms=50)  # 400 tokens at 50 ms: 20 s if nothing happened
        await asyncio.wait_for(_streaming(trace), 10)
        assert _cut_the_link(ssh_server) == 1
        cut = time.monotonic()
        await asyncio.wait_for(task, SOON_S)
        took = time.monotonic() - cut
        assert trace.error_class == "link_lost", (trace.error_class, trace.error)
        assert "gpu: SSH link to" in trace.error and "lost" in trace.error, trace.error
        assert trace.tokens >= 3 and took < SOON_S  # what arrived before is kept
        # the link comes back by itself and the same forward carries the next request whole
        await host.wait_connected(20)
        task, trace = await _request(url, tick_ms=1)
        await asyncio.wait_for(task, 20)
        assert trace.ok and trace.error_class is None, trace.error
    finally:
        await host.close()


async def test_a_server_that_hangs_up_through_a_live_link_is_still_a_reset(ssh_server, minimal_server) -> None:
    """Only the link's loss is ``link_lost``: the server dropping the stream is ``reset``, nothing listening ``connect``."""
    host, url = await _forwarded(ssh_server, minimal_server.url)
    try:
        task, trace = await _request(url, tick_ms=5, drop_after=5)
        await asyncio.wait_for(task, 20)
        assert trace.error_class == "reset", (trace.error_class, trace.error)
        assert host.connected
        nobody = await reach_server(host, "127.0.0.1", free_port())
        task, trace = await _request(nobody)
        await asyncio.wait_for(task, 20)
        assert trace.error_class == "connect", (trace.error_class, trace.error)
    finally:
        await host.close()


async def test_a_sweep_whose_link_drops_fails_only_what_was_in_flight_and_runs_its_next_level(
        ssh_server, minimal_server) -> None:
    host, url = await _forwarded(ssh_server, minimal_server.url)
    session = Session(host="gpu")
    seen: list[tuple[float, Event]] = []
    session.add_sink(lambda ev: seen.append((time.monotonic(), ev)))
    # each request ~2 s (40 tokens at 50 ms): the first level's first two are surely in flight at the cut
    spec = SweepSpec(url=url, model="minimal", levels=[2, 3], max_tokens=40, requests_per_level=6,
                     warmup_requests=0, extra_body={"tick_ms": 50})
    runner = SweepRunner(session, spec, host="gpu")
    try:
        await runner.start()
        while len([e for _, e in seen if isinstance(e, RequestStarted)]) < 2:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        ended = {e.request_id for _, e in seen if isinstance(e, RequestResult)}
        in_flight = {e.request_id for _, e in seen if isinstance(e, RequestStarted)} - ended
        assert len(in_flight) == 2
        assert _cut_the_link(ssh_server) == 1
        cut = time.monotonic()
        result = await asyncio.wait_for(runner.wait(), 90)
    finally:
        if runner.running:
            await runner.abort()
        await host.close()
    results = {e.request_id: (t, e) for t, e in seen if isinstance(e, RequestResult)}
    for rid in in_flight:
        t, res = results[rid]
        assert res.error_class == "link_lost" and t - cut < SOON_S, (rid, res.error_class, res.error, t - cut)
    levels = [e for _, e in seen if isinstance(e, LevelResult)]
    assert [lv.concurrency for lv in levels] == [2, 3], levels
    first, second = levels
    assert first.failures == {"link_lost": 2} and first.ok == 4, (first.failures, first.errors)
    assert "SSH link to" in first.errors["link_lost"]
    assert second.ok == 6 and second.failed == 0 and second.status == "ok", (second.failures, second.errors)
    assert result.outcome != "failed", result
