"""The simulated SGLang server's HTTP API, driven by real clients (openai SDK, httpx, urllib)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.simserver import SimServerProcess, start_sim
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServerProcess]:
    with start_sim("ep8-tuned", time_scale=50.0, seed=5, extra_args=("--enable-metrics",)) as server:
        yield server


@pytest.fixture()
def oai(sim: SimServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0)


def msgs(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_openai_non_streaming_with_usage(sim, oai):
    r = oai.chat.completions.create(model=sim.model, messages=msgs("Say OK"), max_tokens=40, extra_body={"ignore_eos": True})
    assert r.object == "chat.completion" and r.model == sim.model
    assert r.usage.completion_tokens == 40 and r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + 40
    assert r.choices[0].message.role == "assistant" and len(r.choices[0].message.content) > 40


def test_openai_streaming_one_chunk_per_token_then_usage(sim, oai):
    stream = oai.chat.completions.create(
        model=sim.model,
        messages=msgs("Explain relativity."),
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len(content) == 64  # one token per chunk: no bursts unless the model says so
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 64


def test_stream_timing_follows_the_model(sim):
    """Chunk gaps are decode steps (~15 ms at time-scale 1 for ep8-tuned), not one burst."""
    body = {"model": sim.model, "messages": msgs("timing"), "max_tokens": 200, "ignore_eos": True, "stream": True}
    stamps = []
    with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"role"' not in line:
                stamps.append(time.perf_counter())
    assert len(stamps) == 200
    decode_s = (stamps[-1] - stamps[0]) * sim.time_scale  # back to time-scale 1
    tok_s = 199 / decode_s
    assert 20 < tok_s < 80, tok_s  # model: ~66 tok/s; loose for a busy shared box
    assert (stamps[100] - stamps[0]) > 0.3 * (stamps[-1] - stamps[0])  # spread out, not all at the end


def test_output_length_depends_on_prompt_unless_ignore_eos(sim, oai):
    lengths = {}
    for p in ("What is 2+2? Answer with just the number.", "Write a haiku about programming.", "Write a JSON parser."):
        r = oai.chat.completions.create(model=sim.model, messages=msgs(p), max_tokens=4000)
        lengths[p] = r.usage.completion_tokens
        assert r.choices[0].finish_reason in ("stop", "length")
    assert len(set(lengths.values())) > 1
    again = oai.chat.completions.create(model=sim.model, messages=msgs("Write a haiku about programming."), max_tokens=4000)
    assert again.usage.completion_tokens == lengths["Write a haiku about programming."]
    capped = oai.chat.completions.create(model=sim.model, messages=msgs("Write a JSON parser."), max_tokens=5)
    assert capped.usage.completion_tokens == min(5, lengths["Write a JSON parser."])


def test_seed_script_shape_urllib_non_stream(sim):
    """The seeds' benchmark: urllib, non-stream chat, reads usage.completion_tokens."""
    payload = json.dumps({"model": sim.model, "messages": msgs("Say OK"), "temperature": 0, "max_tokens": 16})
    req = urllib.request.Request(sim.url + "/v1/chat/completions", data=payload.encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        data = json.load(r)
    assert 0 < data["usage"]["completion_tokens"] <= 16


def test_bench_serving_shapes(sim):
    """sglang.bench_serving: chat sends max_completion_tokens; native /generate streams cumulative text."""
    chat = {"model": sim.model, "messages": msgs("hi"), "max_completion_tokens": 12, "ignore_eos": True, "stream": False}
    r = httpx.post(sim.url + "/v1/chat/completions", json=chat, timeout=30).json()
    assert r["usage"]["completion_tokens"] == 12
    native = {"text": "Hello", "sampling_params": {"max_new_tokens": 10, "ignore_eos": True, "temperature": 0}, "stream": True}
    events = []
    with httpx.stream("POST", sim.url + "/generate", json=native, timeout=30) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    bodies = [json.loads(e) for e in events[:-1]]
    assert bodies[-1]["meta_info"]["completion_tokens"] == 10
    assert bodies[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 10}
    assert all(bodies[i + 1]["text"].startswith(bodies[i]["text"]) for i in range(len(bodies) - 1))  # cumulative
    plain = httpx.post(sim.url + "/generate", json={"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4}}, timeout=30).json()
    assert plain["meta_info"]["prompt_tokens"] == 3 and len(plain["output_ids"]) <= 4


def test_completions_endpoint_stream_and_not(sim, oai):
    r = oai.completions.create(model=sim.model, prompt="Once upon", max_tokens=8, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 8 and r.choices[0].text
    chunks = list(oai.completions.create(model=sim.model, prompt="Once upon", max_tokens=8, stream=True, extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == r.choices[0].text  # deterministic for a prompt and seed


def test_stop_strings_end_generation(sim):
    base = {"model": sim.model, "prompt": "stop test", "max_tokens": 300, "ignore_eos": True}
    full = httpx.post(sim.url + "/v1/completions", json=base, timeout=30).json()["choices"][0]["text"]
    word = full.split()[5]
    r = httpx.post(sim.url + "/v1/completions", json=base | {"stop": [word]}, timeout=30).json()
    assert r["choices"][0]["finish_reason"] == "stop" and r["choices"][0]["matched_stop"] == word
    assert r["usage"]["completion_tokens"] < 300


def test_info_endpoints(sim):
    models = httpx.get(sim.url + "/v1/models").json()
    assert models["data"][0]["id"] == sim.model and models["data"][0]["owned_by"] == "sglang"
    assert httpx.get(sim.url + "/v1/models/nope").status_code == 404
    info = httpx.get(sim.url + "/server_info").json()
    assert info["sim_time_scale"] == 50.0 and info["tp_size"] == 8 and info["ep_size"] == 8
    assert info["max_running_requests"] == 256 and info["num_continuous_decode_steps"] == 8
    assert info["internal_states"][0]["memory_usage"]["token_capacity"] == info["max_total_num_tokens"]
    # one version for the simulator: the one whose parser it plays (the preflight's "0.5.23 (simulated)")
    from kimitui.sglang.flag_check import DEFAULT_VERSION
    assert info["version"] == DEFAULT_VERSION == "0.5.23"
    assert httpx.get(sim.url + "/get_server_info").json()["status"] == "ready"
    assert httpx.get(sim.url + "/model_info").json()["is_generation"] is True
    loads = httpx.get(sim.url + "/v1/loads").json()
    assert loads["loads"][0]["max_total_num_tokens"] == info["max_total_num_tokens"]
    assert any("'/get_server_info' is deprecated" in line for line in sim.lines())


def test_metrics_exposes_sglang_names(sim, oai):
    oai.chat.completions.create(model=sim.model, messages=msgs("metrics"), max_tokens=50, extra_body={"ignore_eos": True})
    text = httpx.get(sim.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:token_usage",
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:e2e_request_latency_seconds",
        "sglang:generation_tokens",
        "sglang:prompt_tokens",
    ):
        assert name in families, name
    gen = [s for s in families["sglang:generation_tokens"].samples if s.name.endswith("_total")]
    assert gen[0].value >= 50 and gen[0].labels["model_name"] == sim.model
    labels = families["sglang:num_running_reqs"].samples[0].labels
    assert {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"} <= set(labels)


def test_flush_cache_only_when_idle(sim):
    assert httpx.post(sim.url + "/flush_cache").status_code == 200
    body = {"model": sim.model, "messages": msgs("busy"), "max_tokens": 2000, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
        lines = r.iter_lines()  # keep the iterator: dropping it closes the response
        next(lines)
        busy = httpx.post(sim.url + "/flush_cache")
    assert busy.status_code == 400
    sim.wait_for_line("Cache not flushed because there are pending requests.")
    assert any("Cache flushed successfully!" in line for line in sim.lines())


def test_bad_requests_say_which_field(sim):
    r = httpx.post(sim.url + "/v1/chat/completions", json={"model": sim.model}, timeout=10)
    assert r.status_code == 400 and "messages" in r.json()["message"]
    r = httpx.post(sim.url + "/v1/chat/completions", json={"messages": msgs("x"), "max_tokens": -1}, timeout=10)
    assert r.status_code == 400 and "max_tokens" in r.json()["message"]
    r = httpx.post(sim.url + "/v1/chat/completions", content=b"{not json", timeout=10)
    assert r.status_code == 400
    r = httpx.post(sim.url + "/v1/chat/completions", json={"messages": msgs("x"), "max_tokens": 40000}, timeout=10)
    assert r.status_code == 400 and "maximum context length of 32768" in r.json()["message"]
    # a prompt longer than the context is refused first, in SGLang's own words
    r = httpx.post(sim.url + "/v1/chat/completions", json={"messages": msgs("go " * 40000), "max_tokens": 8},
                   timeout=10)
    assert r.status_code == 400 and r.json()["message"].endswith("longer than the model's context length (32768 tokens).")


def test_client_disconnect_frees_the_slot(sim):
    body = {"model": sim.model, "messages": msgs("abandon"), "max_tokens": 5000, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
        for _ in zip(range(5), r.iter_lines()):
            pass
    def running() -> int:
        return httpx.get(sim.url + "/v1/loads").json()["aggregate"]["total_reqs"]

    wait_until(lambda: running() == 0, 5, "the abandoned request's slot to be freed", interval=0.05, detail=running)


def test_decode_lines_every_40_iterations_with_true_figures(sim, oai):
    import concurrent.futures
    import re

    def go(i: int) -> int:
        r = oai.chat.completions.create(model=sim.model, messages=msgs(f"c{i}"), max_tokens=400, extra_body={"ignore_eos": True})
        return r.usage.completion_tokens

    before = len(sim.lines())
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(go, range(4))) == [400] * 4
    new = sim.lines()[before:]
    decode = [line for line in new if "Decode batch," in line]
    # 4 x 399 decode steps: between 10 lines (all 4 in one batch) and 40 (one after another)
    assert 9 <= len(decode) <= 40
    figures = [tuple(int(x) for x in re.search(r"#running-req: (\d+), #token: (\d+)", line).groups()) for line in decode]
    assert all(1 <= running <= 4 for running, _ in figures)
    assert any(running >= 2 for running, _ in figures)  # continuous batching: they share decode steps
    assert all(running * 5 <= tokens <= running * (20 + 400) for running, tokens in figures)  # KV = prompt + output so far
    assert all("cuda graph: True" in line for line in decode)
    assert any("Prefill batch, #new-seq:" in line for line in new)
    assert sum('"POST /v1/chat/completions HTTP/1.1" 200' in line for line in new) == 4


def test_fast_chunk_template_is_byte_identical_to_the_json_form():
    from kimitui.sim import api
    from kimitui.sim.http_gen import _sse, content_chunk_template

    p = api.parse_openai({"messages": msgs("x")}, "chat")
    for chat in (True, False):
        head, tail = content_chunk_template(p, 'odd "model"', 1780000000, chat)
        for text in (" word", '"quoted"\n', "ünï\\code", " “日本” 🙂"):
            full = api.chat_chunk(p, 'odd "model"', 1780000000, {"reasoning_content": None, "content": text}) if chat else api.completion_chunk(p, 'odd "model"', 1780000000, text)
            assert head + json.dumps(text, ensure_ascii=False).encode() + tail == _sse(full)


def _dechunk_frames(raw: bytes) -> list[bytes]:
    """The data of each HTTP/1.1 chunk of a chunked body, in order."""
    frames, pos = [], 0
    while True:
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol].split(b";")[0], 16)
        if size == 0:
            return frames
        frames.append(raw[eol + 2:eol + 2 + size])
        pos = eol + 2 + size + 2


def test_stream_writes_raw_utf8_split_inside_characters(sim):
    """What SGLang 0.5.23 writes (model_dump_json: raw UTF-8), with characters cut between writes."""
    import socket

    body = json.dumps({"model": sim.model, "messages": msgs("Write about Tokyo cafés."), "max_tokens": 300,
                       "ignore_eos": True, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    frames = _dechunk_frames(rest)
    stream = b"".join(frames)
    assert b"\\u" not in stream  # nothing escaped: raw UTF-8 like model_dump_json()
    text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                   for line in stream.decode().split("\n\n")
                   if line.startswith("data: {") and json.loads(line[6:])["choices"])
    assert sum(not ch.isascii() for ch in text) >= 5
    split = [f for f in frames if not f.isascii() and f.decode("utf-8", "replace") != f.decode("utf-8", "ignore")]
    assert split, "some write must end or start inside a multi-byte character"
