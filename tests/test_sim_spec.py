"""The simulated server runs speculative decoding the way SGLang 0.5.23 reports it."""

from __future__ import annotations

import json
import random
import statistics

import httpx
from prometheus_client.parser import text_string_to_metric_families

from kimitui.sim.logfmt import decode_line
from kimitui.sim.settings import load_settings, settings_from_profile
from kimitui.sim.spec_model import SpecModel, is_code
from kimitui.sglang.log import parse_line
from tests.support.simserver import start_sim


def _mean_accept(model: SpecModel, code: bool, batch: int, n: int = 3000) -> float:
    rng = random.Random(5)
    cap = model.cap(batch)
    return statistics.mean(model.verify(rng, code, cap)[0] + 1 for _ in range(n))


def test_dflash_acceptance_falls_with_concurrency_and_code_accepts_more_than_prose() -> None:
    """Accept length counts the bonus token (0.5.23 entrypoints/openai/protocol.py SpecTokensDetails:
    completion tokens / verify count); under load DFLASH rows are capped (speculative/ragged_verify.py)."""
    model = SpecModel(load_settings("ep8-dflash"))
    assert model.window == 16 and model.drafts_per_round() == 15
    at = {c: _mean_accept(model, True, c) for c in (1, 8, 32, 64, 128, 256)}
    assert 6.0 < at[1] < 8.0 and at[8] == at[1]  # the whole block of 16, uncapped
    assert at[1] > at[32] > at[64] > at[128] and at[128] < 2.2
    assert _mean_accept(model, False, 1) < at[1] - 1.0  # prose is less predictable
    assert [model.cap(c) for c in (1, 16, 32, 64, 96, 256)] == [16, 16, 8, 4, 2, 2]
    eagle = SpecModel(load_settings("ep8-eagle3"))
    assert eagle.cap(256) is None and 2.5 < _mean_accept(eagle, True, 256) < 3.2  # no ragged verify: holds


def test_acceptance_is_seeded_and_prompts_are_told_apart() -> None:
    model = SpecModel(load_settings("ep8-dflash"))
    runs = [[model.verify(random.Random(3), True, None) for _ in range(50)] for _ in range(2)]
    assert runs[0] == runs[1]
    assert is_code("Write a Python quicksort implementation with detailed comments.")
    assert not is_code("Write a haiku about programming.") and not is_code("Explain the theory of relativity in 3 sentences.")


def test_the_decode_line_is_byte_for_byte_sglangs_and_parses_back() -> None:
    """0.5.23 managers/scheduler_components/metrics_reporter.py (decode stats): ``accept len: x.xx, accept rate:
    x.xx, `` then ``cap len: x.xx, `` only when a cap was scheduled, before the graph flag."""
    line = decode_line(8, 9000, 0.04, True, 412.5, 0, accept_len=6.5, accept_rate=0.37, cap_len=16.0)
    assert line == ("Decode batch, #running-req: 8, #token: 9000, token usage: 0.04, accept len: 6.50, "
                    "accept rate: 0.37, cap len: 16.00, cuda graph: True, gen throughput (token/s): 412.50, #queue-req: 0")
    fields = parse_line("[2026-12-05 10:00:00 TP0 EP0] " + line).fields
    assert fields["accept_len"] == 6.5 and fields["accept_rate"] == 0.37 and fields["cap_len"] == 16.0
    plain = decode_line(8, 9000, 0.04, True, 412.5, 0, accept_len=2.5, accept_rate=0.5)
    assert "cap len" not in plain


def _stream(url: str, body: dict, headers: dict | None = None) -> tuple[list[int], dict | None, dict | None, list[str]]:
    """(tokens per content chunk from continuous usage, the sglext chunk, the usage chunk, chunk order)."""
    per_chunk, last, sgl, usage, order = [], 0, None, None, []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=headers or {}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if "sglext" in chunk:
                sgl, _ = chunk, order.append("sglext")
            elif chunk.get("usage") and not chunk["choices"]:
                usage, _ = chunk["usage"], order.append("usage")
            elif chunk["choices"] and chunk["choices"][0]["delta"].get("content") and chunk.get("usage"):
                n = chunk["usage"]["completion_tokens"]
                per_chunk.append(n - last)
                last = n
    return per_chunk, sgl, usage, order


def test_a_dflash_stream_carries_several_tokens_per_chunk_and_its_spec_details_before_usage() -> None:
    """0.5.23 entrypoints/openai/serving_chat.py (chat stream): with return_spec_tokens_details a chunk with
    ``choices: []`` and ``sglext`` comes before the usage chunk; SglExt/SpecTokensDetails field names."""
    body = {"model": "/root/models/Kimi-K2.6", "messages": [{"role": "user", "content": "Write a Python JSON parser."}],
            "max_tokens": 200, "ignore_eos": True, "stream": True, "return_spec_tokens_details": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    with start_sim("ep8-dflash", time_scale=50) as sim:
        per_chunk, sgl, usage, order = _stream(sim.url, body)
        plain = _stream(sim.url, {**body, "return_spec_tokens_details": False})
        metrics = httpx.get(sim.url + "/metrics").text
        lines = sim.lines()
    assert sum(per_chunk) == 200 and max(per_chunk) > 3 and len(per_chunk) < 80
    assert order[-2:] == ["sglext", "usage"] and usage is not None and usage["completion_tokens"] == 200
    assert sgl is not None and sgl["choices"] == [] and sgl["object"] == "chat.completion.chunk"
    d = sgl["sglext"]["spec_tokens_details"]
    assert set(d) == {"spec_accept_rate", "spec_accept_length", "spec_cap_length", "spec_block_accept_length",
                      "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct",
                      "spec_correct_drafts_histogram", "spec_cap_lens_histogram"}
    assert abs(d["spec_accept_length"] * d["spec_verify_ct"] - 200) < 1e-6  # completion tokens / verify passes
    assert d["spec_num_proposed_drafts"] == 15 * d["spec_verify_ct"] and d["spec_cap_length"] == 16.0
    assert sum(d["spec_correct_drafts_histogram"]) == d["spec_verify_ct"]
    assert plain[1] is None and "sglext" not in plain[3]
    fams = {f.name: f for f in text_string_to_metric_families(metrics)}
    assert fams["sglang:spec_accept_length"].samples[0].value > 1.5
    assert fams["sglang:spec_num_draft_tokens"].samples[0].value == 16
    assert sum(s.value for s in fams["sglang:spec_verify_calls"].samples if s.name.endswith("_total")) >= 2 * d["spec_verify_ct"] - 2
    decode = [parse_line(ln).fields for ln in lines if "Decode batch" in ln and "accept len" in ln]
    assert decode and all(f["accept_len"] > 1.0 and f["cap_len"] == 16.0 for f in decode)


def test_a_server_without_speculation_ignores_the_request_for_details() -> None:
    body = {"model": "/root/models/Kimi-K2.6", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20,
            "ignore_eos": True, "stream": True, "return_spec_tokens_details": True, "stream_options": {"include_usage": True}}
    with start_sim("ep8-tuned", time_scale=50) as sim:
        _per, sgl, usage, order = _stream(sim.url, body)
        info = httpx.get(sim.url + "/server_info").json()
    assert sgl is None and usage is not None and "sglext" not in order
    assert info["speculative_algorithm"] is None and info["speculative_dflash_block_size"] is None


def test_server_info_reports_the_drafter_and_the_launch_command() -> None:
    """0.5.23 utils/common.py build_server_info (launch_command) and server_args.py prepare_server_args
    (the server's own argv joined by spaces)."""
    s = load_settings("ep8-dflash")
    assert s.launch_command.startswith("--model-path /root/models/Kimi-K2.6 ") and "--speculative-dflash-block-size 16" in s.launch_command
    assert settings_from_profile({"name": "x", "tp_size": 8, "ep_size": 8, "speculative_algorithm": "dflash"}).speculative_num_draft_tokens == 16
    with start_sim("ep8-dflash", time_scale=50) as sim:
        info = httpx.get(sim.url + "/server_info").json()
    assert info["speculative_algorithm"] == "DFLASH" and info["speculative_num_draft_tokens"] == 16
    assert info["speculative_dflash_block_size"] == 16 and info["speculative_num_steps"] == 1
    assert info["launch_command"] == s.launch_command
