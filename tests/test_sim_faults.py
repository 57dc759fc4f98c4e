"""Each injected fault, as a client and an operator would see it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.simserver import start_sim
from tests.support.waiting import wait_until


def write_profile(folder: Path, name: str, body: str) -> str:
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}\n')
    return str(path)


def test_crash_during_weight_load_exits_nonzero_with_the_error():
    with start_sim("ep8-tuned", time_scale=50.0, fault="crash_load", wait_ready=False) as sim:
        rc = sim.wait_exit(timeout=30)
    assert rc != 0
    text = sim.output()
    assert "Load weight begin." in text and "Load weight end." not in text
    assert "Scheduler hit an exception: Traceback (most recent call last):" in text
    assert "SafetensorError: Error while deserializing header" in text
    assert "Received sigquit from a child process. It usually means the child failed." in text
    assert "fired up" not in text


def test_oom_at_startup_exits_nonzero_with_sglang_oom_text():
    with start_sim("ep8-tuned", time_scale=50.0, fault="oom_start", wait_ready=False) as sim:
        rc = sim.wait_exit(timeout=30)
    assert rc != 0
    text = sim.output()
    assert "torch.OutOfMemoryError: CUDA out of memory." in text
    assert "Capture cuda graph failed:" in text and "--mem-fraction-static" in text
    assert "fired up" not in text


def test_scheduler_hang_trips_the_watchdog_then_exits(tmp_path):
    profile = write_profile(tmp_path, "hangy", 'extends = "ep8-tuned"\nwatchdog_timeout = 40.0')
    with start_sim(profile, time_scale=100.0, fault="hang") as sim:
        def stuck() -> None:
            try:
                httpx.post(sim.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 10}, timeout=20)
            except httpx.HTTPError:
                pass

        t = threading.Thread(target=stuck, daemon=True)
        t.start()
        # no scheduler output: health times out
        wait_until(lambda: sim.health() == 503, 5, "/health to answer 503", interval=0.02)
        rc = sim.wait_exit(timeout=20)
    assert rc != 0
    text = sim.output()
    assert "Scheduler watchdog timeout (self.watchdog_timeout=40.0, self.soft=False)" in text
    assert "SIGQUIT received. signum=3" in text
    assert "Health check failed." in text


def test_http_500_rate_is_seeded_and_partial():
    with start_sim("ep8-tuned", time_scale=100.0, fault="http_500", fault_rate=0.5, seed=3) as sim:
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4}
        codes = [httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=10).status_code for _ in range(16)]
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.InternalServerError):
            for _ in range(20):
                client.chat.completions.create(model=sim.model, messages=body["messages"], max_tokens=4)
    assert set(codes) == {200, 500}
    assert 3 <= codes.count(500) <= 13
    with start_sim("ep8-tuned", time_scale=100.0, fault="http_500", fault_rate=0.5, seed=3) as again:
        assert [httpx.post(again.url + "/v1/chat/completions", json=body, timeout=10).status_code for _ in range(16)] == codes


def test_drop_cuts_the_stream_mid_way():
    with start_sim("ep8-tuned", time_scale=100.0, fault="drop", fault_rate=1.0) as sim:
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 200, "ignore_eos": True, "stream": True}
        got: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=10) as r:
                for line in r.iter_lines():
                    got.append(line)
        assert "data: [DONE]" not in got
        assert 0 < sum(1 for line in got if '"content":"' in line) < 200
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.APIError):
            list(client.chat.completions.create(model=sim.model, messages=body["messages"], max_tokens=200, stream=True, extra_body={"ignore_eos": True}))
        assert sim.health() == 200  # the server itself survives


def test_stall_holds_one_request_for_seconds_mid_stream():
    with start_sim("ep8-tuned", time_scale=50.0, fault="stall", fault_rate=1.0) as sim:
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 120, "ignore_eos": True, "stream": True}
        stamps = []
        with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if '"content":"' in line and '"role"' not in line:
                    stamps.append(time.perf_counter())
        gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
        assert len(stamps) == 120
        assert gaps[-1] * sim.time_scale > 8.0  # the 10 s stall (time-scale 1)
        assert gaps[len(gaps) // 2] * sim.time_scale < 0.25  # the rest decodes normally (~16 ms steps)
