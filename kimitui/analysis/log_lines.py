"""What of the server log an operator reads: kimitui's own polling hidden, every rank's copy of a line once.

Two things buried the line that explains a straggler's gap under a hundred others:

* kimitui polls the server (``/metrics``, ``/v1/loads``, ``/health``, ``/server_info``) and uvicorn logs
  each poll as an access line.  Those lines are kimitui talking to itself: :func:`is_own_polling` tells
  them apart from the sweep's own requests (``POST /v1/chat/completions``) and an operator's ``curl``
  of another path.
* SGLang's schedulers each print start-up, EPLB and warning lines, so with TP8 every such line comes
  eight times, differing only in the rank tag (``[2025-11-30 10:21:07 TP3 EP3]``).  :class:`RankMerger`
  folds the copies into one line that names the rank set: ``[2025-11-30 10:21:07 TP0–7 EP0–7]``.

Pure functions over plain values: the log panel, the straggler view and the reports share them.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kimitui.sglang.log import kind_is

OWN_POLL_PATHS = frozenset({
    "/metrics", "/v1/loads", "/health", "/health_generate", "/server_info", "/get_server_info",
    "/get_model_info", "/model_info", "/v1/models", "/get_load",
})
"""What kimitui's pollers and readiness checks GET (telemetry/metrics_poll, launcher/http_ready, server_follower)."""

_ACCESS_REQUEST = re.compile(r'"(GET|HEAD) ([^ "?]+)[^ "]* HTTP/[0-9.]+"')
_PREFIX = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)((?: [A-Z_]+\d+)+)\] ?")
_TAG = re.compile(r"([A-Z_]+?)(\d+)$")

MERGE_WINDOW_S = 2.0
"""Copies of a line further apart than this are separate events (the same warning a minute later)."""
MERGE_LOOKBACK = 64
"""How many recent merged lines a new copy may join: 8 ranks' copies interleave with a few other lines."""


def is_own_polling(kind: str, text: str) -> bool:
    """True for an access line of a GET/HEAD that kimitui itself sends to watch the server."""
    if not kind_is(kind, "access"):
        return False
    m = _ACCESS_REQUEST.search(text)
    return m is not None and m.group(2).rstrip("/") in OWN_POLL_PATHS


def split_rank(text: str) -> tuple[str, dict[str, int], str] | None:
    """``[ts TP3 EP3] msg`` -> (ts, {"TP": 3, "EP": 3}, msg); None when the line has no rank tag."""
    m = _PREFIX.match(text)
    if m is None:
        return None
    tags: dict[str, int] = {}
    for tag in m.group(2).split():
        hit = _TAG.match(tag)
        if hit is None:
            return None
        tags[hit.group(1)] = int(hit.group(2))
    return m.group(1), tags, text[m.end():]


def _span(numbers: Iterable[int]) -> str:
    """{0..7} -> ``0–7``; {0, 1, 2, 5} -> ``0–2,5``."""
    out: list[str] = []
    nums = sorted(set(numbers))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}–{nums[j]}")
        i = j + 1
    return ",".join(out)


def rank_set(ranks: dict[str, set[int]]) -> str:
    """The tag that names every rank a line came from: ``TP0–7 EP0–7``."""
    return " ".join(f"{name}{_span(nums)}" for name, nums in ranks.items())


@dataclass
class MergedLine:
    """One log line as shown: the first copy's time, severity and kind, and every rank that printed it."""

    t: float
    severity: str
    kind: str
    text: str
    """The first copy's text (its own rank tag), kept as it came."""
    ranks: dict[str, set[int]] = field(default_factory=dict)
    copies: int = 1
    _head: tuple[str, str] | None = None
    """(timestamp, message) of a rank-tagged line: what another rank's copy must match."""
    _tags_seen: set[tuple[tuple[str, int], ...]] = field(default_factory=set)

    @property
    def shown(self) -> str:
        """The text with the rank tag replaced by the rank set once a second rank's copy joined."""
        if self.copies == 1 or self._head is None:
            return self.text
        ts, message = self._head
        return f"[{ts} {rank_set(self.ranks)}] {message}"


class RankMerger:
    """Folds each rank's copy of a line into the line already seen, as lines arrive.

    :meth:`add` returns the new :class:`MergedLine`, or None when the line joined an earlier one (whose
    ``shown`` text now names one more rank).  A copy joins only a line with the same kind, timestamp
    text and message, within ``window_s`` and the last ``lookback`` lines, that no rank of its own tag
    already printed (the same rank printing a line twice is two events).  The look-back is a short
    ring, indexed by (kind, timestamp, message), so a line costs O(1) however long the log.
    """

    def __init__(self, window_s: float = MERGE_WINDOW_S, lookback: int = MERGE_LOOKBACK) -> None:
        self.window_s = window_s
        self._recent: deque[MergedLine] = deque(maxlen=lookback)
        self._by_head: dict[tuple[str, str, str], list[MergedLine]] = {}
        """(kind, timestamp, message) -> the lines of ``_recent`` with it, oldest first (a 100x replay
        brings 50,000 lines/s: a scan of the look-back for each cost 20 µs a line)."""
        self.last_joined: MergedLine | None = None
        """The line the last copy joined (:meth:`add` returned None): a holder of its text updates it."""

    def add(self, t: float, severity: str, kind: str, text: str) -> MergedLine | None:
        split = split_rank(text)
        if split is not None:
            ts, tags, message = split
            key = tuple(tags.items())
            for seen in reversed(self._by_head.get((kind, ts, message), ())):
                if abs(t - seen.t) <= self.window_s and key not in seen._tags_seen:
                    for name, n in tags.items():
                        seen.ranks.setdefault(name, set()).add(n)
                    seen._tags_seen.add(key)
                    seen.copies += 1
                    self.last_joined = seen
                    return None
        line = MergedLine(t, severity, kind, text)
        if split is not None:
            ts, tags, message = split
            line._head = (ts, message)
            line.ranks = {name: {n} for name, n in tags.items()}
            line._tags_seen = {tuple(tags.items())}
            self._by_head.setdefault((kind, ts, message), []).append(line)
        if len(self._recent) == self._recent.maxlen:
            self._forget(self._recent[0])
        self._recent.append(line)
        return line

    def _forget(self, oldest: MergedLine) -> None:
        """``oldest`` leaves the look-back: out of the index too (it is the first of its head's lines)."""
        if oldest._head is None:
            return
        head = (oldest.kind, *oldest._head)
        same = self._by_head.get(head)
        if same and same[0] is oldest:
            del same[0]
            if not same:
                del self._by_head[head]

    def reset(self) -> None:
        self._recent.clear()
        self._by_head.clear()
        self.last_joined = None


def merge_ranks(lines: Iterable[tuple[float, str, str, str]], *, hide_polling: bool = True) -> list[MergedLine]:
    """(t, severity, kind, text) rows in time order -> what an operator reads: each line once, no polling."""
    merger = RankMerger()
    out: list[MergedLine] = []
    for t, severity, kind, text in lines:
        if hide_polling and is_own_polling(kind, text):
            continue
        line = merger.add(t, severity, kind, text)
        if line is not None:
            out.append(line)
    return out
