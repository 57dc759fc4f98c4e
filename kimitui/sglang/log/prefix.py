"""What comes before a log line's message: SGLang's ``[time RANKS]``, journald's and a custom
logging config's prefixes, uvicorn's level word; ANSI colour and tqdm's ``\\r`` redraws.

SGLang's rank tags (DP PP ATTN_CP MOE_DP TP EP) become ``rank`` (``"TP1_EP1"``: the same spelling as
the scheduler's process title, ``sglang::scheduler_TP1_EP1``) and ``ranks`` (``{"tp": 1, "ep": 1}``).
"""

from __future__ import annotations

import re

from kimitui.events import LogSeverity
from kimitui.sglang.log.values import MAX_LINE_CHARS, Fields

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# journalctl -o short-iso: "2026-05-28T10:00:00+0000 host python3[123]: <message>"
JOURNAL = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})? \S+ [^\s:\[]+(?:\[\d+\])?: "
)
# SGLang's own: "[2026-05-28 10:00:09(.123)( DP2)( TP2)( EP2)] message"
PREFIX = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)((?: [A-Z_]+\d+)*)\] ?")
# A user's logging dictConfig: "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 file.py:222] message"
CUSTOM = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)[\s|-]+"
    r"(?:\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?[\s|:-]+)?"
    r"(?:\d+\s+)?(?:\[([^\]]*)\]\s*)?"
)
_RANK_TAG = re.compile(r"\b(ATTN_CP|MOE_DP|DP|PP|TP|EP)(\d{1,9})\b")
UVICORN_LEVEL = re.compile(r"^(TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")

LEVEL_SEVERITY: dict[str, LogSeverity] = {
    "TRACE": "debug",
    "DEBUG": "debug",
    "INFO": "info",
    "WARNING": "warning",
    "WARN": "warning",
    "ERROR": "error",
    "CRITICAL": "critical",
    "FATAL": "critical",
}


def clean(raw: str) -> str:
    """The line without its end, tqdm's earlier redraws and ANSI colour."""
    line = raw.rstrip("\r\n")
    if "\r" in line:  # tqdm redraws: keep the last non-empty state
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    return line


_RANK_CACHE: dict[str, tuple[dict[str, int], str] | None] = {}


def ranks(tags: str, fields: Fields) -> None:
    """``" TP1 EP1"`` -> ``ranks`` and ``rank``; memoised (a server has few rank sets), bounded."""
    hit = _RANK_CACHE.get(tags, False)
    if hit is False:
        found = _RANK_TAG.findall(tags)
        hit = ({n.lower(): int(v) for n, v in found}, "_".join(n + v for n, v in found)) if found else None
        if len(_RANK_CACHE) < 4096 and len(tags) <= 128:
            _RANK_CACHE[tags] = hit
    if isinstance(hit, tuple):  # not None, nor the False of "not cached"
        fields["ranks"] = dict(hit[0])
        fields["rank"] = hit[1]


_GLUED = re.compile(r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
_GLUED_PREFIX = re.compile(r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?: [A-Z_]+\d+)*\] ")
"""A whole SGLang prefix, then its message: what a line glued on without a newline starts with."""


def split_glued(raw: str) -> list[str]:
    """One physical line -> the log lines in it.

    tqdm redraws its bar with ``\\r`` and no newline, so when stderr and stdout
    share a file or journal the next log line is glued onto the bar:
    ``...\\rCapturing batches (...) 7/52 [00:00<00:00][2026-05-28 10:00:01] INFO: ...``.
    That becomes two lines: the bar's last state and the log line.  So does a line another
    process left without its newline: the real 0.5.18 crash log has nanobind's
    ``See https://nanobind.readthedocs.io/en/latest/refleaks.html[2026-12-06 03:08:10] No live
    scheduler processes found...``.
    """
    if "\r" not in raw:
        at = raw.find("[20", 1, MAX_LINE_CHARS)  # the cheap test: most lines hold no second timestamp
        if at < 0:
            return [raw]
        m = _GLUED_PREFIX.search(raw, at)
        if m is None or raw[m.start() - 1].isspace():  # "... seen at [2026-...] ..." inside a message
            return [raw]
        head = raw[: m.start()]
        if not any(c.isalnum() for c in ANSI.sub("", head)):  # a colour code or a stray bracket: one line
            return [raw]
        return [head, raw[m.start():]]
    parts = [p for p in raw.rstrip("\r\n").split("\r") if p.strip()]
    if not parts:
        return [raw]
    last = parts[-1]
    m = _GLUED.search(last, 1)
    if m is None:
        return [raw]
    return [last[: m.start()], last[m.start() :]]
