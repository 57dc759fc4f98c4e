"""A faithful reader of the systemd unit syntax that kimitui writes (for tests; no systemd here).

Follows systemd's rules: lines ending in a backslash continue; ``#``/``;`` comment lines;
ExecStart= words split like ``extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE)``;
then ``%%`` -> ``%`` (other ``%x`` are specifiers) and, in ExecStart=, ``$$`` -> ``$``
(other ``$NAME``/``${NAME}`` are expanded from the environment).
"""

from __future__ import annotations

import re

_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"', "'": "'", "s": " "}


def parse_unit(text: str) -> list[tuple[str, str, str]]:
    """(section, key, raw value) for every assignment, in order."""
    logical: list[str] = []
    buf = ""
    for line in text.split("\n"):
        stripped = line.strip()
        if not buf and (not stripped or stripped[0] in "#;"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)
    out: list[tuple[str, str, str]] = []
    section = ""
    for line in logical:
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            continue
        key, sep, value = s.partition("=")
        if not sep:
            raise ValueError(f"not an assignment: {s!r}")
        out.append((section, key.strip(), value.strip()))
    return out


def split_words(value: str) -> list[str]:
    """systemd's unquoting + C unescaping of a space-separated word list."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word = ""
        quote: str | None = None
        while i < n:
            ch = value[i]
            if quote is None and ch in " \t":
                break
            if ch == "\\":
                i += 1
                if i >= n:
                    raise ValueError("trailing backslash")
                esc = value[i]
                if esc == "x":
                    word += chr(int(value[i + 1 : i + 3], 16))
                    i += 3
                    continue
                if esc not in _C_ESCAPES:
                    raise ValueError(f"bad escape \\{esc}")
                word += _C_ESCAPES[esc]
                i += 1
                continue
            if quote is None and ch in "\"'":
                quote = ch
            elif ch == quote:
                quote = None
            else:
                word += ch
            i += 1
        if quote is not None:
            raise ValueError("unbalanced quotes")
        words.append(word)
    return words


def expand_specifiers(word: str) -> str:
    """``%%`` -> ``%``; any other specifier is an error here (kimitui must never emit one)."""

    def repl(m: re.Match[str]) -> str:
        if m.group(1) == "%":
            return "%"
        raise ValueError(f"unescaped specifier %{m.group(1)} in {word!r}")

    return re.sub(r"%(.)", repl, word)


def expand_dollars(word: str) -> str:
    """``$$`` -> ``$``; a ``$NAME``/``${NAME}`` would be substituted by systemd: an error here."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        raise ValueError(f"variable substitution {m.group(0)!r} in {word!r}")

    return re.sub(r"\$\$|\$\{?[A-Za-z_]", repl, word)


def exec_argv(value: str) -> list[str]:
    """The argv systemd would run for an ExecStart= value (no prefixes, no ';' separators).

    Order as in systemd: specifiers over the whole value at load, then word splitting and
    unescaping, then ``$`` substitution per word at exec time.
    """
    return [expand_dollars(w) for w in split_words(expand_specifiers(value))]


def environment(value: str) -> dict[str, str]:
    """The variables an Environment= value assigns."""
    return dict(w.split("=", 1) for w in split_words(expand_specifiers(value)))
