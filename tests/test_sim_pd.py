"""PD disaggregation on the simulated host: a prefill and a decode server on one host's GPUs 0-3 / 4-7,
behind the simulated router, over real HTTP on 127.0.0.1 (docs/pd.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.net import free_port
from tests.support.simserver import REPO_ROOT, SimServerProcess, start_sim
from tests.support.waiting import wait_until

SCALE = 50.0


@dataclass
class Router:
    proc: subprocess.Popen[bytes]
    url: str

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_router(prefill: SimServerProcess, bootstrap: int, decode: SimServerProcess) -> Router:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kimitui.sim.router", "--pd-disaggregation",
                             "--prefill", prefill.url, str(bootstrap), "--decode", decode.url, "--port", str(port)],
                            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, 20, "the router to answer /health", interval=0.05)
    return Router(proc, url)


@dataclass
class Deployment:
    prefill: SimServerProcess
    decode: SimServerProcess
    failing: SimServerProcess
    """A decode server whose every transfer fails (``--fault transfer_fail --fault-rate 1``)."""
    router: Router
    router_failing: Router
    bootstrap: int
    state: Path


def tp4_profile(folder: Path) -> str:
    path = folder / "tp4.toml"
    path.write_text('name = "tp4"\nextends = "ep8-tuned"\ntp_size = 4\nep_size = 4\nenable_metrics = true\n')
    return str(path)


@pytest.fixture(scope="module")
def pd() -> Iterator[Deployment]:
    folder = Path(tempfile.mkdtemp(prefix="kimitui-pd-"))
    profile = tp4_profile(folder)
    state = folder / "gpus.json"
    env = {"KIMITUI_SIM_STATE": str(state)}
    bootstrap = free_port()
    prefill = start_sim(profile, time_scale=SCALE, env=env, wait_ready=False, extra_args=[
        "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(bootstrap)])
    decode = start_sim(profile, time_scale=SCALE, env=env, wait_ready=False, extra_args=[
        "--disaggregation-mode", "decode", "--base-gpu-id", "4", "--disaggregation-transfer-backend", "nixl"])
    failing = start_sim(profile, time_scale=SCALE, env={"KIMITUI_SIM_STATE": str(folder / "other.json")},
                        wait_ready=False, fault="transfer_fail", fault_rate=1.0,
                        extra_args=["--disaggregation-mode", "decode", "--base-gpu-id", "4"])
    servers = [prefill, decode, failing]
    routers: list[Router] = []
    try:
        for s in servers:
            s.start()  # all three start at once, then each is waited for
        for s in servers:
            s.wait_healthy(s.ready_timeout)
        routers = [start_router(prefill, bootstrap, decode), start_router(prefill, bootstrap, failing)]
        yield Deployment(prefill, decode, failing, routers[0], routers[1], bootstrap, state)
    finally:
        for r in routers:
            r.stop()
        for s in servers:
            s.stop()
            s.cleanup()


def chat(url: str, content: str, max_tokens: int = 60, **extra: object) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, **extra}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=30)


def load(url: str, n: int = 12, max_tokens: int = 120) -> list[int]:
    with ThreadPoolExecutor(n) as pool:
        return [r.status_code for r in pool.map(lambda i: chat(url, f"question {i} " * 30, max_tokens), range(n))]


def test_requests_through_the_router_get_prefilled_transferred_and_decoded(pd: Deployment) -> None:
    r = chat(pd.router.url, "hello there")
    assert r.status_code == 200
    body = r.json()
    assert body["choices"][0]["message"]["content"] and body["usage"]["completion_tokens"] > 1
    assert set(load(pd.router.url)) == {200}


def test_log_lines_carry_the_pd_fields_in_0523_order(pd: Deployment) -> None:
    load(pd.router.url, n=16, max_tokens=200)
    decode_line = pd.decode.wait_for_line("pre-allocated usage:", timeout=20)
    assert re.search(r"token usage: \d\.\d\d, pre-allocated usage: \d\.\d\d, #prealloc-req: \d+, #transfer-req: \d+, "
                     r"#retracted-req: \d+, cuda graph: (True|False), gen throughput", decode_line)
    prefill_line = pd.prefill.wait_for_line("#bootstrap-req:", timeout=10)
    assert re.search(r"#pending-token: \d+, #bootstrap-req: \d+, #inflight-req: \d+, #optimistic-req: 0, "
                     r"cuda graph: (True|False), input throughput", prefill_line)
    from kimitui.sglang.log import parse_line

    fields = parse_line(decode_line).fields
    assert "transfer_reqs" in fields and "prealloc_reqs" in fields


def test_metrics_and_server_info_show_the_pd_side(pd: Deployment) -> None:
    load(pd.router.url, n=4)
    prefill = httpx.get(pd.prefill.url + "/metrics", timeout=5).text
    decode = httpx.get(pd.decode.url + "/metrics", timeout=5).text
    count = re.search(r'^sglang:kv_transfer_latency_ms_count\{[^}]*engine_type="prefill"[^}]*\} (\S+)', prefill, re.M)
    assert count and float(count.group(1)) >= 4
    assert "sglang:kv_transfer_speed_gb_s_bucket" in prefill and "sglang:num_prefill_bootstrap_queue_reqs{" in prefill
    for name in ("sglang:num_decode_transfer_queue_reqs{", "sglang:num_decode_prealloc_queue_reqs{",
                 "sglang:num_transfer_failed_reqs_total{"):
        assert name in decode
    assert 'engine_type="decode"' in decode
    info = httpx.get(pd.decode.url + "/server_info", timeout=5).json()
    assert info["disaggregation_mode"] == "decode" and info["disaggregation_transfer_backend"] == "nixl"
    assert info["base_gpu_id"] == 4
    assert httpx.get(pd.prefill.url + "/server_info", timeout=5).json()["disaggregation_bootstrap_port"] == pd.bootstrap


def test_a_failed_transfer_is_a_failed_request_and_counted(pd: Deployment) -> None:
    r = chat(pd.router_failing.url, "this one will not arrive")
    assert r.status_code == 500
    assert "KVTransferError" in r.text
    metrics = httpx.get(pd.failing.url + "/metrics", timeout=5).text
    failed = re.search(r"^sglang:num_transfer_failed_reqs_total\{[^}]*\} (\S+)", metrics, re.M)
    assert failed and float(failed.group(1)) >= 1
    assert "Decode transfer failed for request" in pd.failing.output()


def test_two_servers_on_one_host_share_its_gpus(pd: Deployment) -> None:
    from kimitui.sim import gpustate
    from kimitui.sim.nvml import _shard_states

    wait_until(lambda: len(_shard_states(pd.state)) == 2, 5, "both servers' GPU states")
    owners: dict[int, int | None] = {}
    for shard in _shard_states(pd.state):
        for gpu in shard.gpus:
            if gpu.pid is not None:
                owners[gpu.index] = gpu.pid
    assert pd.prefill.proc is not None and pd.decode.proc is not None
    assert {i: owners.get(i) for i in range(gpustate.NUM_GPUS)} == {
        **{i: pd.prefill.proc.pid for i in range(4)}, **{i: pd.decode.proc.pid for i in range(4, 8)}}
    titles = [g.proc_title for s in _shard_states(pd.state) for g in s.gpus if g.index == 4 and g.pid]
    assert titles == ["sglang::scheduler_TP0_EP0"]


def test_slow_transfer_fault_draws_slow_transfers() -> None:
    import asyncio

    from kimitui.sim.logfmt import SimLog
    from kimitui.sim.pd import PdRole
    from kimitui.sim.scheduler import SimClock
    from kimitui.sim.settings import settings_from_profile

    s = settings_from_profile({"tp_size": 4}, fault="slow_transfer", fault_rate=1.0, disaggregation_mode="prefill")

    async def draw() -> list[tuple[float, bool]]:
        role = PdRole(s, SimClock(1.0), SimLog(s), 1000)
        return [role.draw_fault() for _ in range(20)]

    draws = asyncio.run(draw())
    assert all(10.0 <= slow <= 50.0 and not fail for slow, fail in draws)


def test_bad_deployment_flags_are_refused() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for args, says in ((["--nnodes", "2"], "--dist-init-addr"), (["--base-gpu-id", "4"], "not all on the simulated host"),
                       (["--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "127.0.0.1:1"], "--node-rank")):
        out = subprocess.run([sys.executable, "-m", "kimitui", "sim", "serve", "--profile", "ep8-tuned", *args],
                             cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and says in out.stderr, (args, out.stderr)
