"""Failures that looked like success to the cockpit: a server without /server_info, a /metrics whose
names kimitui does not read.  Each is said once, plainly, as an ErrorEvent the cockpit shows."""

from __future__ import annotations

from collections.abc import Callable

from kimitui.events import ErrorEvent, ServerHealth, ServerStats
from kimitui.session import Session
from kimitui.telemetry.metrics_poll import MetricsPoller
from tests.support.httpapp import serve
from tests.support.telemetry import Collector

FAST = dict(metrics_interval=0.05, info_interval=0.05, loads_interval=None, health_interval=0.05, startup_grace_s=0.0)

FOREIGN = """# TYPE tgi_queue_size gauge
tgi_queue_size 3.0
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 0.5
"""
SGLANG_COUNTERS_ONLY = """# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="kimi"} 10.0
"""


def errors(seen: Collector) -> list[ErrorEvent]:
    return [e for e in seen.events if isinstance(e, ErrorEvent)]


def health(seen: Collector) -> list[ServerHealth]:
    return [e for e in seen.events if isinstance(e, ServerHealth)]


def stats(seen: Collector) -> list[ServerStats]:
    return [e for e in seen.events if isinstance(e, ServerStats)]


async def poll(routes: dict, until: Callable[[Collector], bool], **kw: object) -> tuple[Collector, MetricsPoller]:
    """Poll a server playing ``routes`` until ``until(seen)``: "said once" is judged over that many polls."""
    async with serve(routes) as url:
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, url, host="h", **{**FAST, **kw})  # type: ignore[arg-type]
        await poller.start()
        try:
            await seen.wait_for(lambda ev: until(seen))
        finally:
            await poller.stop()
    return seen, poller


async def test_a_server_without_server_info_is_said_once_and_plainly() -> None:
    seen, poller = await poll({"/health": lambda: (200, "")}, lambda seen: len(health(seen)) >= 8,
                              metrics_interval=None)
    [err] = errors(seen)
    assert err.source == "metrics" and err.message.startswith("this server has no /server_info (nor /get_server_info)")
    assert "drift from the profile is not checked" in err.message and "404" in err.detail
    assert "server_info" in poller.stopped_polls
    assert len(health(seen)) >= 3  # the rest is polled on


async def test_metrics_with_none_of_the_names_kimitui_reads_is_said_once() -> None:
    seen, _ = await poll({"/metrics": lambda: (200, FOREIGN), "/server_info": lambda: (200, {"tp_size": 8})},
                         lambda seen: len(stats(seen)) >= 8)
    [err] = errors(seen)
    assert err.message.startswith("/metrics has none of the names kimitui reads")
    assert "tgi_batch_current_size, tgi_queue_size" in err.detail
    assert len(stats(seen)) >= 3 and stats(seen)[-1].running_reqs is None  # still polled, and still empty


async def test_sglang_metrics_without_gauges_get_a_grace_then_are_said_once() -> None:
    """SGLang may register its gauges only once the scheduler first logs stats: not at once, but not forever."""
    async with serve({"/metrics": lambda: (200, SGLANG_COUNTERS_ONLY)}) as url:
        session = Session()
        seen = Collector(session)
        poller = MetricsPoller(session, url, host="h", **{**FAST, "info_interval": None})  # type: ignore[arg-type]
        poller.unknown_metrics_after_s = 0.4
        await poller.start()
        try:
            await seen.wait_for(lambda ev: len(stats(seen)) >= 2)  # scraped twice, well within the 0.4 s grace
            assert errors(seen) == []
            await seen.wait_for(lambda ev: errors(seen))  # the grace is over: said...
            scraped = len(stats(seen))
            await seen.wait_for(lambda ev: len(stats(seen)) >= scraped + 4)  # ...and not again on later scrapes
        finally:
            await poller.stop()
    [err] = errors(seen)
    assert err.message.startswith("/metrics has none of the names") and "sglang:prompt_tokens_total" in err.detail


async def test_vllm_metrics_are_mapped_and_what_is_missing_is_said_once_as_information() -> None:
    from tests.test_telemetry_metrics import VLLM_SCRAPE

    n = iter(range(10**6))

    def scrape() -> tuple[int, str]:
        i = next(n)
        return 200, VLLM_SCRAPE % dict(running=1.0, queries=10.0 * i, hits=i, prompt=100.0 * i, gen=50.0 * i)

    seen, _ = await poll({"/metrics": scrape}, lambda seen: len(stats(seen)) >= 8, info_interval=None)
    [note] = errors(seen)
    assert note.severity == "info" and note.message.startswith("/metrics is vLLM's")
    assert "not available there: cuda graph" in note.message
    last = stats(seen)[-1]
    assert last.running_reqs == 1.0 and last.gen_throughput and last.gen_throughput > 0
    assert last.cache_hit_rate == 0.1
