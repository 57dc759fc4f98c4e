"""The simulator acts out every straggler cause the way SGLang 0.5.23 and NVML show it, and records the truth.

``[sim] fault = "mixed"`` runs the six episode faults in turn (kimitui/sim/episodes.py); while requests
stream, the test samples the GPU state the fake NVML reads and keeps the server's log, then checks each
truth record (``KIMITUI_SIM_TRUTH``) against what a host would show in its window: NVML clock-event
reasons (``nvmlDeviceGetCurrentClocksEventReasons``, names as kimitui/telemetry/agent.py maps them), SM
clocks, PCIe throughput, ``cuda graph: False`` on the Decode lines (``scheduler_components/
metrics_reporter.py`` ``log_decode_stats``), Prefill lines printed as the batch is formed
(``log_prefill_stats``), ``/health`` held until the scheduler answers (``entrypoints/http_server.py``
``health_generate``), ``KV cache pool is full. Retract requests.`` (``managers/scheduler.py``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx

from kimitui.sim.gpustate import read_state
from tests.support.simserver import start_sim


def _profile(folder: Path, name: str, body: str) -> str:
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}\n')
    return str(path)


def _stream(url: str, model: str, rid: str, tokens: int) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": f"Say something {rid}"}], "max_tokens": tokens,
            "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers={"X-Request-ID": rid},
                      timeout=60) as resp:
        for _ in resp.iter_lines():
            pass


def _load(url: str, model: str, stop: threading.Event, streams: int, tokens: int, prefix: str) -> list[str]:
    sent: list[str] = []

    def worker(k: int) -> None:
        n = 0
        while not stop.is_set():
            rid = f"{prefix}-{k}-{n}"
            sent.append(rid)
            _stream(url, model, rid, tokens)
            n += 1

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(streams)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(timeout=30)
    return sent


def _truth(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_every_episode_shows_as_sglang_and_nvml_would_and_is_recorded(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    prof = _profile(tmp_path, "mixed", 'extends = "ep8-tuned"\n[sim]\nfault = "mixed"\n[sim.tuning]\n'
                    "episode_every_s = 14.0\nepisode_s = 8.0\nepisode_after_s = 2.0\nepisode_slowdown = 4.0")
    samples: list[tuple[float, object]] = []
    with start_sim(prof, time_scale=8.0, env={"KIMITUI_SIM_TRUTH": str(truth)}) as sim:
        stop = threading.Event()
        loader = threading.Thread(target=_load, args=(sim.url, sim.model, stop, 4, 64, "r"), daemon=True)
        loader.start()
        health: list[tuple[float, float, int]] = []
        end = time.time() + 20.0
        while time.time() < end and len({r["cause"] for r in _truth(truth)}) < 6:
            samples.append((time.time(), read_state(sim.state_path)))
            if int(time.time() * 4) % 4 == 0:
                t0 = time.time()
                code = httpx.get(f"{sim.url}/health", timeout=30).status_code
                health.append((t0, time.time(), code))
            time.sleep(0.05)
        time.sleep(1.5)
        stop.set()
        loader.join(timeout=30)
        log = sim.output()
    records = _truth(truth)
    kinds = {r["cause"] for r in records}
    assert kinds >= {"graph_off", "gpu_throttle", "slow_gpu", "pcie_saturation", "prefill_surge", "server_unhealthy"}

    def inside(r: dict) -> list:
        return [s for t, s in samples if r["start"] + 0.1 <= t <= r["end"] - 0.1]

    for r in records:
        during = inside(r)
        if r["cause"] == "gpu_throttle" and during:
            g = during[-1].gpus[0]
            assert "hw_thermal_slowdown" in g.throttle_reasons and g.sm_clock_mhz < 1000
        elif r["cause"] == "slow_gpu" and during:
            slow = during[-1].gpus[r["detail"]["gpu"]]
            assert slow.sm_clock_mhz < 1000 and not slow.throttle_reasons and slow.util_pct == 100.0
            assert all(g.util_pct <= 50 for g in during[-1].gpus if g.index != slow.index)
        elif r["cause"] == "pcie_saturation" and during:
            assert all(g.pcie_rx_kbps > 0.7 * 63e6 for g in during[-1].gpus)
        elif r["cause"] == "server_unhealthy":
            held = [b - a for a, b, code in health if a >= r["start"] - 0.05 and a < r["end"] - 0.3]
            assert not held or max(held) > 0.25  # /health waits for the stuck scheduler
    assert "cuda graph: False, gen throughput" in log
    surge = [line for line in log.splitlines() if "Prefill batch" in line
             and int(line.split("#new-token: ")[1].split(",")[0]) >= 16384]
    assert surge, "the surge's long prompts show on the Prefill lines"


def test_kv_retraction_injected_stall_and_eplb_are_recorded_with_the_clients_ids(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    prof = _profile(tmp_path, "small-kv", 'extends = "ep8-eplb"\neplb_rebalance_num_iterations = 200\n'
                    '[sim]\nfault = "stall"\nfault_rate = 0.3\n[sim.tuning]\nkv_tokens = 4000.0\nstall_s = 10.0')
    with start_sim(prof, time_scale=20.0, env={"KIMITUI_SIM_TRUTH": str(truth)}) as sim:
        stop = threading.Event()
        sent: list[str] = []
        loader = threading.Thread(target=lambda: sent.extend(_load(sim.url, sim.model, stop, 12, 400, "k")),
                                  daemon=True)
        loader.start()
        end = time.time() + 25.0
        while time.time() < end and {r["cause"] for r in _truth(truth)} < {"kv_retract", "injected_stall", "eplb"}:
            time.sleep(0.2)
        stop.set()
        loader.join(timeout=60)
        log = sim.output()
    records = _truth(truth)
    by = {c: [r for r in records if r["cause"] == c] for c in ("kv_retract", "injected_stall", "eplb")}
    assert all(by.values()), {c: len(v) for c, v in by.items()}
    assert "KV cache pool is full. Retract requests. #retracted_reqs:" in log
    for r in by["kv_retract"] + by["injected_stall"]:
        assert r["request_ids"] and set(r["request_ids"]) <= set(sent) and r["end"] >= r["start"]
    assert all(r["request_ids"] is None and r["end"] > r["start"] for r in by["eplb"])
