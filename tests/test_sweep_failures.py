"""Requests that never connect, servers that go silent, levels that fail at once: the sweep's times stay true.

Real pieces only: the load process (``python -m kimitui.bench.worker``) with a
lowered file-descriptor limit, ``bench/minimal_server.py`` and small raw
asyncio servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import pytest

from kimitui.events import LevelResult, RequestResult, SweepSpec, parse_event
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(60)


def _run_worker(spec: SweepSpec, nofile: int) -> tuple[list[object], float]:
    """The real load process with RLIMIT_NOFILE lowered to ``nofile``; its events and its run time."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))  # hard too: the worker raises soft to hard

    config = {"spec": spec.model_dump(mode="json"), "sweep_id": "fd-test"}
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "kimitui.bench.worker"], input=json.dumps(config).encode() + b"\n",
                          capture_output=True, timeout=45, preexec_fn=limit)
    took = time.time() - t0
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return [parse_event(line) for line in proc.stdout.splitlines()], took


def test_burst_with_failed_connects_keeps_every_time_true(minimal_server) -> None:
    """`ulimit -n` below C: the requests that cannot open a socket fail as `connect`, sent when they tried."""
    c = 96
    spec = SweepSpec(url=minimal_server.url, model="minimal", levels=[c], mode="burst", max_tokens=16,
                     requests_per_level=c, max_error_rate=1.0, extra_body={"ttft_ms": 100, "tick_ms": 5})
    events, took = _run_worker(spec, nofile=64)
    results = [e for e in events if isinstance(e, RequestResult)]
    [level] = [e for e in events if isinstance(e, LevelResult)]
    failed = [r for r in results if not r.ok]
    assert len(results) == c and failed and len(failed) < c, [r.error for r in failed[:3]]
    assert all(r.error_class == "connect" for r in failed), {r.error_class for r in failed}
    start = min(r.intended_send for r in results)
    for r in results:
        # every time is within the run: no request "sent" at the clock's origin, thousands of seconds early
        assert start <= r.intended_send <= r.sent < start + took, r
        assert 0 <= r.e2e_s < took, r
        assert r.t == pytest.approx(r.sent + r.e2e_s, abs=1e-3)
    for r in failed:
        assert r.e2e_s < 1.0 and r.chunks == 0 and r.ttft_s is None  # EMFILE fails at once
    # the level's wall is what really happened: a ~0.2 s burst, not the perf_counter origin
    assert level.wall_s is not None and 0.1 < level.wall_s < min(took, 5.0)
