"""The simulator's performance model and text stand-ins, without a server."""

from __future__ import annotations

import random
import statistics

import pytest

from kimitui.sim.perf_model import PerfModel, capture_batch_sizes
from kimitui.sim.settings import SimConfigError, load_settings, settings_from_profile
from kimitui.sim.textgen import TokenStream, chat_prompt, natural_length


def steady_tok_s(profile: str, batch: int, **overrides) -> float:
    model = PerfModel(load_settings(profile, **overrides))
    return batch / model.decode_step_s(batch, batch * 300)


def test_calibrated_to_the_seeds_at_time_scale_1():
    assert 62 <= steady_tok_s("ep8-tuned", 1) <= 68  # seed: 65 tok/s at C=1
    assert 310 <= steady_tok_s("ep8-tuned", 16) <= 370  # seed: 345 aggregate at C=16
    assert 1430 <= steady_tok_s("ep8-tuned", 256) <= 1600  # seed: peak 1538
    assert 24 <= steady_tok_s("tp8", 1) <= 28  # seed: 26 tok/s at C=1
    # EPLB costs per step before any rebalance stall: peak well below ep8-tuned's
    assert steady_tok_s("ep8-eplb", 256) < 0.65 * steady_tok_s("ep8-tuned", 256)
    assert steady_tok_s("ep8-v2", 256) == pytest.approx(steady_tok_s("ep8-eplb", 256))


def test_num_continuous_decode_steps_changes_nothing():
    for batch in (1, 16, 256):
        assert steady_tok_s("ep8-cont16", batch) == steady_tok_s("ep8-tuned", batch)
        assert steady_tok_s("ep8-cont4", batch) == steady_tok_s("ep8-tuned", batch)


def test_batches_above_cuda_graph_max_bs_run_eager_and_slower():
    model = PerfModel(load_settings("ep8-tuned", cuda_graph_max_bs=32))
    assert model.uses_cuda_graph(32) and not model.uses_cuda_graph(33)
    per_token_32 = model.decode_step_s(32, 32 * 300) / 32
    per_token_33 = model.decode_step_s(33, 33 * 300) / 33
    assert per_token_33 > 1.4 * per_token_32  # crossing the graph ceiling costs, not saves


def test_eplb_stalls_are_heavy_tailed_and_seeded():
    model = PerfModel(load_settings("ep8-eplb"))
    stalls = [model.eplb_stall_s(random.Random(7)) for _ in range(1)]
    rng = random.Random(42)
    many = [model.eplb_stall_s(rng) for _ in range(400)]
    assert statistics.median(many) < 3.0  # most rebalances take a couple of seconds
    assert max(many) > 40.0  # some stall tens of seconds (the 66.6 s / 7.7 tok/s request)
    assert sum(s > 8 for s in many) >= 40
    assert stalls == [model.eplb_stall_s(random.Random(7))]  # same seed, same stall


def test_speculative_steps_accept_between_one_and_draft_tokens():
    s = settings_from_profile({"name": "spec", "tp_size": 8, "ep_size": 8, "speculative_algorithm": "EAGLE"})
    model = PerfModel(s)
    rng = random.Random(1)
    assert model.spec is not None
    accepted = [model.spec.verify(rng, False, None)[0] + 1 for _ in range(2000)]
    assert min(accepted) == 1 and max(accepted) == s.speculative_num_draft_tokens
    assert 2.0 < statistics.mean(accepted) < 3.2


def test_kv_pool_and_memory_match_an_85_gb_serving_gpu():
    model = PerfModel(load_settings("ep8-tuned"))
    used = 1.27 + model.weights_gb + model.kv_gb + model.graph_gb
    assert 82 <= used <= 88
    assert model.max_running_requests == 256
    assert model.max_total_num_tokens > 200_000


def test_capture_list_matches_sglang():
    sizes = capture_batch_sizes(512)
    assert sizes[:6] == [1, 2, 4, 8, 12, 16] and sizes[-1] == 512 and len(sizes) == 52
    assert capture_batch_sizes(32)[-1] == 32


def test_output_length_depends_on_prompt_and_is_deterministic():
    a, _ = chat_prompt([{"role": "user", "content": "What is 2+2?"}])
    b, _ = chat_prompt([{"role": "user", "content": "Write a JSON parser."}])
    lengths = {natural_length(f"prompt {i}", 0) for i in range(50)}
    assert len(lengths) > 30 and min(lengths) >= 8 and max(lengths) <= 4096
    assert natural_length(a, 0) == natural_length(a, 0)
    assert natural_length(a, 0) != natural_length(b, 0)
    assert [TokenStream(a, 3).piece(i) for i in range(20)] == [TokenStream(a, 3).piece(i) for i in range(20)]


def test_impossible_settings_are_refused_like_sglang():
    with pytest.raises(SimConfigError, match="divisible"):
        settings_from_profile({"name": "x", "tp_size": 8, "ep_size": 3})
    with pytest.raises(SimConfigError, match="ep_size > 1"):
        settings_from_profile({"name": "x", "tp_size": 8, "enable_eplb": True})
    with pytest.raises(SimConfigError, match="unknown fault"):
        load_settings("ep8-tuned", fault="meteor")
    with pytest.raises(SimConfigError, match="nope"):
        load_settings("nope")


def test_text_has_non_ascii_at_a_realistic_seeded_rate():
    """Kimi writes curly quotes, CJK, accents and emoji; the simulator's text must too (SGLang sends them raw)."""
    pieces = [TokenStream("Explain EPLB.", 4).piece(i) for i in range(4000)]
    share = sum(not p.isascii() for p in pieces) / len(pieces)
    assert 0.03 <= share <= 0.15
    kinds = "".join(p for p in pieces if not p.isascii())
    assert "\u201c" in kinds and "\u00e9" in kinds and "\u65e5" in kinds and "\U0001f642" in kinds
    assert pieces == [TokenStream("Explain EPLB.", 4).piece(i) for i in range(4000)]  # seeded


def test_prompt_tokens_are_counted_like_a_large_bpe_vocabulary():
    from kimitui.sim.textgen import count_text_tokens

    # common words with their space are one token each; bytes/4 made 100 such words ~110 tokens
    assert count_text_tokens(" ".join(["the", "which", "people", "because"] * 25)) == 100
    assert count_text_tokens("Write a Python quicksort implementation with detailed comments.") in range(9, 13)
    assert count_text_tokens("日本語") == 3 and count_text_tokens("12345678") == 3
