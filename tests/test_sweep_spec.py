"""Sweeps ask a speculative server for each request's figures and tag requests with labels it allows."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kimitui.analysis.level_stats import spec_figures
from kimitui.sglang.server_caps import apply_caps, sweep_caps
from kimitui.events import RequestResult, SpecTokens, SweepSpec
from kimitui.loadgen.client import build_body, spec_tokens
from tests.support.simserver import start_sim
from tests.support.spec_server import SpecServer

DETAILS = {"spec_accept_rate": 0.4, "spec_accept_length": 6.5, "spec_cap_length": 0.0, "spec_block_accept_length": 0.0,
           "spec_num_correct_drafts": 110, "spec_num_proposed_drafts": 300, "spec_verify_ct": 20,
           "spec_correct_drafts_histogram": [1, 2], "spec_cap_lens_histogram": []}


def test_sglext_details_become_spec_tokens_and_bad_ones_become_none() -> None:
    """0.5.23 entrypoints/openai/protocol.py SglExt.spec_tokens_details: one SpecTokensDetails, or a list when n > 1."""
    got = spec_tokens({"spec_tokens_details": DETAILS, "routed_experts": None})
    assert got == SpecTokens(accept_length=6.5, accept_rate=0.4, verify_ct=20, correct_drafts=110, proposed_drafts=300)
    assert spec_tokens({"spec_tokens_details": [DETAILS, {**DETAILS, "spec_verify_ct": 3}]}) == got
    assert spec_tokens({"spec_tokens_details": {**DETAILS, "spec_verify_ct": 0}}) is None  # zeros: nothing verified
    assert spec_tokens({"spec_tokens_details": "x"}) is None and spec_tokens([1]) is None and spec_tokens({}) is None
    odd = spec_tokens({"spec_tokens_details": {**DETAILS, "spec_accept_rate": "high", "spec_accept_length": float("nan")}})
    assert odd is not None and odd.accept_rate is None and odd.accept_length is None and odd.verify_ct == 20


def test_the_body_asks_for_details_only_when_told() -> None:
    assert "return_spec_tokens_details" not in json.loads(build_body("m", "p", 8))
    assert json.loads(build_body("m", "p", 8, spec_details=True))["return_spec_tokens_details"] is True


def _result(tokens: int, accept: float | None, verify: int | None) -> RequestResult:
    spec = SpecTokens(accept_length=accept, accept_rate=0.5, verify_ct=verify) if verify else None
    return RequestResult(sweep_id="s", request_id=str(tokens), concurrency=1, ok=True, intended_send=0.0, sent=0.0,
                         completion_tokens=tokens, spec=spec)


def test_a_levels_accept_length_is_tokens_over_verify_passes() -> None:
    """0.5.23 managers/scheduler_components/metrics_reporter.py: accept len = accepted tokens / forward passes."""
    figures = spec_figures([_result(100, 5.0, 20), _result(300, 3.0, 100), _result(50, None, None)])
    assert figures["spec_requests"] == 2 and figures["spec_accept_len_level"] == 400 / 120
    assert figures["spec_accept_len"].p50 == 4.0  # type: ignore[attr-defined]
    assert spec_figures([_result(50, None, None)]) == {}


def test_caps_follow_server_info() -> None:
    """0.5.23 entrypoints/openai/serving_base.py extract_custom_labels (allowed labels, header default x-custom-labels)."""
    caps = sweep_caps({"speculative_algorithm": "DFLASH", "tokenizer_metrics_custom_labels_header": "x-custom-labels",
                       "tokenizer_metrics_allowed_custom_labels": ["kimitui_level", "team"]})
    assert caps.spec_details and caps.labels == ["kimitui_level"] and caps.labels_header == "x-custom-labels"
    assert "kimitui_level via x-custom-labels" in caps.describe()[0] and "DFLASH" in caps.describe()[1]
    none = sweep_caps({"speculative_algorithm": None, "tokenizer_metrics_allowed_custom_labels": None})
    assert not none.spec_details and none.labels == [] and "takes none of kimitui's" in none.describe()[0]
    assert sweep_caps({}).labels == [] and not sweep_caps({}).spec_details  # vLLM: no /server_info, nothing extra
    assert not sweep_caps(None).known and "not read yet" in sweep_caps(None).describe()[0]
    spec = apply_caps(SweepSpec(url="http://x", model="m", levels=[1], spec_details=True, labels=["kimitui_sweep"]), none)
    assert not spec.spec_details and spec.labels == [] and spec.labels_header is None


def test_a_sweep_of_a_drafter_records_accept_lengths_and_splits_sglangs_metrics_by_sweep_and_level(tmp_path) -> None:
    with start_sim("ep8-dflash", time_scale=20) as sim:
        proc = subprocess.run([sys.executable, "-m", "kimitui", "sweep", "--url", sim.url, "--json", "--no-progress",
                               "--levels", "1,4", "--requests", "8", "--max-tokens", "96", "--out", str(tmp_path / "r.jsonl.gz")],
                              capture_output=True, text=True, timeout=200)
        assert proc.returncode == 0, proc.stderr[-2000:]
        metrics = httpx.get(sim.url + "/metrics").text
    summary = json.loads(proc.stdout)
    sweep_id = summary["sweep_id"]
    for level in summary["levels"]:
        assert level["spec_requests"] == 8 and level["spec_accept_len_level"] > 2.0
    fams = {f.name: f for f in text_string_to_metric_families(metrics)}
    by_level = {s.labels["kimitui_level"]: s.value for s in fams["sglang:num_requests"].samples
                if s.labels.get("kimitui_sweep") == sweep_id}
    assert by_level == {"1": 8.0, "4": 8.0}
    from kimitui.recording import read_recording
    results = [e for e in read_recording(tmp_path / "r.jsonl.gz").events if e.kind == "request_result"]
    assert results and all(r.spec is not None and r.spec.verify_ct for r in results)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the stream, as 0.5.23 sends it


async def _one(url: str, **knobs: object) -> RequestResult:
    """One request over the sweep's own HTTP/1.1 client, asking for speculative figures."""
    from kimitui.loadgen import h1client
    from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, to_result

    deadlines = Deadlines()
    pool = h1client.Pool(url + "/v1/chat/completions", deadlines)
    trace = RequestTrace("spec-1", 1, False, time.perf_counter_ns())
    try:
        data = pool.request_bytes(build_body("m", "hello", 64, extra=dict(knobs), spec_details=True), trace.request_id)
        await h1client.run_request(pool, data, trace, deadlines)
    finally:
        pool.close()
    return to_result(trace, "sweep-1", Clock())


@pytest.mark.timeout(30)
async def test_multi_token_chunks_count_from_usage_and_the_sglext_chunk_moves_no_timing() -> None:
    """0.5.23 entrypoints/openai/serving_chat.py _generate_chat_stream: content chunks of several tokens
    (per-chunk usage), then ``choices: []`` + sglext, then usage, then [DONE]."""
    pattern = [3, 1, 5, 2, 5]
    async with SpecServer(info={}) as srv:
        r = await _one(srv.url, chunks=pattern, ttft_ms=100, tick_ms=40, sglext_delay_ms=300)
    assert r.ok and r.completion_tokens == 16 and r.tokens_from_usage
    assert r.chunks == 5 and r.chunk_tokens == pattern and len(r.chunk_offsets_ms or []) == 5
    assert r.ttft_s is not None and 0.095 <= r.ttft_s <= 0.25
    # 13 tokens after the first chunk over 4 gaps of 40 ms: 81 tok/s (not 25 "chunks/s"); load only slows it
    assert r.decode_tok_s is not None and 50 <= r.decode_tok_s <= 82
    # the 300 ms before the sglext chunk is no gap between tokens, but the request's end waits for it
    assert r.max_gap_s is not None and r.max_gap_s < 0.2
    assert r.e2e_s is not None and r.e2e_s >= r.ttft_s + 0.16 + 0.3
    assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 15)  # bench_serving's (latency - TTFT) / (tokens - 1)
    assert r.itl_p50_s is not None and 0.007 <= r.itl_p50_s <= 0.04  # 40 ms over 5, 2 and 5 tokens and over 1
    assert r.spec == SpecTokens(accept_length=16 / 5, accept_rate=11 / 15, verify_ct=5, correct_drafts=11,
                                proposed_drafts=15)


@pytest.mark.timeout(30)
async def test_an_sglext_chunk_before_any_content_is_no_first_token() -> None:
    async with SpecServer(info={}) as srv:
        r = await _one(srv.url, chunks=[4, 4], ttft_ms=150, sglext_first=True)
    assert r.ok and r.chunks == 2 and r.completion_tokens == 8
    assert r.ttft_s is not None and r.ttft_s >= 0.145 and r.spec is not None and r.spec.verify_ct == 2


BAD_SGLEXT = ["text", 5, [], {"spec_tokens_details": 5}, {"spec_tokens_details": []},
              {"spec_tokens_details": [None, DETAILS]}, {"spec_tokens_details": {"spec_verify_ct": "x"}},
              {"spec_tokens_details": {**DETAILS, "spec_verify_ct": -3}}, {"spec_tokens_details": None}]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ext", BAD_SGLEXT, ids=[json.dumps(e)[:30] for e in BAD_SGLEXT])
async def test_a_malformed_sglext_leaves_no_figures_and_never_fails_the_request(ext: object) -> None:
    async with SpecServer(info={}) as srv:
        r = await _one(srv.url, chunks=[2, 3, 3], sglext=ext)
    assert r.ok and r.error_class is None and r.completion_tokens == 8 and r.chunk_tokens == [2, 3, 3]
    assert r.spec is None


@pytest.mark.timeout(30)
async def test_n_above_one_reads_choice_zero() -> None:
    """0.5.23 serving_chat.py: ``spec_details if request.n > 1 else spec_details[0]``."""
    two = {"spec_tokens_details": [DETAILS, {**DETAILS, "spec_verify_ct": 7, "spec_accept_length": 1.0}]}
    async with SpecServer(info={}) as srv:
        r = await _one(srv.url, chunks=[2, 2], sglext=two)
    assert r.ok and r.spec is not None and r.spec.verify_ct == 20 and r.spec.accept_length == 6.5


def test_spec_figures_survive_a_recording_and_stay_small(tmp_path) -> None:
    """The recording writer keeps RequestResult.spec (kimitui/recording/writer.py dump_line)."""
    from kimitui.recording import read_recording, write_recording

    spec = SpecTokens(accept_length=512 / 37, accept_rate=301 / 333, verify_ct=37, correct_drafts=301,
                      proposed_drafts=333)
    plain = _result(512, None, None)
    with_spec = plain.model_copy(update={"spec": spec})
    path = write_recording(tmp_path / "r.jsonl", [with_spec])
    [back] = [e for e in read_recording(path).events if isinstance(e, RequestResult)]
    assert back.spec == spec
    from kimitui.recording.writer import dump_line

    assert len(dump_line(with_spec)) - len(dump_line(plain)) < 200  # about six numbers a request
