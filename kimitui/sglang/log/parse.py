"""One log line -> its kind, severity and fields: the dispatch over the line families.

:func:`parse_line` understands every line kind of SGLang's log across versions (reference/sglang.md
§1) and never raises: a line it does not understand is ``plain`` and keeps its text.  Speed matters
(a busy server logs thousands of lines per second and a replay parses hours of them), so dispatch
is on cheap substring checks and only then on precompiled regexes.

Bad input costs bounded time and never a line (issue 13): a line longer than
:data:`MAX_LINE_CHARS` is parsed (and kept in its :class:`LogLine`) as its first
``MAX_LINE_CHARS`` characters (a tqdm line: its last redraw) with ``truncated: true`` and
``raw_chars`` (the original length) in its fields; every pattern is linear-time.
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple

from kimitui.events import LogLine, LogSeverity
from kimitui.sglang.log.batch import BATCH, batch_line, decode_fields, prefill_fields
from kimitui.sglang.log.eplb import eplb
from kimitui.sglang.log.kinds import LineKind
from kimitui.sglang.log.prefix import CUSTOM, JOURNAL, LEVEL_SEVERITY, PREFIX, UVICORN_LEVEL, clean, ranks
from kimitui.sglang.log.problems import problem
from kimitui.sglang.log.secrets import FLAG_KINDS, redact_secrets
from kimitui.sglang.log.startup import startup
from kimitui.sglang.log.values import MAX_LINE_CHARS, Fields, as_int


class Parsed(NamedTuple):
    line_kind: LineKind
    severity: LogSeverity
    fields: Fields


# Bound here, not called through the imported names: CPython 3.11 calls a method of an imported name by
# LOAD_ATTR (a bound-method object per call, ~3 % of a line's parse); these run on every line.
_journal = JOURNAL.match
_prefix = PREFIX.match
_custom = CUSTOM.match
_uvicorn_level = UVICORN_LEVEL.match
_severity_of = LEVEL_SEVERITY.get
_batch_at_start = BATCH.match
_batch_anywhere = BATCH.search

_ACCESS = re.compile(r'^(\S+) - "([A-Z]+) (\S+)(?: (HTTP/[\d.]+))?" (\d{3})')
# The usual access line whole (SGLang's prefix, uvicorn's level word, the request) in one match (issue 33).
_ACCESS_LINE = re.compile(PREFIX.pattern + r"(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+" + _ACCESS.pattern[1:])
_access_line = _ACCESS_LINE.match
_now = time.time
_event = LogLine.from_parser

Result = tuple[LineKind, LogSeverity, Fields]
"""What :func:`_parse` returns: a :class:`Parsed` without the named tuple (a plain tuple costs less)."""


def _bounded(raw: str) -> tuple[str, int | None]:
    """The line to parse and keep, and its original length when that was over :data:`MAX_LINE_CHARS`.

    Work per line is bounded by the cap, not by what a host sends: a tqdm line (many ``\\r``
    redraws) is first reduced to its last non-empty redraw, as :func:`~kimitui.sglang.log.prefix.clean` would.
    """
    if len(raw) <= MAX_LINE_CHARS:
        return raw, None
    text = raw.rstrip("\r\n")
    if "\r" in text:
        end = len(text)
        while end > 0:
            start = text.rfind("\r", 0, end) + 1
            if text[start:end].strip():
                break
            end = start - 1
        text = text[start:end] if end > 0 else ""
    if len(text) <= MAX_LINE_CHARS:
        return text, len(raw)
    return text[:MAX_LINE_CHARS], len(raw)


def parse_line(raw: str) -> Parsed:
    """Classify one log line and extract its fields; never raises, bounded time (see :data:`MAX_LINE_CHARS`)."""
    kind, severity, fields, _ = _parse_bounded(raw)
    return Parsed(kind, severity, fields)


def _parse_bounded(raw: str) -> tuple[LineKind, LogSeverity, Fields, str]:
    """The line's kind, severity and fields, and the text kept (bounded, secrets ``***``)."""
    text, length = (raw, None) if len(raw) <= MAX_LINE_CHARS else _bounded(raw)
    try:
        if "=" in text:  # a setting's value may be a secret: hidden before the one parse, so the fields hold ***
            text = redact_secrets(text)  # (substring checks first; decode and prefill lines carry no "=")
        kind, severity, fields = _parse(text)
        if kind in FLAG_KINDS and "--" in text and "=" not in text:  # a command line's ``--api-key VALUE``
            shown = redact_secrets(text)
            if shown != text:  # rare: parse what is kept, so the fields hold *** too
                text = shown
                kind, severity, fields = _parse(shown)
    except Exception as exc:  # a parser bug must never cost the line
        text = redact_secrets(text)
        kind, severity, fields = "plain", "info", {"parse_error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    if length is not None:
        fields["truncated"] = True
        fields["raw_chars"] = length
    return kind, severity, fields, text


def _parse(raw: str) -> Result:
    line = raw.rstrip("\r\n")
    if "\r" in line or "\x1b" in line:  # clean()'s work, called only when there is some (most lines: none)
        line = clean(line)
    if line[:1] == "[":  # the commonest lines whole, in one match each: batch figures, then requests
        if "batch" in line:
            hit = batch_line(line)
            if hit is not None:
                return hit
        if '" ' in line:  # what every access line holds (before its status)
            return _access(line) or _parse_steps(line)
    return _parse_steps(line)


def _access(line: str) -> Result | None:
    """A whole ``[time RANKS] INFO:     client - "GET /path HTTP/1.1" 200`` line: the fields, in the order,
    that the prefix, the level word and :data:`_ACCESS` give it step by step."""
    m = _access_line(line)
    if m is None:
        return None
    ts, tags, client, method, path, http_version, status_text = m.groups()
    fields: Fields = {"ts": ts}
    if tags:
        ranks(tags, fields)
    status = int(status_text)
    fields["client"], fields["method"], fields["path"] = client, method, path
    fields["http_version"], fields["status"] = http_version, status
    return "access", "error" if status >= 500 else "info", fields


def _parse_steps(line: str) -> Result:
    """A cleaned line, one part after another: its prefixes, its level word, then its message by family."""
    fields: Fields = {}
    severity: LogSeverity = "info"
    level: str | None = None
    if line[:1].isdigit():  # journalctl short-iso: strip its prefix once (no recursion: no depth to exhaust)
        m = _journal(line)
        if m:
            line = line[m.end() :]
    msg = line
    if line[:1] == "[":
        m = _prefix(line)
        if m:
            ts, tags = m.groups()
            fields["ts"] = ts
            if tags:
                ranks(tags, fields)
            msg = line[m.end() :]
    elif line[:1].isdigit():
        m = _custom(line)
        if m:
            fields["ts"] = m.group(1)
            level = m.group(2)
            if m.group(3):
                ranks(m.group(3), fields)
            msg = line[m.end() :]
    # uvicorn's "INFO:     ..." level prefix
    if msg[:1] in "TDIWEC" and ":" in msg[:10]:
        m = _uvicorn_level(msg)
        if m:
            level = m.group(1)
            msg = msg[m.end() :]
            if ' HTTP/' in msg or '" ' in msg:
                a = _ACCESS.match(msg)
                if a:
                    client, method, path, http_version, status_text = a.groups()
                    status = int(status_text)
                    fields["client"], fields["method"], fields["path"] = client, method, path
                    fields["http_version"], fields["status"] = http_version, status
                    return "access", "error" if status >= 500 else "info", fields
    if level is not None:
        severity = _severity_of(level, "info")
    # the message, by family (inline: one call less on every line): batch, EPLB, problems, startup, its level
    if " batch" in msg:
        m = _batch_at_start(msg) or _batch_anywhere(msg)
        if m:
            which, iteration = m.groups()
            body = msg[m.end() :]
            if iteration:
                fields["iter"] = as_int(iteration)
            if which == "Decode":
                decode_fields(body, fields)
                return "decode", severity, fields
            prefill_fields(body, fields)
            return "prefill", severity, fields
    if "EPLBManager" in msg or "Expert Balancedness" in msg:
        if eplb(msg, fields):
            return "eplb", severity, fields
    found = problem(msg, fields)
    if found is not None:
        return found[0], found[1], fields
    if startup(msg, fields):
        return "startup", severity, fields
    if severity in ("error", "critical"):
        fields["error"] = "logged"
        return "error", severity, fields
    if severity == "warning":
        fields["error"] = "logged"
        return "warning", severity, fields
    return "plain", severity, fields


def to_event(
    raw: str,
    *,
    host: str,
    source: str,
    cursor: str | None = None,
    t: float | None = None,
) -> LogLine:
    """One raw line as a :class:`LogLine` event (``t`` defaults to now); never raises.

    Over :data:`MAX_LINE_CHARS` the event keeps the text that was parsed, flagged ``truncated``.
    """
    kind, severity, fields, text = _parse_bounded(raw.rstrip("\r\n"))
    if t is None:
        t = _now()
    elif type(t) is not float:
        t = float(t)  # what validation made of an int
    return _event(t, host, text, kind, severity, fields, source, cursor)
