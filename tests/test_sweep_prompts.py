"""Prompt sets: the seeds' five prompts, and synthetic N-token prompts that never share a prefix."""

from __future__ import annotations

import pytest

from kimitui.loadgen.prompts import SEED_PROMPTS, PromptError, prompt_source


def test_seed_prompts_cycle_in_the_field_notes_order() -> None:
    p = prompt_source("seed")
    assert [p(i) for i in range(6)] == [*SEED_PROMPTS, SEED_PROMPTS[0]]
    assert SEED_PROMPTS[2] == "What is 2+2? Answer with just the number."


def test_random_prompts_have_the_length_asked_and_distinct_prefixes() -> None:
    p = prompt_source("random:64", seed=7)
    texts = [p(i) for i in range(50)]
    assert all(len(t.split()) == 64 for t in texts)
    assert len({t.split()[0] for t in texts}) == 50  # no two share a cacheable prefix
    assert prompt_source("random:64", seed=7)(3) == texts[3]  # reproducible
    assert prompt_source("random:64", seed=8)(3) != texts[3]


@pytest.mark.parametrize("bad", ["random", "random:", "random:0", "random:abc", "sharegpt"])
def test_unknown_prompt_sets_are_refused_by_name(bad: str) -> None:
    with pytest.raises(PromptError, match="prompts: "):
        prompt_source(bad)
