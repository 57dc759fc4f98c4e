"""What the real SGLang 0.5.18 server answered over HTTP (../shared/data/sglang-0.5.18-cpu), through kimitui.

The captured answers are served again, byte for byte, by a 127.0.0.1 server (tests/support/real_replay.py)
and read by kimitui's real code: the metrics poller (/metrics, /server_info or its deprecated alias
/get_server_info, /v1/loads or the deprecated /get_load, /health), the /server_info readers and the drift
check, and the load generator's two streaming clients on the raw SSE bytes of a real chat completion.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kimitui.events import RequestResult, ServerHealth, ServerInfo, ServerStats
from kimitui.loadgen import client, h1client
from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, to_result
from kimitui.session import Session
from kimitui.sglang.loads import stats_from_get_load, stats_from_loads
from kimitui.sglang.server_info import flat_args, rank_states, server_drift, version
from kimitui.telemetry.metrics_poll import MetricsPoller
from tests.support.one_request import h1_request
from tests.support.real_replay import replay
from tests.support.real_sglang import MODELS, read_http, real_output_dir

REAL = real_output_dir()
MOE = REAL / "tiny-qwen3moe"
REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(60)


def _json(path: Path) -> object:
    status, headers, body = read_http(path)
    assert status == 200 and headers["content-type"] == "application/json"
    return json.loads(body)


def _info(model: str, name: str = "server_info.txt") -> dict[str, object]:
    data = _json(REAL / model / name)
    assert isinstance(data, dict)
    return data


# --------------------------------------------------------------------------- /server_info


@pytest.mark.parametrize("model", MODELS)
def test_server_info_is_read_as_the_real_server_says_it(model: str) -> None:
    info = _info(model)
    assert len(info) > 450 and version(info) == "0.5.18" and info["status"] == "ready"
    states = rank_states(info)
    assert len(states) == 1  # one DP rank
    assert states[0]["effective_max_running_requests_per_dp"] == info["max_running_requests"] == 16
    assert isinstance(states[0]["memory_usage"], dict) and states[0]["memory_usage"]["token_capacity"] == 8192
    args = flat_args(info)
    assert args["tp_size"] == 1 and args["model_path"] == f"models/{model}" and args["max_total_num_tokens"] == 8192
    assert "internal_states" not in args and "startup_time" not in args  # nested: not an arg
    # the deprecated alias answers the same keys (the server logs a deprecation line for it)
    assert set(_info(model, "get_server_info.txt")) == set(info)


def test_drift_is_judged_on_the_real_key_set() -> None:
    info = _info("tiny-qwen3moe")
    asked = {"expert_balancedness_report_mode": "both", "expert_distribution_recorder_mode": "stat",
             "tokenizer_metrics_allowed_custom_labels": ["kimitui_sweep", "kimitui_level"], "context_length": None,
             "mem_fraction_static": info["mem_fraction_static"], "tp_size": 1}
    assert server_drift(info, asked) == {"context_length": [None, info["context_length"]]}
    assert server_drift(info, {"ep_size": 2, "enable_eplb": True, "no_such_flag": 3}) == {
        "ep_size": [2, 1], "enable_eplb": [True, False]}
    # 0.5.18 has no launch_command (0.5.23 adds it): the flat args are what is judged
    assert "launch_command" not in info


# --------------------------------------------------------------------------- /v1/loads, /get_load


def test_v1_loads_and_get_load_are_read() -> None:
    loads = _json(MOE / "v1_loads.txt")
    assert isinstance(loads, dict) and loads["version"] == "0.5.18"
    rank = loads["loads"][0]
    stats = stats_from_loads(loads, host="real")
    assert (stats.running_reqs, stats.queued_reqs, stats.num_tokens) == (0, 0, 0)
    assert stats.utilization == rank["utilization"] == 0.0 and stats.token_usage == rank["token_usage"]
    assert stats.extra["dp0_utilization"] == 0.0 and stats.extra["dp0_num_waiting_reqs"] == 0.0
    old = _json(MOE / "get_load.txt")
    assert isinstance(old, list)
    stats = stats_from_get_load(old, host="real")
    assert (stats.running_reqs, stats.queued_reqs, stats.num_tokens) == (0.0, 0.0, 0.0)
    assert stats_from_get_load([{"dp_rank": 0, "num_reqs": 5, "num_waiting_reqs": 2, "num_tokens": 90},
                                {"dp_rank": 1, "num_reqs": 1, "num_waiting_reqs": 0, "num_tokens": 10}],
                               host="x").model_dump(include={"running_reqs", "queued_reqs", "num_tokens"}) == {
        "running_reqs": 4.0, "queued_reqs": 2.0, "num_tokens": 100.0}


# --------------------------------------------------------------------------- the poller on the real answers


FAST = dict(metrics_interval=None, info_interval=None, loads_interval=None, health_interval=None, startup_grace_s=0.0)


async def test_the_poller_reads_every_real_endpoint() -> None:
    routes = {"/metrics": MOE / "metrics_after.txt", "/server_info": MOE / "server_info.txt",
              "/v1/loads": MOE / "v1_loads.txt", "/health": MOE / "health.txt"}
    async with replay(routes) as url:
        poller = MetricsPoller(Session(), url, host="real", expected_args={"ep_size": 2}, **FAST)
        await poller.start()
        try:
            metrics = await poller.poll_metrics()
            info = await poller.poll_server_info()
            loads = await poller.poll_loads()
            health = await poller.poll_health()
        finally:
            await poller.stop()
    assert isinstance(metrics, ServerStats) and metrics.cuda_graph is False and metrics.retracted_reqs == 0.0
    assert isinstance(info, ServerInfo) and info.version == "0.5.18" and info.args["status"] == "ready"
    assert info.drift == {"ep_size": [2, 1]} and info.args["tokenizer_metrics_custom_labels_header"]
    assert isinstance(loads, ServerStats) and loads.source == "loads" and loads.utilization == 0.0
    assert isinstance(health, ServerHealth) and health.ok and health.status == 200 and health.detail == ""


async def test_an_older_server_is_read_through_its_deprecated_endpoints() -> None:
    """No /server_info nor /v1/loads (an SGLang before them): /get_server_info and /get_load are read."""
    routes = {"/server_info": None, "/get_server_info": MOE / "get_server_info.txt", "/v1/loads": None,
              "/get_load": MOE / "get_load.txt"}
    async with replay(routes) as url:
        poller = MetricsPoller(Session(), url, host="old", **FAST)
        await poller.start()
        try:
            info = await poller.poll_server_info()
            first = await poller.poll_loads()
            again = await poller.poll_loads()
        finally:
            await poller.stop()
    assert info.version == "0.5.18" and info.args["model_path"] == "models/tiny-qwen3moe"
    for stats in (first, again):
        assert stats.source == "loads" and (stats.running_reqs, stats.queued_reqs, stats.num_tokens) == (0, 0, 0)


RECORDER_ENDPOINTS = ("/start_expert_distribution_record", "/stop_expert_distribution_record",
                      "/dump_expert_distribution_record")


async def test_the_expert_recorder_endpoints_that_killed_the_real_server_are_never_called() -> None:
    """On the real CPU server, POST /dump_expert_distribution_record (and /start_... without a recorder mode)
    killed the whole server: the client got no reply at all.  kimitui reads expert balance from the log and
    /metrics only: polled for every figure, every endpoint served, it never asks the recorder."""
    assert read_http(MOE / "expert_rec_start.txt")[::2] == (200, "Start recording the expert distribution.\n")
    assert read_http(MOE / "expert_rec_dump.txt")[0] == 0  # no HTTP answer: the server died
    routes = {"/metrics": MOE / "metrics_after.txt", "/server_info": MOE / "server_info.txt",
              "/v1/loads": MOE / "v1_loads.txt", "/health": MOE / "health.txt",
              **{r: MOE / f"expert_rec_{r.split('_')[0].strip('/')}.txt" for r in RECORDER_ENDPOINTS}}
    hits: list[str] = []
    async with replay(routes, hits) as url:
        poller = MetricsPoller(Session(), url, host="real", **FAST)
        await poller.start()
        try:
            for _ in range(3):
                await poller.poll_metrics()
                await poller.poll_server_info()
                await poller.poll_loads()
                await poller.poll_health()
        finally:
            await poller.stop()
    assert hits and not [h for h in hits if h.split(" ")[1] in RECORDER_ENDPOINTS], hits
    named = [str(p.relative_to(REPO)) for p in (REPO / "kimitui").rglob("*.py")
             if any(e.strip("/") in p.read_text() for e in RECORDER_ENDPOINTS)]
    assert not named, f"kimitui code names an endpoint that kills SGLang: {named}"


@pytest.mark.parametrize("model", MODELS)
def test_the_other_endpoints_answer_as_kimitui_expects(model: str) -> None:
    """health, health_generate: 200 with an empty body; /v1/models names the served model; /model_info and
    its deprecated alias agree; /flush_cache answers 200 to GET and POST with its two-line text."""
    for name in ("health.txt", "health_generate.txt"):
        assert read_http(REAL / model / name)[::2] == (200, "")
    models = _json(REAL / model / "v1_models.txt")
    assert isinstance(models, dict) and [m["id"] for m in models["data"]] == [f"models/{model}"]
    info = _json(REAL / model / "model_info.txt")
    assert isinstance(info, dict) and info == _json(REAL / model / "get_model_info.txt")
    assert info["model_path"] == f"models/{model}" and info["is_generation"] is True
    for name in ("flush_cache_get.txt", "flush_cache_post.txt"):
        status, _, body = read_http(REAL / model / name)
        assert status == 200 and body.startswith("Cache flushed.\n")


# --------------------------------------------------------------------------- the streaming clients


def _stream_facts(model: str) -> tuple[int, int, int, str]:
    """(content chunks, completion tokens, prompt tokens, finish reason) as the raw bytes say them."""
    _, _, body = read_http(REAL / model / "chat_stream_raw.txt")
    events = [e.removeprefix("data: ") for e in body.split("\n\n") if e.strip()]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and chunks[0]["choices"][0]["delta"]["content"] == ""
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    content = sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content"))
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    usage = chunks[-1]["usage"]
    return content, usage["completion_tokens"], usage["prompt_tokens"], finish[-1]


async def _aio(url: str) -> RequestResult:
    trace = RequestTrace("r", 1, False, time.perf_counter_ns())
    async with client.make_session(1) as http:
        await client.run_request(http, url + "/v1/chat/completions", b"{}", trace, Deadlines(total_s=10))
    return to_result(trace, "s", Clock())


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("send", [h1_request, _aio], ids=["h1client", "aiohttp"])
async def test_the_real_stream_is_counted_from_its_usage(model: str, send: Callable[[str], Awaitable[RequestResult]]) -> None:
    """The role chunk (empty content) is no token and no first token; each content chunk is one chunk; the
    usage chunk (``choices: []``) gives the counts; ``[DONE]`` ends it cleanly."""
    content, completion, prompt, finish = _stream_facts(model)
    async with replay({"/v1/chat/completions": REAL / model / "chat_stream_raw.txt"}) as url:
        result = await send(url)
    assert result.ok, result.error
    assert result.chunks == content and content > 1
    assert result.completion_tokens == completion and result.tokens_from_usage
    assert result.prompt_tokens == prompt and result.finish_reason == finish == "length"
    assert result.ttft_s is not None and result.ttft_s <= result.e2e_s


@pytest.mark.parametrize("model", MODELS)
async def test_a_sweep_finds_the_model_and_flushes_the_cache_on_the_real_answers(model: str) -> None:
    """``/v1/models`` names the model a sweep sends to; ``POST /flush_cache`` (200, its two-line text) is a
    flush, not an error."""
    from kimitui.events import Event, SweepSpec
    from kimitui.loadgen.sweep import SweepEngine, resolve_model

    routes = {"/v1/models": REAL / model / "v1_models.txt", "/flush_cache": REAL / model / "flush_cache_post.txt"}
    emitted: list[Event] = []
    async with replay(routes) as url:
        assert await resolve_model(url) == f"models/{model}"
        spec = SweepSpec.model_validate({"url": url, "model": f"models/{model}", "levels": [1], "max_tokens": 8})
        engine = SweepEngine(spec, emitted.append, host="real")
        await engine._flush_cache()
    assert emitted == [] and not engine._no_flush_cache
