"""SGLang's server log: its grammar, split by line family, and the kinds and fields it yields.

The families, one module each:

- :mod:`~kimitui.sglang.log.prefix`: ``[time RANKS]``, journald and custom prefixes, uvicorn levels;
  tqdm redraws and lines glued together (:func:`split_glued`);
- :mod:`~kimitui.sglang.log.batch`: ``Decode batch`` / ``Prefill batch`` figures (speculative, PD, MFU);
- :mod:`~kimitui.sglang.log.startup`: bring-up steps, ``Engine startup timings`` and readiness;
- :mod:`~kimitui.sglang.log.eplb`: ``[EPLBManager]`` and ``[Expert Balancedness]``;
- :mod:`~kimitui.sglang.log.problems`: crashes, tracebacks, OOM, watchdogs, deprecations, warnings;
- :mod:`~kimitui.sglang.log.secrets`: secret values written as ``***`` before a line leaves the parser;
- :mod:`~kimitui.sglang.log.parse`: the dispatch (:func:`parse_line`, :func:`to_event`);
- :mod:`~kimitui.sglang.log.stats`: a line's figures as ``ServerStats`` (:func:`to_stats`);
- :mod:`~kimitui.sglang.log.kinds`: the contract: :data:`LineKind` and a ``TypedDict`` per kind.

Consumers read a line through :func:`is_kind` and :func:`fields_if`, so mypy checks the kind
and field names they use.
"""

from kimitui.sglang.log.kinds import (
    AccessFields,
    DecodeFields,
    EplbFields,
    LineFields,
    LineKind,
    LogLineLike,
    PrefillFields,
    ProblemFields,
    StartupFields,
    fields_if,
    is_kind,
    kind_is,
    line_fields,
    problem_fields,
)
from kimitui.sglang.log.parse import MAX_LINE_CHARS, Parsed, parse_line, to_event
from kimitui.sglang.log.prefix import split_glued
from kimitui.sglang.log.secrets import UNREDACTABLE, redact_secrets
from kimitui.sglang.log.startup import CaptureProgress, capture_progress, shards_bar
from kimitui.sglang.log.stats import to_stats

__all__ = [
    "MAX_LINE_CHARS", "UNREDACTABLE", "AccessFields", "CaptureProgress", "DecodeFields", "EplbFields", "LineFields", "LineKind",
    "LogLineLike", "Parsed", "PrefillFields", "ProblemFields", "StartupFields", "capture_progress", "fields_if", "is_kind", "kind_is", "shards_bar",
    "line_fields", "parse_line", "problem_fields", "redact_secrets", "split_glued", "to_event", "to_stats",
]
