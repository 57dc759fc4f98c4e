"""Prompt sets for sweeps: the field notes' five prompts, or synthetic ones.

``seed`` reproduces the seeds' workload (``/work/shared/seeds/000_*.txt``) so a
kimitui sweep can be compared with the numbers operators already have.
``random:N`` builds prompts from short common words (about one token each
for a large BPE vocabulary); every prompt starts with its own index so two
requests never share a cacheable prefix.  Words are not tokens (a small
vocabulary splits them, the chat template adds its own), so before its first
level a sweep asks the server how many tokens its prompts come to and picks
the word count that lands on N (:func:`fit_words`, ``SweepEngine``).
"""

from __future__ import annotations

import functools
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


def random_tokens(spec: str) -> int | None:
    """N of ``random:N``; None for any other prompt set."""
    if not spec.startswith("random:"):
        return None
    try:
        return int(spec.split(":", 1)[1])
    except ValueError:
        return None


def prompt_source(spec: str, seed: int = 0, words: int | None = None) -> Callable[[int], str]:
    """A function giving the i-th prompt of the set named by ``spec``.

    ``words`` (for ``random:N``): the prompt's word count, as calibrated against
    the server; N words when not given.  Raises :class:`PromptError` naming the bad value.
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
        return _random_prompts(words if words is not None else n, seed)
    raise PromptError(f"prompts: {spec!r}: expected 'seed' or 'random:N'")


@functools.lru_cache(maxsize=8)
def _bag(seed: int, k: int) -> tuple[str, ...]:
    """The words every prompt of a sweep shares (a longer bag starts with a shorter one)."""
    return tuple(random.Random(seed * 1_000_003 - 1).choices(_WORDS, k=k))


def random_prompt(n_words: int, seed: int, i: int) -> str:
    """The i-th ``random`` prompt of ``n_words`` words (the index counts as the first).

    Every prompt is its own order of the same bag of words: a tokenizer that
    splits words independently (BPE, SentencePiece) then counts every prompt
    the same, give or take the index, so one calibration fits them all
    (independent draws varied by +-8 % per prompt on a 3k-token vocabulary).
    """
    bag = _bag(seed, max(0, n_words - 1))
    return " ".join([f"#{i}", *random.Random(seed * 1_000_003 + i).sample(bag, len(bag))])


def fit_words(target: int, points: list[tuple[int, int]]) -> int:
    """The word count whose prompt the server counts as ``target`` tokens.

    ``points`` are (words, server prompt_tokens) probes; a line through the
    last two (tokens = overhead + per_word x words) is solved for ``target``:
    the chat template's overhead and the tokenizer's tokens per word both count.
    """
    w2, t2 = points[-1]
    w1, t1 = next(((w, t) for w, t in reversed(points[:-1]) if w != w2), (0, 0))
    per_word = (t2 - t1) / (w2 - w1) if t2 > t1 else t2 / max(1, w2)
    overhead = t2 - per_word * w2
    return max(1, round((target - overhead) / per_word))


def _random_prompts(n_words: int, seed: int) -> Callable[[int], str]:
    cache: dict[int, str] = {}

    def make(i: int) -> str:
        text = cache.get(i)
        if text is None:
            text = random_prompt(n_words, seed, i)
            if len(cache) < 4096:
                cache[i] = text
        return text

    return make
