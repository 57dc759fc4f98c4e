"""The real SGLang 0.5.18 server's whole logs through kimitui's parser, its log follower and swap readiness.

``../shared/data/sglang-0.5.18-cpu/logs`` (tests/support/real_sglang.py finds it): a tiny Llama and a tiny
Qwen3-MoE served on a CPU from start to exit, and a ``--tp-size 2 --ep-size 2 --enable-eplb`` MoE that
crashed on its first request.  Every line must be classified as what it is: the batch lines with their
figures (``cpu graph: False``: graphs off, on a CPU), each start-up step and readiness, the balancedness
reports, the deprecations, the crash with its ranks and its exception.  The last test runs the
simulator and compares its lines, kind by kind, with the real ones' fields.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import httpx
import pytest

from kimitui.events import LogLine, ServerStats
from kimitui.host.local import LocalHost
from kimitui.launcher.readiness import Readiness
from kimitui.session import Session
from kimitui.sglang.log import Parsed, parse_line, split_glued, to_stats
from kimitui.telemetry.logs import LogFollower
from tests.support.real_sglang import real_output_dir
from tests.support.simserver import start_sim
from tests.support.telemetry import Collector
from tests.support.waiting import wait_until

LOGS = real_output_dir() / "logs"
LLAMA, MOE, CRASH = "tiny-llama.log", "tiny-qwen3moe.log", "tiny-qwen3moe-tp2-ep2-eplb-crash.log"

KINDS = {
    LLAMA: {"decode": 21, "prefill": 9, "startup": 15, "access": 22, "warning": 11, "error": 3, "plain": 83},
    MOE: {"decode": 21, "prefill": 9, "startup": 15, "access": 26, "eplb": 95, "warning": 12, "error": 3, "plain": 91},
    CRASH: {"startup": 20, "access": 1, "eplb": 2, "warning": 13, "error": 5, "plain": 250},
}
"""Each log's lines by kind: a line of a known form classified otherwise changes a count."""

INFO_LINES = (
    "Fail to set RLIMIT_NOFILE", "Using default HuggingFace chat template", "Ignore import error when loading",
    "Disable prefill CUDA graph", "Tree cache initialized", "Freezing GC in", "Cache flushed successfully!",
    "TP size (2)is larger than numa node number", "Intel AMX is detected", "ExpertDistributionRecorder auto start",
    "Resetting ExpertDistributionRecorder", "FlashInfer TRTLLM MoE deferred finalize", "EPLB is enabled.",
    "SGLang server is already recording expert ids", "Sleeping 5 seconds before crash diagnostics",
    "No live scheduler processes found", "kill_process_tree called", "Pyspy dump for PID", "CUDA user-triggered coredump",
    "CUDA coredump pipe not found", "Waiting 60.0 seconds for CUDA coredumps",
)
"""The server's own timestamped lines that say nothing kimitui acts on (``plain``): all there are in these logs."""
CONTINUATIONS = ("nanobind:", "See https://nanobind", "Process ", "Python v", "Thread ")
"""Untimestamped lines that are no log record (nanobind's leak report, py-spy's dump); the rest are indented
(traceback frames, ``warnings.warn(`` echoes) or empty."""
_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z_]+\d+)*\] (?:INFO:\s+)?")


def physical_lines(name: str) -> list[str]:
    """The log as the follower reads it: one entry per ``\\n`` (tqdm's ``\\r`` redraws kept)."""
    return (LOGS / name).read_bytes().decode("utf-8").split("\n")[:-1]


def parsed(name: str) -> list[tuple[str, Parsed]]:
    """(line, parse) for each log line, glued ones split as the follower splits them."""
    return [(line, parse_line(line)) for raw in physical_lines(name) for line in split_glued(raw)]


def of_kind(name: str, kind: str) -> list[tuple[str, Parsed]]:
    return [(line, p) for line, p in parsed(name) if p.line_kind == kind]


@pytest.mark.parametrize("name", [LLAMA, MOE, CRASH])
def test_every_line_of_a_real_log_is_classified_as_what_it_is(name: str) -> None:
    lines = parsed(name)
    assert dict(collections.Counter(p.line_kind for _, p in lines)) == KINDS[name]
    for line, p in lines:
        if "Decode batch, " in line:
            assert p.line_kind == "decode", line
        elif "Prefill batch, " in line:
            assert p.line_kind == "prefill", line
        elif '" 200 OK' in line or '" 404 Not Found' in line:
            assert p.line_kind == "access" and p.fields["status"] in (200, 404), line
        elif "[Expert Balancedness]" in line or "[EPLBManager]" in line:
            assert p.line_kind == "eplb", line
        elif "is deprecated" in line:
            assert (p.line_kind, p.fields["error"]) == ("warning", "deprecated"), line
        elif p.line_kind == "plain" and "ts" in p.fields:
            assert _PREFIX.sub("", line).startswith(INFO_LINES), f"an unknown server line taken as plain: {line}"
        elif p.line_kind == "plain":
            assert not line or line[0].isspace() or line.startswith(CONTINUATIONS), f"unexplained: {line!r}"


def test_the_glued_nanobind_line_is_split_and_its_log_record_kept() -> None:
    raw = next(r for r in physical_lines(LLAMA) if r.startswith("See https://nanobind"))
    head, record = split_glued(raw)
    assert head == "See https://nanobind.readthedocs.io/en/latest/refleaks.html"
    assert record == "[2026-12-06 03:08:10] No live scheduler processes found; skipping py-spy and CUDA coredump."
    assert parse_line(record).fields["ts"] == "2026-12-06 03:08:10"


@pytest.mark.parametrize("name", [LLAMA, MOE])
def test_batch_lines_carry_their_figures_and_cpu_graph_false_is_graphs_off(name: str) -> None:
    decode = of_kind(name, "decode")
    first = decode[0][1].fields
    assert {k: first[k] for k in ("running_reqs", "num_tokens", "token_usage", "queued_reqs")} == {
        "running_reqs": 1, "num_tokens": 32, "token_usage": 0.0, "queued_reqs": 0}
    assert first["gen_throughput"] == {LLAMA: 1.73, MOE: 2.61}[name]
    assert all((p.fields["cuda_graph"], p.fields["graph_backend"]) == (False, "cpu") for _, p in decode)
    assert max(p.fields["running_reqs"] for _, p in decode) == 4
    stats = [to_stats(p, host="h", t=0.0) for _, p in decode]
    assert all(isinstance(s, ServerStats) and s.cuda_graph is False and s.source == "log" for s in stats)
    assert [s.running_reqs for s in stats if s is not None][:2] == [1.0, 1.0]
    prefill = of_kind(name, "prefill")[0][1].fields
    assert {k: prefill[k] for k in ("new_seq", "new_token", "cached_token", "pending_token", "cuda_graph")} == {
        "new_seq": 1, "new_token": 28, "cached_token": 0, "pending_token": 0, "cuda_graph": False}
    assert prefill["input_throughput"] == {LLAMA: 12.37, MOE: 19.42}[name]


STEPS = [("args", None), ("dist_init", "begin"), ("dist_init", "end"), ("weights", "begin"), ("weights", "progress"),
         ("weights", "end"), ("kv_cache", "end"), ("kv_cache", "pool"), ("max_tokens", None), ("timings", None),
         ("uvicorn", "process"), ("uvicorn", "startup"), ("uvicorn", "startup"), ("uvicorn", "listening"),
         ("ready", None)]


@pytest.mark.parametrize("name", [LLAMA, MOE])
def test_start_up_steps_timings_and_readiness(name: str) -> None:
    steps = [p.fields for _, p in of_kind(name, "startup")]
    assert [(f["step"], f.get("phase")) for f in steps] == STEPS
    weights = next(f for f in steps if f["step"] == "weights" and f["phase"] == "progress")
    assert (weights["i"], weights["n"], weights["progress"]) == (1, 1, 1.0)  # the tqdm bar's last redraw
    budget = next(f for f in steps if f["step"] == "max_tokens")
    assert (budget["max_total_num_tokens"], budget["max_running_requests"], budget["context_len"]) == (8192, 16, 1024)
    assert budget["available_cpu_mem"] == {LLAMA: 20.05, MOE: 19.62}[name]
    kv = next(f for f in steps if f["step"] == "kv_cache" and f["phase"] == "end")
    assert (kv["kv_tokens"], kv["dtype"]) == (8192, "torch.bfloat16")
    timings = next(f for f in steps if f["step"] == "timings")["timings"]
    assert set(timings) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e",
                            *(f"cuda_graph_{g}" for g in ("prefill", "decode", "target_verify", "draft_prefill",
                                                          "draft_decode", "draft_extend"))}
    assert timings["load_weight"] == {LLAMA: 0.18, MOE: 0.09}[name] and timings["cuda_graph_decode"] == 0.0
    assert steps[-1]["progress"] == 1.0
    ready = Readiness()
    progress = [step for raw in physical_lines(name) if (step := ready.feed(raw)) is not None]
    assert ready.ready and [s.phase for s in progress][-1] == "ready"
    assert {s.phase for s in progress} == {"weights", "kv_cache", "uvicorn", "ready"}  # no CUDA graphs on a CPU


def test_the_moe_balancedness_reports_every_pass() -> None:
    lines = [p for _, p in of_kind(MOE, "eplb")]
    assert [p.fields["forward_pass_id"] for p in lines] == list(range(1, 96))
    assert all(p.fields["phase"] == "balancedness" and 0.0 < p.fields["current_pass_balancedness"] <= 1.0
               for p in lines)
    stats = to_stats(lines[0], host="h", t=0.0)
    assert stats is not None and stats.extra == {
        "eplb_balancedness": 1.0, "eplb_balancedness_last_10": 1.0, "eplb_balancedness_last_100": 1.0,
        "eplb_balancedness_last_1000": 1.0}
    assert lines[0].fields["gpu_physical_count_sum"] == 112


@pytest.mark.parametrize("name, exception", [(LLAMA, "Exception"), (MOE, "AttributeError")])
def test_a_crash_after_serving_is_a_scheduler_exception_with_its_exception_then_sigquit(name: str, exception: str) -> None:
    problems = [(p.line_kind, p.severity, p.fields.get("error"), p.fields.get("exception"))
                for _, p in parsed(name) if p.line_kind == "error"]
    assert problems == [("error", "error", "scheduler_exception", None), ("error", "error", "exception", exception),
                        ("error", "critical", "sigquit", None)]
    deprecated = [line for line, p in parsed(name) if p.fields.get("error") == "deprecated"]
    endpoints = [m.group(1) for line in deprecated if (m := re.search(r"Endpoint '(\S+)' is deprecated", line))]
    assert endpoints == ["/get_model_info", "/get_server_info"] + (["/get_load"] if name == MOE else [])
    assert len(deprecated) == len(endpoints) + 1 and "ORJSONResponse is deprecated" in deprecated[0]


def test_the_tp2_ep2_crash_names_its_ranks_its_exception_and_never_became_ready() -> None:
    lines = parsed(CRASH)
    begin = [p.fields for _, p in lines if p.fields.get("step") == "dist_init" and p.fields.get("phase") == "begin"]
    assert [(f["rank"], f["ranks"]) for f in begin] == [("TP0_EP0", {"tp": 0, "ep": 0}), ("TP1_EP1", {"tp": 1, "ep": 1})]
    crashes = [p.fields["rank"] for _, p in lines if p.fields.get("error") == "scheduler_exception"]
    assert crashes == ["TP1_EP1", "TP0_EP0"]
    exceptions = [(line, p) for line, p in lines if p.fields.get("error") == "exception"]
    assert [p.fields["exception"] for _, p in exceptions] == ["RuntimeError", "RuntimeError"]
    assert [p.severity for _, p in lines if p.fields.get("error") == "sigquit"] == ["critical"]
    assert [p.fields.get("every_iters") for _, p in of_kind(CRASH, "eplb")] == [20, 20]
    ready = Readiness()
    for raw in physical_lines(CRASH):
        ready.feed(raw)
    assert not ready.ready and ready.fatal == "scheduler_exception"
    assert ready.fatal_quote() == exceptions[0][0].strip()  # ~100 traceback lines down, past what around_fatal keeps


@pytest.mark.parametrize("name", [LLAMA, MOE, CRASH])
async def test_the_follower_publishes_every_line_of_a_real_log_with_its_stats(name: str, tmp_path: Path) -> None:
    log = tmp_path / name
    log.write_bytes((LOGS / name).read_bytes())
    count = len(physical_lines(name))
    session = Session()
    seen = Collector(session)
    follower = LogFollower(LocalHost("real"), session, path=str(log), from_cursor="0")
    await follower.start()
    try:
        await seen.wait_for(lambda ev: follower.cursor == str(count), timeout=60)
    finally:
        await follower.stop()
    events = [e for e in seen.of("log_line") if isinstance(e, LogLine)]
    expected = parsed(name)
    assert [(e.raw, e.line_kind, e.severity, e.fields) for e in events] == [  # a tqdm bar: its last redraw
        (line.rstrip("\r").rsplit("\r", 1)[-1], p.line_kind, p.severity, p.fields) for line, p in expected]
    stats = [e for e in seen.of("server_stats") if isinstance(e, ServerStats)]
    assert len(stats) == KINDS[name].get("decode", 0) + sum(
        1 for _, p in expected if p.fields.get("phase") == "balancedness")
    assert all(s.cuda_graph is False for s in stats if s.running_reqs is not None)
    assert follower.bad_lines == 0 and not seen.of("error")


def _groups(lines: list[str]) -> dict[tuple[str, ...], list[Parsed]]:
    """Parsed lines by what they are: kind, then a start-up line's step and phase, an EPLB line's phase,
    a problem's name."""
    out: dict[tuple[str, ...], list[Parsed]] = collections.defaultdict(list)
    for raw in lines:
        for line in split_glued(raw):
            p = parse_line(line)
            f = p.fields
            key: tuple[str, ...] = (p.line_kind,)
            if p.line_kind == "startup":
                key += (f["step"],) + ((f["phase"],) if "phase" in f else ())
            elif p.line_kind == "eplb":
                key += (f["phase"],)
            elif p.line_kind in ("error", "warning"):
                key += (f["error"],)
            out[key].append(p)
    return out


ALLOWED = {
    ("startup", "max_tokens"): ({"available_cpu_mem"}, {"available_gpu_mem"}),  # the device: a CPU, the sim's GPUs
    ("startup", "kv_cache", "end"): ({"k_size_gb", "v_size_gb"}, {"kv_size_gb"}),  # MHA (Llama, Qwen) / MLA (Kimi)
    ("startup", "weights", "end"): (set(), {"quant"}),  # the simulated checkpoint is quantized
}
"""Where a real line's fields may differ from the simulator's, and why: (real only, simulator only)."""
RANK_FIELDS = {"rank", "ranks"}
"""A TP>1 server's scheduler lines carry them (the real TP2 log's too); the real tp1 logs' do not."""
IN_BOTH = [("decode",), ("prefill",), ("access",), ("eplb", "balancedness"), ("eplb", "init"),
           ("warning", "deprecated"), *[("startup", s) + ((p,) if p else ()) for s, p in STEPS]]


def test_the_simulator_says_what_the_real_server_says_kind_by_kind() -> None:
    real: dict[tuple[str, ...], list[Parsed]] = collections.defaultdict(list)
    for name in (LLAMA, MOE, CRASH):
        for key, found in _groups(physical_lines(name)).items():
            real[key] += found
    with start_sim("ep8-eplb", time_scale=50.0) as sim:
        for path in ("/get_server_info", "/get_model_info"):
            assert httpx.get(sim.url + path, timeout=30).status_code == 200
        body = {"model": "sim", "messages": [{"role": "user", "content": "hi " * 40}], "max_tokens": 200}
        for _ in range(2):
            assert httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=60).status_code == 200
        wait_until(lambda: "[Expert Balancedness]" in sim.output() and "Decode batch" in sim.output(), 30,
                   "the simulator's Decode and balancedness lines")
        simulated = _groups(sim.output().split("\n"))
    for key in IN_BOTH:
        assert key in real and key in simulated, key
        real_keys = set().union(*(p.fields for p in real[key]))
        sim_keys = set().union(*(p.fields for p in simulated[key])) - RANK_FIELDS
        only_real, only_sim = ALLOWED.get(key, (set(), set()))
        assert (real_keys - RANK_FIELDS) - only_real == sim_keys - only_sim, key
    real_ranks = {p.fields["rank"] for p in real[("startup", "dist_init", "begin")] if "rank" in p.fields}
    sim_ranks = {p.fields["rank"] for p in simulated[("startup", "dist_init", "begin")]}
    assert real_ranks == {"TP0_EP0", "TP1_EP1"} and real_ranks <= sim_ranks  # "[... TP1 EP1]" read alike


def test_a_cpu_servers_eager_decode_is_its_norm_not_a_straggler_cause() -> None:
    """Every Decode line of a CPU server says ``cpu graph: False``: there is no graph to fall back from, so the
    cause timeline opens no "CUDA graph not used" episode for it (it would have named one for every stall)."""
    from kimitui.analysis.causes.log_sources import LogSources
    from kimitui.sglang.log import to_event

    lists: dict[str, list] = collections.defaultdict(list)
    sources = LogSources(lists)
    decodes = 0
    for i, (line, p) in enumerate(parsed(LLAMA)):
        if p.line_kind == "decode":
            decodes += 1
        sources.add(to_event(line, host="cpu", source="file", t=1000.0 + i * 0.05), 1000.0 + i * 0.05)
    assert decodes >= 5
    assert not lists["graph_off"], [ep.evidence for ep in lists["graph_off"]]
    # the same lines as a GPU server prints them (cuda graph: False) are a cause, as before
    gpu_lines = [line.replace("cpu graph: False", "cuda graph: False") for line, p in parsed(LLAMA)
                 if p.line_kind == "decode"]
    gpu = LogSources(lists)
    for i, line in enumerate(gpu_lines):
        gpu.add(to_event(line, host="gpu", source="file", t=2000.0 + i * 0.05), 2000.0 + i * 0.05)
    assert lists["graph_off"] and "cuda graph: False" in lists["graph_off"][0].evidence
