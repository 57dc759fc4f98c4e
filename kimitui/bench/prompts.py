"""Prompt sets for sweeps: the field notes' five prompts, or synthetic ones.

``seed`` reproduces the seeds' workload (``/work/shared/seeds/000_*.txt``) so a
kimitui sweep can be compared with the numbers operators already have.
``random:N`` builds prompts of about N tokens from short common words (about
one token each for BPE tokenizers); every prompt starts with its own index so
two requests never share a cacheable prefix.
"""

from __future__ import annotations

import random
from collections.abc import Callable

SEED_PROMPTS: tuple[str, ...] = (
    "Write a Python quicksort implementation with detailed comments.",
    "Explain the theory of relativity in 3 sentences.",
    "What is 2+2? Answer with just the number.",
    "Write a haiku about programming.",
    "Write a Python JSON parser that handles nested objects.",
)

_WORDS = (
    "the of and to in is it that for on was with as be at by this had not are but from or have an they "
    "which one you were all we her she there would their will when who him been has more if no out do so "
    "can what up said about other into than its time only could new them man some these then two first may "
    "any like now my such make over our even most me state after also made many did must before back see "
    "through way where get much go well your know should down work year because come people just say each "
    "those take day good how long very still own find here thing give many well"
).split()


class PromptError(ValueError):
    """The ``prompts`` setting of a sweep spec is not understood."""


def prompt_source(spec: str, seed: int = 0) -> Callable[[int], str]:
    """A function giving the i-th prompt of the set named by ``spec``.

    Raises :class:`PromptError` naming the bad value.
    """
    if spec == "seed":
        return lambda i: SEED_PROMPTS[i % len(SEED_PROMPTS)]
    if spec.startswith("random:"):
        try:
            n = int(spec.split(":", 1)[1])
        except ValueError:
            raise PromptError(f"prompts: {spec!r}: expected random:N with N an integer token count") from None
        if n < 1 or n > 1_000_000:
            raise PromptError(f"prompts: {spec!r}: N must be between 1 and 1000000")
        return _random_prompts(n, seed)
    raise PromptError(f"prompts: {spec!r}: expected 'seed' or 'random:N'")


def _random_prompts(n_tokens: int, seed: int) -> Callable[[int], str]:
    cache: dict[int, str] = {}

    def make(i: int) -> str:
        text = cache.get(i)
        if text is None:
            rng = random.Random(seed * 1_000_003 + i)
            words = [f"#{i}"] + rng.choices(_WORDS, k=max(0, n_tokens - 1))
            text = " ".join(words)
            if len(cache) < 4096:
                cache[i] = text
        return text

    return make
