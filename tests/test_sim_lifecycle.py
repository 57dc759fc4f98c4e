"""The simulated server's life: start-up log and health, GPU state, port 0, clean shutdown."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx

from kimitui.sim.gpustate import read_state
from tests.support.simserver import REPO_ROOT, start_sim
from tests.support.waiting import wait_until

STARTUP_ORDER = (
    "] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6'",
    " TP7 EP7] Init torch distributed begin.",
    " TP0 EP0] Load weight begin. avail mem=",
    "Loading safetensors checkpoint shards: 100% Completed | 64/64",
    " TP0 EP0] Load weight end. elapsed=",
    " TP0 EP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
    " TP0 EP0] Capture cuda graph begin. This can take up to several minutes.",
    "Capturing batches (bs=512 avail_mem=",
    " TP0 EP0] Capture cuda graph end. Time elapsed:",
    " TP0 EP0] max_total_num_tokens=",
    "] INFO:     Started server process [",
    "] INFO:     Uvicorn running on http://127.0.0.1:",
    '"GET /model_info HTTP/1.1" 200 OK',
    '"POST /generate HTTP/1.1" 200 OK',
    "] The server is fired up and ready to roll!",
)


def test_health_is_503_while_starting_and_the_log_follows_sglang():
    with start_sim("ep8-tuned", time_scale=15.0, wait_ready=False) as sim:
        codes = []
        t0 = time.monotonic()
        states = []
        while time.monotonic() - t0 < 30:
            code = sim.health()
            if code is not None:
                codes.append(code)
            states.append(read_state(sim.state_path))
            if code == 200:
                break
            time.sleep(0.1)  # the sampling period: health codes and GPU states all through start-up
        assert codes[0] == 503 and codes[-1] == 200
        assert time.monotonic() - t0 > 1.5  # ~45 s of start-up at time-scale 15
        text = sim.output()
        positions = [text.find(needle) for needle in STARTUP_ORDER]
        assert all(p >= 0 for p in positions), [n for n, p in zip(STARTUP_ORDER, positions) if p < 0]
        assert positions == sorted(positions)
        assert f"Uvicorn running on http://127.0.0.1:{sim.port} (Press CTRL+C to quit)" in text
        assert text.count("Load weight end.") == 8  # one per TP rank
        assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0 EP0\] Decode batch|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0 EP0\] Prefill batch, #new-seq: 1, #new-token: \d+", text, re.M)
        # GPU memory filled up during start-up and ~85 GB per GPU when serving
        mems = [s.gpus[0].mem_used_mib for s in states if s.pid is not None]
        assert mems and mems[0] < mems[-1]
        # the state file is rewritten 4x per second
        wait_until(lambda: read_state(sim.state_path).phase == "serving", 3, "the GPU state to say serving",
                   interval=0.05, detail=lambda: read_state(sim.state_path).phase)
        serving = read_state(sim.state_path)
        assert serving.phase == "serving" and serving.pid == sim.proc.pid
        assert all(80_000 < g.mem_used_mib < 90_000 for g in serving.gpus)
        assert [g.proc_title for g in serving.gpus] == [f"sglang::scheduler_TP{i}_EP{i}" for i in range(8)]


def test_sigterm_shuts_down_cleanly_and_leaves_idle_gpus():
    sim = start_sim("tp8", time_scale=100.0)
    with sim:
        assert read_state(sim.state_path).gpus[0].proc_title == "sglang::scheduler_TP0"
    assert sim.returncode == 0
    lines = sim.lines()
    assert any("INFO:     Shutting down" in line for line in lines)
    assert any(f"Finished server process [{sim.proc.pid}]" in line for line in lines)
    raw = json.loads(sim.state_path.read_text())
    assert raw["pid"] is None and all(g["mem_used_mib"] == 0 for g in raw["gpus"])


def test_port_zero_reports_the_bound_port_and_sigint_exits_0(tmp_path):
    env = {**os.environ, "KIMITUI_SIM_STATE": str(tmp_path / "gpus.json"), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "kimitui", "sim", "serve", "--profile", "ep8-tuned", "--port", "0", "--time-scale", "100"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO_ROOT)
    try:
        port = None
        for line in proc.stdout:  # type: ignore[union-attr]
            m = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+) ", line)
            if m:
                port = int(m.group(1))
            if "fired up and ready to roll" in line:
                break
        assert port and port > 0
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bad_profile_is_a_clear_error_not_a_traceback():
    out = subprocess.run(
        [sys.executable, "-m", "kimitui", "sim", "serve", "--profile", "no-such-profile"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert out.returncode == 2
    assert "no-such-profile" in out.stderr and "Traceback" not in out.stderr


def test_port_in_use_is_reported_like_uvicorn():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "kimitui", "sim", "serve", "--profile", "ep8-tuned", "--port", str(port)]
        out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, timeout=20)
    assert out.returncode == 1
    assert f"error while attempting to bind on address ('127.0.0.1', {port})" in out.stderr
