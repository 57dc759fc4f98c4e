"""Prometheus text read fast where it is plain, by prometheus_client's own parser where it is not.

A scrape is parsed every second per host, and prometheus_client's parser reads each label value a character
at a time: ~25 us a sample on SGLang's long label sets, 6 ms a scrape, half the idle cockpit's CPU at 8 hosts
(issue 33, ``bench/bench_fleet_cpu.py``).  Most of that reads labels nobody asks for: kimitui sums a family
over its label sets and reads a label in two families only.  So a sample here is its name and value, read
by one split, and its labels are parsed when first asked for.

The families are grouped exactly as the library groups them (the same state machine over ``# HELP`` and
``# TYPE``, the same counter munging), and any text this reader is not sure of is handed to the library
whole: a backslash anywhere (an escape in a label or a help text), a quoted metric name (the UTF-8 form),
a sample line that is not ``name value`` or ``name{labels} value``.  ``tests/test_prom_text.py`` holds it
to the library on real SGLang scrapes, the simulator's, vLLM's and fuzzed text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.metrics_core import METRIC_TYPES
from prometheus_client.parser import text_string_to_metric_families

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"\s*(?:,\s*|\Z)')
_LABELS = re.compile(r'(?:\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"[^"]*"\s*(?:,\s*|\Z))*\s*\Z')
"""A whole label set this reader is sure of: checked at once (one C-speed match), taken apart when asked."""
_ALLOWED_SUFFIXES = {"counter": ("",), "gauge": ("",), "summary": ("_count", "_sum", ""),
                     "histogram": ("_count", "_sum", "_bucket")}


class SampleLike(Protocol):
    """What kimitui reads of a sample: this reader's :class:`Sample` or the library's."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> float: ...

    @property
    def labels(self) -> dict[str, str]: ...


class FamilyLike(Protocol):
    """What kimitui reads of a family: this reader's :class:`Family` or the library's ``Metric``."""

    @property
    def name(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def samples(self) -> Sequence[SampleLike]: ...


class _Unsure(Exception):
    """This reader is not sure of the text: the library reads it."""


@dataclass(slots=True)
class Sample:
    """One sample: its labels parsed on first use (most are summed over, never read)."""

    name: str
    value: float
    raw_labels: str
    _labels: dict[str, str] | None = None

    @property
    def labels(self) -> dict[str, str]:
        if self._labels is None:
            self._labels = _parse_labels(self.raw_labels)
        return self._labels


@dataclass(slots=True)
class Family:
    name: str
    type: str
    samples: list[Sample] = field(default_factory=list)


def families(text: str) -> Iterator[FamilyLike]:
    """The text's metric families, as ``text_string_to_metric_families`` gives them (name, type, samples with
    name, labels and a float value); the library's own where this reader is not sure of the text."""
    if "\\" in text:
        yield from text_string_to_metric_families(text)
        return
    try:
        plain = list(_families(text))
    except _Unsure:
        yield from text_string_to_metric_families(text)
        return
    yield from plain


def _families(text: str) -> Iterator[Family]:
    name, typ = "", "untyped"
    samples: list[Sample] = []
    allowed: tuple[str, ...] = ()
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) < 3 or parts[1] not in ("TYPE", "HELP"):
                continue  # a comment (or a bare "#")
            candidate = parts[2]
            if not _NAME.match(candidate):
                raise _Unsure  # a quoted (UTF-8) name, or one the library refuses
            if parts[1] == "HELP":
                if candidate != name:
                    if name:
                        yield _built(name, typ, samples)
                    name, typ, samples, allowed = candidate, "untyped", [], (candidate,)
            else:
                if len(parts) < 4:
                    raise _Unsure
                if candidate != name:
                    if name:
                        yield _built(name, typ, samples)
                    name, samples = candidate, []
                typ = parts[3]
                allowed = tuple(name + suffix for suffix in _ALLOWED_SUFFIXES.get(typ, ("",)))
            continue
        sample = _sample(line)
        if sample.name in allowed:
            samples.append(sample)
            continue
        if name:
            yield _built(name, typ, samples)
        name, typ, samples, allowed = "", "untyped", [], ()
        yield _built(sample.name, "untyped", [sample])
    if name:
        yield _built(name, typ, samples)


def _built(name: str, typ: str, samples: list[Sample]) -> Family:
    """The library's munging: a family ``x_total`` is ``x``; a counter ``x``'s samples are ``x_total``; untyped is
    "unknown"; a type the library does not know is its refusal too."""
    typ = "unknown" if typ == "untyped" else typ
    if typ not in METRIC_TYPES:
        raise _Unsure
    if typ == "counter":
        if name.endswith("_total"):
            name = name[:-6]
        else:
            samples = [Sample(s.name + "_total", s.value, s.raw_labels) for s in samples]
    return Family(name, typ, samples)


def _sample(line: str) -> Sample:
    brace = line.find("{")
    if brace < 0:
        parts = line.split()
        if len(parts) not in (2, 3):
            raise _Unsure
        name, labels, rest = parts[0], "", parts[1]
    else:
        close = line.rfind("}")  # a label value may hold "}", but only numbers follow the closing one
        if close < brace:
            raise _Unsure
        name, labels = line[:brace], line[brace + 1 : close]
        if not _LABELS.match(labels) or "__name__" in labels:
            raise _Unsure
        after = line[close + 1 :].split()
        if len(after) not in (1, 2) or line[close + 1 : close + 2] not in (" ", "\t"):
            raise _Unsure
        rest = after[0]
    if not _NAME.match(name) or "_" in rest or "#" in line[len(name):]:  # "#": maybe an exemplar
        raise _Unsure
    try:
        value = float(rest)
    except ValueError:
        raise _Unsure from None
    return Sample(name, value, labels)


def _parse_labels(raw: str) -> dict[str, str]:
    """``a="x",b="y"`` -> {"a": "x", "b": "y"} (checked whole by ``_LABELS``; no backslash: text with one went to
    the library)."""
    return dict(_LABEL.findall(raw))
