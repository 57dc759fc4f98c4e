"""One chat request through kimitui's own HTTP/1.1 client, as a sweep sends it, to a test's server."""

from __future__ import annotations

import time

from kimitui.events import RequestResult
from kimitui.loadgen import h1client
from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, to_result


async def h1_request(url: str) -> RequestResult:
    """The request's result (body ``{}``: the test's server answers whatever it was given to)."""
    deadlines = Deadlines(total_s=10)
    pool = h1client.Pool(url + "/v1/chat/completions", deadlines)
    trace = RequestTrace("r", 1, False, time.perf_counter_ns())
    try:
        await h1client.run_request(pool, pool.request_bytes(b"{}", "r"), trace, deadlines)
    finally:
        pool.close()
    return to_result(trace, "s", Clock())
