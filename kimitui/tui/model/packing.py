"""Request results held small: chunk offsets as int32 steps, figures as bare tuples.

A sweep's stragglers keep their chunk times and the compare view keeps every request's figures;
held as pydantic models they were most of the cockpit's memory (issue 30), so they are packed here
and rebuilt on demand exactly as a recording would give them back.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import TypeAlias

from kimitui.events import RequestResult


def pack_offsets(offsets: list[float] | None) -> array[int] | list[float] | None:
    """Chunk offsets as int32 0.1 ms steps (4 bytes each, not a 32-byte float): what a recording keeps.

    Floored to the step exactly as a recording writes them (``RequestResult`` format 2), so
    ``unpack_offsets`` gives what a replay of the recording would.  Offsets that do not fit
    (not finite, beyond int32's 59 hours) stay the float list.
    """
    if offsets is None:
        return None
    per_ms = RequestResult.OFFSET_STEPS_PER_MS
    steps = array("i")
    for o in offsets:
        if not -2e8 < o < 2e8:
            return list(offsets)
        k = math.floor(o * per_ms)
        if (k + 1) / per_ms <= o:
            k += 1
        elif k / per_ms > o:
            k -= 1
        steps.append(k)
    return steps


def unpack_offsets(packed: array[int] | list[float] | None) -> list[float] | None:
    if packed is None or isinstance(packed, list):
        return packed
    per_ms = RequestResult.OFFSET_STEPS_PER_MS
    return [k / per_ms for k in packed]


def strip_chunks(ev: RequestResult) -> RequestResult:
    """The result's figures without its per-chunk lists (what the spread and the compare view read)."""
    if ev.chunk_offsets_ms is None and ev.chunk_tokens is None:
        return ev
    return ev.model_copy(update={"chunk_offsets_ms": None, "chunk_tokens": None})


@dataclass
class KeptResult:
    """A request result held compactly: its figures without the per-chunk lists, and those packed."""

    figures: RequestResult
    offsets: array[int] | list[float] | None
    chunk_tokens: array[int] | None

    @classmethod
    def of(cls, ev: RequestResult) -> "KeptResult":
        toks = array("i", ev.chunk_tokens) if ev.chunk_tokens is not None else None
        return cls(strip_chunks(ev), pack_offsets(ev.chunk_offsets_ms), toks)

    def result(self) -> RequestResult:
        """The request result again, its offsets to the recording's 0.1 ms."""
        return self.figures.model_copy(update={
            "chunk_offsets_ms": unpack_offsets(self.offsets),
            "chunk_tokens": list(self.chunk_tokens) if self.chunk_tokens is not None else None})


_RESULT_FIELDS = tuple(f for f in RequestResult.model_fields if f not in ("chunk_offsets_ms", "chunk_tokens"))

PackedFigures: TypeAlias = tuple[object, ...]
"""A request result's figures in ``_RESULT_FIELDS`` order."""


def pack_figures(ev: RequestResult) -> PackedFigures:
    """A request result's figures as a bare tuple (about a third of a model's bytes): what compare reads."""
    return tuple(getattr(ev, f) for f in _RESULT_FIELDS)


def unpack_figures(values: PackedFigures) -> RequestResult:
    return RequestResult.model_construct(None, **dict(zip(_RESULT_FIELDS, values)))
