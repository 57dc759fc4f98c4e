"""Profile-dependent behaviour: EPLB rebalances, speculative chunks, CUDA graph ceiling, seeds, GPUs."""

from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path

import httpx

from kimitui.sim.gpus import GpuModel
from kimitui.sim.scheduler import SchedStats
from kimitui.sim.settings import load_settings
from kimitui.sim.startup import BootState
from kimitui.sim.textgen import TokenStream, chat_prompt, natural_length
from tests.support.simserver import start_sim


def write_profile(folder: Path, name: str, body: str) -> str:
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}\n')
    return str(path)


def chat(url: str, prompt: str, max_tokens: int, **extra) -> dict:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, **extra}
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=60).json()


def test_eplb_rebalances_every_n_forward_passes_on_every_rank(tmp_path):
    profile = write_profile(tmp_path, "eplb-often", 'extends = "ep8-eplb"\neplb_rebalance_num_iterations = 60')
    with start_sim(profile, time_scale=100.0, seed=1) as sim:
        t0 = time.perf_counter()
        r = chat(sim.url, "rebalance me", 150, ignore_eos=True)
        wall = time.perf_counter() - t0
        lines = sim.lines()
    assert r["usage"]["completion_tokens"] == 150
    assert sum("[EPLBManager] system started, will rebalance per 60 iterations." in line for line in lines) == 8
    starts = [line for line in lines if line.endswith("[EPLBManager] rebalance start")]
    ends = [line for line in lines if "[EPLBManager] rebalance end time=" in line]
    assert len(starts) >= 16 and len(starts) % 8 == 0 and len(ends) == len(starts)  # each rank prints its own
    assert {line.split("]")[0].split()[-2] for line in starts} == {f"TP{i}" for i in range(8)}
    # decoding pauses while it rebalances: 150 tokens take far longer than 150 steps
    assert wall * 100.0 > 150 * 0.016 + 1.0


def test_speculative_profile_sends_multi_token_chunks(tmp_path):
    profile = write_profile(
        tmp_path,
        "spec",
        'extends = "ep8-tuned"\nspeculative_algorithm = "EAGLE"\nspeculative_num_steps = 3\n'
        "speculative_eagle_topk = 1\nspeculative_num_draft_tokens = 4",
    )
    with start_sim(profile, time_scale=50.0) as sim:
        body = {
            "messages": [{"role": "user", "content": "draft"}],
            "max_tokens": 200,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        per_chunk = []
        last = 0
        with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    if chunk["choices"] and chunk["choices"][0]["delta"].get("content") and chunk.get("usage"):
                        n = chunk["usage"]["completion_tokens"]
                        per_chunk.append(n - last)
                        last = n
        info = httpx.get(sim.url + "/server_info").json()
        lines = sim.lines()
    assert sum(per_chunk) == 200
    assert max(per_chunk) > 1 and len(per_chunk) < 150  # several tokens per verify step
    assert info["speculative_algorithm"] == "EAGLE" and info["internal_states"][0]["avg_spec_accept_length"] > 1.5
    assert any("accept len: " in line and "accept rate: " in line for line in lines if "Decode batch" in line)
    assert sum("Capture draft cuda graph end." in line for line in lines) == 8


def test_batches_above_cuda_graph_max_bs_log_cuda_graph_false(tmp_path):
    profile = write_profile(tmp_path, "smallgraph", 'extends = "ep8-tuned"\ncuda_graph_max_bs = 4')
    with start_sim(profile, time_scale=25.0) as sim:  # slow enough that the 8 requests overlap
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            done = list(pool.map(lambda i: chat(sim.url, f"eager {i}", 400, ignore_eos=True), range(8)))
        decode = [line for line in sim.lines() if "Decode batch" in line]
        info = httpx.get(sim.url + "/server_info").json()
    assert all(d["usage"]["completion_tokens"] == 400 for d in done)
    # the knob reaches SGLang as --cuda-graph-max-bs-decode, reported back as the real server reports it
    from kimitui.profiles import load_profile
    from kimitui.sglang.expected_args import expected_args
    from kimitui.sglang.server_info import server_drift

    assert "--cuda-graph-max-bs-decode 4" in info["launch_command"] and info["cuda_graph_max_bs_decode"] == 4
    assert info["cuda_graph_config"]["decode"]["max_bs"] == 4
    assert server_drift(info, expected_args(load_profile(profile).knobs())) == {}
    assert server_drift(info, {"cuda_graph_max_bs": 8}) == {"cuda_graph_max_bs": [8, 4]}
    running = [int(line.split("#running-req: ")[1].split(",")[0]) for line in decode]
    assert any(n > 4 for n in running), decode
    assert all("cuda graph: False" in line for n, line in zip(running, decode) if n > 4)
    assert "Capture cuda graph bs [1, 2, 4]" in "\n".join(sim.lines())


def test_answers_are_a_function_of_prompt_and_seed():
    """What the server says is exactly what the seeded text model predicts, in any process."""
    prompts = ["Write a haiku about programming.", "Explain the theory of relativity in 3 sentences."]
    with start_sim("ep8-tuned", time_scale=100.0, seed=11) as sim:
        out = [chat(sim.url, p, 3000) for p in prompts]
    for prompt, o in zip(prompts, out):
        text, _ = chat_prompt([{"role": "user", "content": prompt}])
        n = min(3000, natural_length(text, 11))
        assert o["usage"]["completion_tokens"] == n
        assert o["choices"][0]["message"]["content"] == "".join(TokenStream(text, 11).piece(i) for i in range(n))
        assert natural_length(text, 12) != n or TokenStream(text, 12).piece(0) != TokenStream(text, 11).piece(0)
    assert out[0]["usage"]["completion_tokens"] != out[1]["usage"]["completion_tokens"]  # lengths follow the prompt


def test_gpu_state_follows_load_power_cap_and_eplb_imbalance():
    boot = BootState(phase="serving", mem_used_gb=85.0)
    busy = SchedStats(running=256, batch=256, busy_until=time.monotonic() + 10, generated_total=0)
    tuned = GpuModel(load_settings("ep8-tuned"), pid=4242, rank_title=lambda i: f"sglang::scheduler_TP{i}_EP{i}")
    idle = tuned.state(boot, SchedStats())
    assert all(g.util_pct == 0 and "gpu_idle" in g.throttle_reasons for g in idle.gpus)
    busy.generated_total = 1500
    time.sleep(0.05)  # a fixed wait on purpose: the model's token rate is tokens over elapsed monotonic time
    for _ in range(12):  # power is smoothed like NVML's one-second average
        loaded = tuned.state(boot, busy)
    assert all(g.util_pct > 90 for g in loaded.gpus)
    assert all(400 < g.power_w < 600 and "sw_power_cap" not in g.throttle_reasons for g in loaded.gpus)  # tests/test_sim_power.py: the cap
    assert all(g.pcie_tx_kbps > 0 and g.pid == 4242 for g in loaded.gpus)
    for _ in range(12):
        light = tuned.state(boot, SchedStats(running=1, batch=1, busy_until=time.monotonic() + 10))
    assert all(light.gpus[i].power_w < loaded.gpus[i].power_w for i in range(8))

    eplb = GpuModel(load_settings("ep8-eplb"), pid=1, rank_title=str)
    stats = SchedStats(running=16, batch=16, busy_until=time.monotonic() + 10)
    for _ in range(80):  # let temperatures settle
        state = eplb.state(boot, stats)
    temps = sorted(g.temp_c for g in state.gpus)
    assert temps[-1] - temps[-2] > 3  # one GPU runs hotter under EPLB imbalance
    stats.in_rebalance = True
    moving = eplb.state(boot, stats)
    assert all(g.pcie_rx_kbps > 5e6 and g.util_pct < 20 for g in moving.gpus)


def test_a_full_kv_pool_retracts_requests_and_still_finishes_them(tmp_path):
    profile = write_profile(tmp_path, "smallkv", 'extends = "ep8-tuned"\nmem_fraction_static = 0.72')  # ~7.6k KV tokens
    with start_sim(profile, time_scale=30.0) as sim:  # slow enough that the 16 requests overlap
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            done = list(pool.map(lambda i: chat(sim.url, f"long {i}", 1024, ignore_eos=True), range(16)))
        lines = sim.lines()
    assert all(d["usage"]["completion_tokens"] == 1024 for d in done)  # retracted requests resume, nothing lost
    assert any("KV cache pool is full. Retract requests. #retracted_reqs: " in line for line in lines)
    usage = [float(line.split("token usage: ")[1].split(",")[0]) for line in lines if "Decode batch" in line]
    assert usage and max(usage) <= 1.0
