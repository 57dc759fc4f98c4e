"""Deterministic stand-ins for the tokenizer and the model's words.

No tokenizer ships with the simulator: prompt token counts are estimated from
the text the way a large BPE vocabulary splits it (about a token per common
word, plus chat-template overhead), and output tokens are words picked by a hash of (seed, prompt, index).
The natural answer length depends on the prompt (so "What is 2+2?" and "Write a
parser" differ) and is the same every run for the same seed.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

_WORDS = (
    "the of and to in is that for it as with on be this by are from or an at which can we not "
    "function value return data model request token batch expert layer memory GPU kernel cache "
    "first then each when if else while list array index key node tree sort pivot partition "
    "left right merge parse object string number nested quote escape error result test case "
    "light speed time space mass energy frame observer relative motion constant equal "
    "code line loop bug compile run quiet autumn river moon silent screen night rain "
    "simple fast small large high low new old good best more most all some any every "
    "because so thus however therefore also only just still even again here there"
).split()
# Kimi's real output carries curly quotes, dashes, accented words, CJK and the odd emoji; SGLang writes
# them as raw UTF-8, so the simulator's text must too (about 1 token in 12 here) or no client test sees it.
_NON_ASCII = (" \u201c", "\u201d", "\u2019s", " \u2014", " caf\u00e9", " na\u00efve", " \u00fcber",
              " \u65e5\u672c", "\u8a9e", "\u3002", " \u4e2d\u6587", " \U0001f642")
_PIECES = tuple(" " + w for w in _WORDS) + (",", ".", "\n", " (", ")", ":") + _NON_ASCII
CHAT_TEMPLATE_TOKENS_PER_MESSAGE = 4
CHAT_TEMPLATE_TOKENS_FIXED = 3


def stable_hash(*parts: object) -> int:
    """A 64-bit hash that is the same in every process (unlike ``hash()``)."""
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(repr(part).encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "big")


# A byte-level BPE's pre-tokenizer (GPT-2 style): words with their leading space, digit runs, punctuation runs.
_PRETOKEN = re.compile(r"""'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+""")


def count_text_tokens(text: str) -> int:
    """Roughly what a large BPE vocabulary (Kimi's 160k) makes of ``text``.

    A common English word with its leading space is one token, a long one a
    token per ~8 letters, digits go in threes, and non-ASCII text costs about a
    token per 3 UTF-8 bytes (one per CJK character).  Bytes/4 overcounted short
    words by ~15 %, which made ``random:N`` look off on the simulator alone.
    """
    n = 0
    for m in _PRETOKEN.finditer(text):
        piece = m.group()
        if piece.isascii():
            n += 1 if len(piece) <= 10 else math.ceil(len(piece) / 8)
        else:
            n += max(1, math.ceil(len(piece.encode("utf-8")) / 3))
    return max(1, n)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def chat_prompt(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The rendered prompt text (for hashing) and its token count."""
    texts = [f"{m.get('role', 'user')}: {_content_text(m.get('content'))}" for m in messages]
    tokens = CHAT_TEMPLATE_TOKENS_FIXED + sum(
        CHAT_TEMPLATE_TOKENS_PER_MESSAGE + count_text_tokens(_content_text(m.get("content"))) for m in messages
    )
    return "\n".join(texts), tokens


def plain_prompt(prompt: Any) -> tuple[str, int]:
    """A completions/generate prompt: text, or a list of token ids."""
    if isinstance(prompt, list):
        if prompt and isinstance(prompt[0], list):  # a batch: use the first
            prompt = prompt[0]
        if all(isinstance(t, int) for t in prompt):
            return repr(prompt[:64]) + f"#{len(prompt)}", max(1, len(prompt))
        prompt = " ".join(str(p) for p in prompt)
    text = "" if prompt is None else str(prompt)
    return text, count_text_tokens(text)


def natural_length(prompt_text: str, seed: int) -> int:
    """How many tokens the model would write before EOS for this prompt (8..4096)."""
    h = stable_hash("len", seed, prompt_text)
    u1 = ((h >> 11) & ((1 << 26) - 1)) / (1 << 26)
    u2 = (h & 2047) / 2048.0
    # Box-Muller for a log-normal: median ~650 tokens, long tail of long answers.
    z = math.sqrt(-2.0 * math.log(max(u1, 1e-9))) * math.cos(2.0 * math.pi * u2)
    return int(min(4096, max(8, round(math.exp(math.log(650) + 0.85 * z)))))


class TokenStream:
    """The words one request produces, one piece per token, deterministic."""

    __slots__ = ("_base",)

    def __init__(self, prompt_text: str, seed: int) -> None:
        self._base = stable_hash("text", seed, prompt_text)

    def piece(self, index: int) -> str:
        x = (self._base + index * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 29
        return _PIECES[x % len(_PIECES)]
