"""Sweeps ask a speculative server for each request's figures and tag requests with labels it allows."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kimitui.analysis.level_stats import spec_figures
from kimitui.analysis.server_caps import apply_caps, sweep_caps
from kimitui.events import RequestResult, SpecTokens, SweepSpec
from kimitui.loadgen.client import build_body, spec_tokens
from tests.support.simserver import start_sim

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
    assert not none.spec_details and none.labels == [] and "allows none" in none.describe()[0]
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
