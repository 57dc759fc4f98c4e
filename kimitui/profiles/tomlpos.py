"""Find the line of a key in TOML text, so errors can point at it.

tomllib gives values, not positions; this scans the text for table headers
and ``key =`` lines. Good enough for the flat, hand-written profile files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_HEADER = re.compile(r"^\s*\[(?!\[)\s*(?P<name>[^\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?P<key>(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'))*)\s*=""")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'""")


def _split_key(key: str) -> list[str]:
    return [p[1:-1] if p[:1] in "\"'" else p for p in _PART.findall(key)]


def find_key_line(text: str, loc: Sequence[str | int]) -> int | None:
    """1-based line where the dotted key ``loc`` (or its longest defined prefix) is set."""
    target = [str(p) for p in loc if not isinstance(p, int)]
    if not target:
        return None
    best: tuple[int, int] | None = None  # (matched parts, line)
    table: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _split_key(header.group("name"))
            if table == target[: len(table)] and (best is None or len(table) > best[0]):
                best = (len(table), lineno)
            continue
        key = _KEY.match(line)
        if not key:
            continue
        full = table + _split_key(key.group("key"))
        n = 0
        while n < min(len(full), len(target)) and full[n] == target[n]:
            n += 1
        if n == len(full) or n == len(target):  # the key is the target or a prefix of it
            if n == len(target):
                return lineno
            if best is None or n > best[0]:
                best = (n, lineno)
    return best[1] if best else None
