"""Values as SGLang's log lines write them: numbers, flags, ``key=value`` pairs, ``N GB`` figures.

Bounded and total: a number longer than :data:`NUM_CHARS` characters, or one that is not finite
(``inf``, ``nan``, ``1e999``), stays text; nothing here raises on what a line holds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

Fields = dict[str, Any]
"""A line's fields as the parser builds them (:mod:`kimitui.sglang.log.kinds` types them per kind)."""
Value = bool | int | float | str
"""A value read from a log line: a number or a flag when it is one, else its text."""

MAX_LINE_CHARS = 16384
"""Longer lines are cut to this many characters and flagged ``truncated`` (SGLang's longest real
lines, ``server_args=ServerArgs(...)`` dumps, are ~6 KB)."""

NUM_CHARS = 300
"""A digit run longer than this stays text: as a float it could overflow, as an int it is no figure."""

RESERVED = frozenset({"ts", "rank", "ranks", "iter", "truncated", "raw_chars", "unparsed", "parse_error"})
"""Fields the parser sets from the line's prefix or about the line itself; a body key never overwrites one."""


def as_int(text: str) -> int | str:
    """Digits (``\\d+``) -> int; an absurdly long run stays text."""
    return int(text) if len(text) <= NUM_CHARS else text


def as_float(text: str) -> float | str:
    """A finite float, else the text (``inf``/``nan``/``1e999`` would not survive JSON)."""
    if len(text) <= NUM_CHARS:
        try:
            f = float(text)
        except ValueError:
            return text
        if math.isfinite(f):
            return f
    return text


def ratio(i: object, n: object) -> float | None:
    """``i / n`` as progress (0..1) when both are sane counts, else None; never overflows."""
    if type(i) is int and type(n) is int and n > 0 and i >= 0:
        return min(i, n) / n
    return None


_SLUG = re.compile(r"[^0-9a-z]+")


def slug(key: str) -> str:
    return _SLUG.sub("_", key.lower()).strip("_") or "key"


def value(text: str) -> Value:
    """A log value as int / float / bool when it is one (finite, not absurdly long), else the text."""
    if text == "True":
        return True
    if text == "False":
        return False
    if len(text) > NUM_CHARS:
        return text
    try:
        if "." in text or "e" in text:
            f = float(text)
            return f if math.isfinite(f) else text
        return int(text)
    except ValueError:
        if text.endswith("%"):
            f2 = as_float(text[:-1])
            if isinstance(f2, float):
                return f2
        return text


# A key starts at a word's start (the lookbehind): restarting inside a long run made it quadratic.  Possessive
# (``++``): a run of key characters not followed by "=" gives up at once, instead of trying each shorter run
# (none can be followed by "=", which is no key character) - a 16 KB word cost 0.5 ms (issue 33).
_KV_EQ = re.compile(r"(?<![\w.])([\w.]++)=([^\s,]+)")
_KEY_START = re.compile(r"[A-Za-z_]")
_KEY_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
"""What :data:`_KEY_START` finds, as a set: a key that starts with one starts there."""


def kv_pairs(text: str, fields: Fields) -> None:
    """``key=value`` pairs; never overwrites what the line already set (``step``, ``ts``, ``rank``...)."""
    for key, val in _KV_EQ.findall(text):
        if key[0] not in _KEY_FIRST:  # most keys start with their first letter: no search (issue 33)
            start = _KEY_START.search(key)  # the key begins at its first letter, as r"[A-Za-z_][\w.]*" did
            if start is None:
                continue
            key = key[start.start():]
        if key in fields or key in RESERVED:
            key = "field_" + key
        fields[key] = value(val.rstrip(".,)"))


def gb_fields(text: str, fields: Fields) -> None:
    """``avail mem=20.17 GB``, ``KV size: 34.30 GB`` -> ``avail_mem_gb``, ``kv_size_gb``."""
    chunks = text.split(" GB")
    for chunk in chunks[:-1]:
        tail = chunk[-64:]
        i = len(tail)
        while i and (tail[i - 1].isdigit() or tail[i - 1] == "."):
            i -= 1
        number, rest = tail[i:], tail[:i]
        if not number or number == ".":
            continue
        if rest.endswith("="):
            rest = rest[:-1]
        elif rest.endswith(": "):
            rest = rest[:-2]
        else:
            continue
        words = rest.split()
        if not words:
            continue
        key = words[-1]
        if len(words) > 1 and words[-2].isalpha():  # two-word keys: "avail mem", "KV size"
            key = f"{words[-2]} {key}"
        try:
            fields[slug(key) + "_gb"] = float(number)
        except ValueError:
            continue


_ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: )(\d+(?:\.\d+)?) ?s")


def elapsed(msg: str, fields: Fields) -> None:
    """``elapsed=0.98 s`` -> ``elapsed_s``."""
    m = _ELAPSED.search(msg)
    if m:
        fields["elapsed_s"] = as_float(m.group(1))


LONG_TEXT = 2048
"""Past this many characters :func:`finder` looks for a needle by a compiled literal instead of ``in``."""
_LITERALS: dict[str, Callable[[str], re.Match[str] | None]] = {}


def finder(text: str) -> Callable[[str], bool]:
    """``needle in text`` as a function, bounded on a long text (issue 33).

    On a long run of the letters a needle holds (``aaaa...``) CPython's ``in`` steps one character at a time,
    ~40 us per needle on 16 KB; the regex engine's literal search stays ~10 us.  A short text keeps ``in``."""
    if len(text) <= LONG_TEXT:
        return text.__contains__

    def has(needle: str) -> bool:
        search = _LITERALS.get(needle)
        if search is None:
            search = _LITERALS[needle] = re.compile(re.escape(needle)).search
        return search(text) is not None

    return has
