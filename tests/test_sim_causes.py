"""The simulator acts out every straggler cause the way SGLang 0.5.23 and NVML show it, and records the truth.

``[sim] fault = "mixed"`` runs the six episode faults in turn (kimitui/sim/episodes.py); while requests
stream, the test samples the GPU state the fake NVML reads and keeps the server's log, then checks each
truth record (``KIMITUI_SIM_TRUTH``) against what a host would show in its window: NVML clock-event
reasons (``nvmlDeviceGetCurrentClocksEventReasons``, names as kimitui/telemetry/agent.py maps them), SM
clocks, PCIe throughput, ``cuda graph: False`` on the Decode lines (``scheduler_components/
metrics_reporter.py`` ``log_decode_stats``), a surge's long prompts prefilled in ``chunked_prefill_size``
chunks with the rest on ``#pending-token`` (``managers/schedule_policy.py`` ``PrefillAdder.add_one_req``,
``metrics_reporter.py`` ``report_prefill_stats``, ``load_inquirer.py`` ``_get_num_pending_tokens``),
``/health`` held until the scheduler answers (``entrypoints/http_server.py`` ``health_generate``),
``KV cache pool is full. Retract requests.`` (``managers/scheduler.py``), all 0.5.23.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path

import httpx

from kimitui.sim.gpustate import SimGpuState, read_state
from tests.support.simserver import start_sim


def _profile(folder: Path, name: str, body: str) -> str:
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{body}\n')
    return str(path)


def _stream(url: str, model: str, rid: str, tokens: int, arrivals: list[float]) -> None:
    """One streamed chat request carrying the client's id, as kimitui's load generator sends it."""
    body = {"model": model, "messages": [{"role": "user", "content": f"Say something {rid}"}], "max_tokens": tokens,
            "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers={"X-Request-ID": rid},
                      timeout=60) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                arrivals.append(time.time())


def _load(url: str, model: str, stop: threading.Event, streams: int, tokens: int, prefix: str,
          arrivals: dict[str, list[float]] | None = None) -> list[str]:
    """``streams`` clients, each sending one request after the other until ``stop``; returns their ids and
    fills ``arrivals`` (id: when each chunk came)."""
    sent: list[str] = []
    seen = arrivals if arrivals is not None else {}

    def worker(k: int) -> None:
        n = 0
        while not stop.is_set():
            rid = f"{prefix}-{k}-{n}"
            sent.append(rid)
            _stream(url, model, rid, tokens, seen.setdefault(rid, []))
            n += 1

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(streams)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join(timeout=30)
    return sent


def _prefill_fields(log: str) -> list[dict[str, int]]:
    """The counts of every Prefill line (``Prefill batch, #new-seq: 1, #new-token: 8192, ...``)."""
    out = []
    for line in log.splitlines():
        if "Prefill batch, " in line:
            body = line.split("Prefill batch, ", 1)[1]
            out.append({k.strip("#"): int(v) for k, v in (p.split(": ") for p in body.split(", ")[:7])
                        if k.startswith("#")})
    return out


def _truth(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _all_seen(records: list[dict]) -> bool:
    """Every episode kind has run, and the last one is over (its GPU states sampled all through)."""
    return len({r["cause"] for r in records}) >= 6 and time.time() > max(r["end"] for r in records) + 0.3


NVML_KINDS = {"gpu_throttle", "slow_gpu", "pcie_saturation"}
"""The episodes NVML shows: each needs a GPU state sampled inside its window while a pass ran."""


def _busy_inside(r: dict, states: dict[float, SimGpuState]) -> list[SimGpuState]:
    """The GPU states written inside the record's window while a pass ran (an idle GPU shows idle)."""
    return [s for t, s in sorted(states.items()) if r["start"] + 0.05 <= t <= r["end"] - 0.05
            and s.gpus[0].util_pct > 20]


def _probe_health(url: str, stop: threading.Event, health: list[tuple[float, float, int]]) -> None:
    """GET /health every 0.25 s (its own thread: a held /health must not hold the GPU sampling)."""
    while not stop.is_set():
        t0 = time.time()
        with contextlib.suppress(httpx.HTTPError):
            code = httpx.get(f"{url}/health", timeout=30).status_code
            health.append((t0, time.time(), code))
        stop.wait(0.25)


def test_every_episode_shows_as_sglang_and_nvml_would_and_is_recorded(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    prof = _profile(tmp_path, "mixed", 'extends = "ep8-tuned"\n[sim]\nfault = "mixed"\n[sim.tuning]\n'
                    "episode_every_s = 14.0\nepisode_s = 8.0\nepisode_after_s = 2.0\nepisode_slowdown = 4.0")
    states: dict[float, SimGpuState] = {}
    health: list[tuple[float, float, int]] = []
    with start_sim(prof, time_scale=8.0, env={"KIMITUI_SIM_TRUTH": str(truth)}) as sim:
        stop = threading.Event()
        loader = threading.Thread(target=_load, args=(sim.url, sim.model, stop, 4, 64, "r"), daemon=True)
        prober = threading.Thread(target=_probe_health, args=(sim.url, stop, health), daemon=True)
        loader.start()
        prober.start()
        # Each window lasts 1 s.  On an idle box one round of the six (~11 s) samples each busy; a busy box
        # can starve the loader (the GPUs idle through a window) or this sampler (no state read in it), so
        # the test waits for what it must judge -- a busy state inside a window of each NVML kind, a
        # graph-off Decode line -- while `mixed` runs the six again in a new order.
        end, judged_at = time.time() + 60.0, 0.0
        while time.time() < end:
            state = read_state(sim.state_path)
            states[state.written_at] = state
            if time.time() - judged_at > 0.5:
                judged_at, records = time.time(), _truth(truth)
                shown = {r["cause"] for r in records if r["end"] + 0.3 < time.time() and _busy_inside(r, states)}
                if (records and _all_seen(records) and NVML_KINDS <= shown
                        and "cuda graph: False, gen throughput" in sim.output()):
                    break
            time.sleep(0.05)
        stop.set()
        loader.join(timeout=30)
        prober.join(timeout=30)
        log = sim.output()
    records = _truth(truth)
    kinds = {r["cause"] for r in records}
    assert kinds >= {"graph_off", "gpu_throttle", "slow_gpu", "pcie_saturation", "prefill_surge", "server_unhealthy"}

    seen: set[str] = set()
    for r in records:
        during = _busy_inside(r, states)
        if during:
            seen.add(r["cause"])
        if r["cause"] == "gpu_throttle":
            assert r["detail"]["gpus"] == list(range(8)) and r["request_ids"] is None
            for st in during:
                assert all("hw_thermal_slowdown" in g.throttle_reasons and g.sm_clock_mhz < 1000 for g in st.gpus)
        elif r["cause"] == "slow_gpu":
            for st in during:
                slow = st.gpus[r["detail"]["gpu"]]
                assert slow.sm_clock_mhz < 1000 and not slow.throttle_reasons and slow.util_pct == 100.0
                assert all(g.util_pct <= 50 and g.sm_clock_mhz > 2000 for g in st.gpus if g.index != slow.index)
        elif r["cause"] == "pcie_saturation":
            for st in during:
                assert all(g.pcie_rx_kbps > 0.7 * 63e6 and g.pcie_tx_kbps > 0.7 * 63e6 for g in st.gpus)
        elif r["cause"] == "server_unhealthy":
            held = [b - a for a, b, code in health if a >= r["start"] - 0.05 and a < r["end"] - 0.3]
            assert not held or max(held) > 0.25  # /health waits for the stuck scheduler
        elif r["cause"] == "prefill_surge":
            assert r["detail"]["prompts"] >= 1 and r["detail"]["tokens"] >= 32768 and r["end"] > r["start"]
    assert seen >= NVML_KINDS, seen
    assert "cuda graph: False, gen throughput" in log
    prefills = _prefill_fields(log)
    assert max(p["new-token"] for p in prefills) == 8192, "no pass prefills more than chunked_prefill_size"
    surge = [p for p in prefills if p["new-token"] == 8192 and p["pending-token"] >= 16384]
    assert surge, "the surge's long prompts show on the Prefill lines, the rest still pending"


def test_kv_retraction_injected_stall_and_eplb_are_recorded_with_the_clients_ids(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    prof = _profile(tmp_path, "small-kv", 'extends = "ep8-eplb"\neplb_rebalance_num_iterations = 400\n'
                    '[sim]\nfault = "stall"\nfault_rate = 0.3\n[sim.tuning]\nkv_tokens = 2500.0\nstall_s = 10.0')
    with start_sim(prof, time_scale=20.0, env={"KIMITUI_SIM_TRUTH": str(truth)}) as sim:
        stop = threading.Event()
        sent: list[str] = []
        arrivals: dict[str, list[float]] = {}
        loader = threading.Thread(
            target=lambda: sent.extend(_load(sim.url, sim.model, stop, 12, 400, "k", arrivals)), daemon=True)
        loader.start()
        end = time.time() + 25.0
        while time.time() < end and not {"kv_retract", "injected_stall", "eplb"} <= {r["cause"] for r in _truth(truth)}:
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
    for r in by["kv_retract"]:  # a retracted request really waits: no token until its prefill again ends
        (rid,) = r["request_ids"]
        assert not [t for t in arrivals[rid] if r["start"] + 0.05 < t < r["end"] - 0.05], r
    assert all(r["request_ids"] is None and r["end"] > r["start"] for r in by["eplb"])


def test_the_first_episode_waits_for_serving_not_the_warm_up(tmp_path: Path) -> None:
    """``episode_after_s`` counts from serving (kimitui/sim/episodes.py): the clock runs from the process
    start, and an episode that began on SGLang's warm-up request ran where the GPUs never showed it."""
    truth = tmp_path / "truth.jsonl"
    prof = _profile(tmp_path, "throttle", 'extends = "ep8-tuned"\n[sim]\nfault = "gpu_throttle"\n[sim.tuning]\n'
                    "episode_every_s = 600.0\nepisode_s = 8.0\nepisode_after_s = 4.0")
    with start_sim(prof, time_scale=8.0, env={"KIMITUI_SIM_TRUTH": str(truth)}) as sim:
        ready = time.time()  # /health answered: serving began no later than this
        time.sleep(1.0)  # 8 simulated seconds: past episode_after_s
        _stream(sim.url, sim.model, "after-ready", 16, [])  # a pass: the scheduler looks at the schedule
        deadline = time.time() + 10.0
        while not _truth(truth) and time.time() < deadline:
            time.sleep(0.1)
    records = _truth(truth)
    assert [r["cause"] for r in records] == ["gpu_throttle"]
    assert records[0]["start"] >= ready, "the first episode began before the server was ready"
