"""The simulated PD router (``python -m kimitui.sim.router``): what a client sees through it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx

from tests.support.net import free_port
from tests.support.simserver import REPO_ROOT
from tests.test_sim_pd import Deployment, chat, pd, start_router  # noqa: F401 - pd: the module's deployment fixture


def test_streaming_is_relayed_byte_for_byte_as_raw_utf8(pd: Deployment) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "écris-moi une phrase en français"}],
            "max_tokens": 80, "stream": True, "stream_options": {"include_usage": True}}
    raw = b""
    with httpx.stream("POST", pd.router.url + "/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for chunk in r.iter_raw():
            raw += chunk
    assert raw.endswith(b"data: [DONE]\n\n")
    assert b"\\u" not in raw  # nothing re-escaped on the way
    events = [json.loads(e[6:]) for e in raw.decode("utf-8").split("\n\n") if e.startswith("data: {")]
    text = "".join((e["choices"][0]["delta"].get("content") or "") for e in events if e.get("choices"))
    assert text and events[-1]["usage"]["completion_tokens"] > 1


def test_the_decode_answer_is_the_clients_and_the_models_list_comes_through(pd: Deployment) -> None:
    r = chat(pd.router.url, "hello", max_tokens=12)
    assert r.status_code == 200 and r.json()["object"] == "chat.completion"
    models = httpx.get(pd.router.url + "/v1/models", timeout=5).json()
    assert models["data"][0]["id"]
    assert httpx.get(pd.router.url + "/health_generate", timeout=10).status_code == 200
    completion = httpx.post(pd.router.url + "/v1/completions", json={"model": "m", "prompt": "x", "max_tokens": 5}, timeout=20)
    assert completion.status_code == 200 and completion.json()["object"] == "text_completion"


def test_a_server_that_is_down_fails_the_request_at_once() -> None:
    dead_prefill, dead_decode, port = free_port(), free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kimitui.sim.router", "--pd-disaggregation",
                             "--prefill", f"http://127.0.0.1:{dead_prefill}", "--decode", f"http://127.0.0.1:{dead_decode}",
                             "--port", str(port)], cwd=REPO_ROOT, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        t0 = time.monotonic()
        r = chat(url, "anyone there?")
        assert r.status_code == 503 and "unreachable" in r.json()["error"]["message"]
        assert time.monotonic() - t0 < 5
        assert httpx.get(url + "/health_generate", timeout=10).status_code == 503
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert b"127.0.0.1:" in err and b"PD Disaggregated" in err


def test_the_router_adds_the_bootstrap_fields_and_binds_loopback() -> None:
    from kimitui.sim.router import parse_args, prefills_from

    args = parse_args(["--pd-disaggregation", "--prefill", "http://prefill-a.example:30001", "9000", "--prefill",
                       "http://prefill-b.example:30001", "--decode", "http://decode.example:30002"])
    assert args.host == "127.0.0.1"
    prefills = prefills_from(args.prefill)
    assert [(p.bootstrap_host, p.bootstrap_port) for p in prefills] == [("prefill-a.example", 9000), ("prefill-b.example", 8998)]
