"""An idle server's traffic figures are polled less often, and traffic brings the usual rate back (issue 33).

A real HTTP server on 127.0.0.1 plays SGLang's /metrics and /v1/loads; the poller runs its real loops at a
short interval, and the scrapes each endpoint answered are counted.
"""

from __future__ import annotations

import asyncio

import pytest

from kimitui.session import Session
from kimitui.telemetry.metrics_poll import QUIET_AFTER, QUIET_FACTOR, MetricsPoller
from tests.support.httpapp import serve
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

METRICS = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{tp_rank="0"}} {running}
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{tp_rank="0"}} 0
"""


async def test_quiet_after_idle_scrapes_and_back_at_the_first_request() -> None:
    running = {"now": 0}
    hits = {"metrics": 0, "loads": 0}

    def metrics() -> tuple[int, str]:
        hits["metrics"] += 1
        return 200, METRICS.format(running=running["now"])

    def loads() -> tuple[int, dict]:
        hits["loads"] += 1
        return 200, {"loads": [{"dp_rank": 0, "num_running_reqs": running["now"], "num_waiting_reqs": 0}]}

    async with serve({"/metrics": metrics, "/v1/loads": loads}) as url:
        poller = MetricsPoller(Session(), url, metrics_interval=0.1, loads_interval=0.1, info_interval=None,
                               health_interval=None)
        await poller.start()
        try:
            await wait_for(lambda: poller.quiet_scrapes >= QUIET_AFTER, 20, "quiet")
            assert poller.interval_now("metrics", 0.1) == pytest.approx(0.1 * QUIET_FACTOR)
            assert poller.interval_now("health", 2.0) == 2.0  # only the figures that move with traffic
            before = dict(hits)
            await asyncio.sleep(1.5)
            quiet_rate = (hits["metrics"] - before["metrics"]) / 1.5
            assert quiet_rate <= 1 / (0.1 * QUIET_FACTOR) + 1.5, quiet_rate  # ~3.3/s, not ~10/s
            running["now"] = 4
            await wait_for(lambda: poller.quiet_scrapes == 0, 10, "traffic seen")
            assert poller.interval_now("metrics", 0.1) == 0.1
        finally:
            await poller.stop()
