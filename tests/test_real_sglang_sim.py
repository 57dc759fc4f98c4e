"""The simulator says what the real SGLang server says: its /metrics and /server_info against the real 0.5.18's.

The simulated server runs for real on 127.0.0.1 (``kimitui sim serve``) and is compared field by field with
the real captures (../shared/data/sglang-0.5.18-cpu): every metric family's name, type, HELP and label names
(the MoE set for a profile reporting expert balancedness, the dense set otherwise), and /server_info's key set,
top level and per DP rank.  What only one side has is allowed by name, each with its reason
(``kimitui/sim/prometheus.py`` SIM_ONLY_FAMILIES, ``kimitui/sim/http_info.py`` SIM_ONLY_KEYS).
"""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import pytest

from kimitui.events import ServerStats
from kimitui.sglang.metrics import FAMILIES, MOE_ONLY_FAMILIES, TOKENIZER_FAMILIES
from kimitui.sim.http_info import SIM_ONLY_KEYS
from kimitui.sim.prometheus import SIM_ONLY_FAMILIES
from kimitui.telemetry.metrics_poll import CounterRates, stats_from_metrics
from tests.support.profiles import write_profile
from tests.support.real_sglang import metric_families, read_http, real_output_dir
from tests.support.simserver import start_sim

REAL = real_output_dir()
pytestmark = pytest.mark.timeout(240)


def _chat(url: str, model: str, stream: bool, max_tokens: int = 8, text: str = "hi") -> None:
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, "stream": stream,
            "ignore_eos": True}
    with httpx.Client(timeout=120) as client:
        assert client.post(url + "/v1/chat/completions", json=body).status_code == 200


@pytest.mark.parametrize(("profile", "real_model"), [("ep8-eplb", "tiny-qwen3moe"), ("ep8-tuned", "tiny-llama")])
def test_the_simulators_metrics_and_server_info_are_the_real_ones(profile: str, real_model: str) -> None:
    real = metric_families(read_http(REAL / real_model / "metrics_after.txt")[2])
    real_info = json.loads(read_http(REAL / real_model / "server_info.txt")[2])
    with start_sim(profile, time_scale=50) as sim:
        _chat(sim.url, sim.model, stream=False)
        _chat(sim.url, sim.model, stream=True)
        with httpx.Client(timeout=30) as client:
            text = client.get(sim.url + "/metrics").text
            info = client.get(sim.url + "/server_info").json()
            loads = client.get(sim.url + "/v1/loads").json()
            model_info = client.get(sim.url + "/model_info").json()
            models = client.get(sim.url + "/v1/models").json()
    simulated = metric_families(text)
    # the same families, and nothing the real one lacks but what is allowed with a reason
    assert set(real) - set(simulated) == set(), "real families the simulator lacks"
    assert set(simulated) - set(real) <= set(SIM_ONLY_FAMILIES), "simulator families the real server lacks"
    assert (MOE_ONLY_FAMILIES <= set(simulated)) == (real_model == "tiny-qwen3moe")
    allowed = set(info.get("tokenizer_metrics_allowed_custom_labels") or ())
    for name, (type_, labels, help_) in real.items():
        sim_type, sim_labels, sim_help = simulated[name]
        assert (sim_type, sim_help) == (type_, help_), name
        custom = allowed if name in TOKENIZER_FAMILIES else set()
        real_custom = {label for label in labels if label.startswith("kimitui_")}
        assert sim_labels - custom == labels - real_custom, name
    # /server_info: the real key set, top level and per DP rank, and the real shapes of what kimitui reads
    assert set(real_info) - set(info) == set(), "real /server_info keys the simulator lacks"
    assert set(info) - set(real_info) <= set(SIM_ONLY_KEYS), "simulator keys the real server lacks"
    assert set(real_info["internal_states"][0]) - set(info["internal_states"][0]) == set()
    assert set(info["internal_states"][0]) - set(real_info["internal_states"][0]) <= {"avg_spec_accept_length"}
    assert info["status"] == "ready" and isinstance(info["version"], str)
    assert info["max_req_input_len"] == info["context_length"] - 6  # as the real: 1018 for 1024
    assert set(info["startup_time"]) == set(real_info["startup_time"])
    assert set(info["internal_states"][0]["memory_usage"]) == set(real_info["internal_states"][0]["memory_usage"])
    assert info["cuda_graph_max_bs_decode"] in (None, info["cuda_graph_config"]["decode"]["max_bs"])
    # /model_info and /v1/models: the real keys
    real_model_info = json.loads(read_http(REAL / real_model / "model_info.txt")[2])
    assert set(model_info) == set(real_model_info) and set(model_info["embedding"]) == set(real_model_info["embedding"])
    real_models = json.loads(read_http(REAL / real_model / "v1_models.txt")[2])
    assert set(models) == set(real_models) and set(models["data"][0]) == set(real_models["data"][0])
    # /v1/loads: the real top-level keys and per-rank keys (0.5.23's aggregate besides)
    real_loads = json.loads(read_http(REAL / "tiny-qwen3moe" / "v1_loads.txt")[2])
    assert set(real_loads) <= set(loads)
    rank, real_rank = loads["loads"][0], real_loads["loads"][0]
    assert set(real_rank) - set(rank) == {"total_prefill_busy_us", "decode_moments"}  # not timed by the simulator
    assert set(rank["memory"]) == set(real_rank["memory"]) and set(rank["queues"]) == set(real_rank["queues"])


def test_the_simulator_reports_queueing_and_retractions_as_sglang_does(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A KV pool too small for 16 long requests: requests wait in the queue (queue_time_seconds) and running
    ones are retracted (num_retracted_reqs, set for one stats-log interval as SGLang's metrics reporter does)."""
    profile = write_profile(tmp_path, "smallkv", 'extends = "ep8-tuned"\nmem_fraction_static = 0.72')  # ~7.6k KV tokens
    seen: list[ServerStats] = []
    with start_sim(profile, time_scale=4.0) as sim:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            jobs = [pool.submit(_chat, sim.url, sim.model, False, 1024, f"long {i}") for i in range(16)]
            rates = CounterRates()
            with httpx.Client(timeout=30) as client:
                while not all(job.done() for job in jobs):
                    seen.append(stats_from_metrics(client.get(sim.url + "/metrics").text, host="sim", rates=rates))
                    time.sleep(0.05)
            for job in jobs:
                job.result()
        lines = sim.lines()
    assert any("KV cache pool is full. Retract requests." in line for line in lines)
    assert max(s.retracted_reqs or 0 for s in seen) > 0
    assert max(s.queue_time_s or 0 for s in seen) > 0
    assert all(s.fwd_occupancy is None or 0 <= s.fwd_occupancy <= 100 for s in seen)
    assert max(s.fwd_occupancy or 0 for s in seen) > 0 and max(s.utilization or 0 for s in seen) > 0
    assert max(s.kv_used_tokens or 0 for s in seen) > 0
