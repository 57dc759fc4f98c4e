"""Failures that looked like success to the cockpit: a server without /server_info, a /metrics whose
names kimitui does not read.  Each is said once, plainly, as an ErrorEvent the cockpit shows."""

from __future__ import annotations

import asyncio

from kimitui.events import ErrorEvent, ServerHealth, ServerStats
from kimitui.session import Session
from kimitui.telemetry.metrics import MetricsPoller
from tests.support.httpapp import serve
from tests.support.telemetry import Collector

FAST = dict(metrics_interval=0.05, info_interval=0.05, loads_interval=None, health_interval=0.05, startup_grace_s=0.0)

VLLM = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="kimi"} 3.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="kimi"} 0.5
"""
SGLANG_COUNTERS_ONLY = """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="kimi"} 10.0
"""


def errors(seen: Collector) -> list[ErrorEvent]:
    return [e for e in seen.events if isinstance(e, ErrorEvent)]


async def poll(routes: dict, seconds: float, **kw: object) -> tuple[Collector, MetricsPoller]:
    async with serve(routes) as url:
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, url, host="h", **{**FAST, **kw})  # type: ignore[arg-type]
        await poller.start()
        try:
            await asyncio.sleep(seconds)
        finally:
            await poller.stop()
    return seen, poller


async def test_a_server_without_server_info_is_said_once_and_plainly() -> None:
    seen, poller = await poll({"/health": lambda: (200, "")}, 0.5, metrics_interval=None)
    [err] = errors(seen)
    assert err.source == "metrics" and err.message.startswith("this server has no /server_info (nor /get_server_info)")
    assert "drift from the profile is not checked" in err.message and "404" in err.detail
    assert "server_info" in poller.stopped_polls
    assert len([e for e in seen.events if isinstance(e, ServerHealth)]) >= 3  # the rest is polled on


async def test_metrics_with_none_of_the_names_kimitui_reads_is_said_once() -> None:
    seen, _ = await poll({"/metrics": lambda: (200, VLLM), "/server_info": lambda: (200, {"tp_size": 8})}, 0.5)
    [err] = errors(seen)
    assert err.message.startswith("/metrics has none of the names kimitui reads")
    assert "vllm:gpu_cache_usage_perc, vllm:num_requests_running" in err.detail
    stats = [e for e in seen.events if isinstance(e, ServerStats)]
    assert len(stats) >= 3 and stats[-1].running_reqs is None  # still polled, and still empty


async def test_sglang_metrics_without_gauges_get_a_grace_then_are_said_once() -> None:
    """SGLang may register its gauges only once the scheduler first logs stats: not at once, but not forever."""
    async with serve({"/metrics": lambda: (200, SGLANG_COUNTERS_ONLY)}) as url:
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, url, host="h", **{**FAST, "info_interval": None})  # type: ignore[arg-type]
        poller.unknown_metrics_after_s = 0.4
        await poller.start()
        try:
            await asyncio.sleep(0.25)
            assert errors(seen) == []
            await asyncio.sleep(0.6)
        finally:
            await poller.stop()
    [err] = errors(seen)
    assert err.message.startswith("/metrics has none of the names") and "sglang:prompt_tokens_total" in err.detail
