"""What went wrong: crashes, tracebacks, OOM, watchdogs, NCCL, retractions, deprecations, warnings.

Each becomes an ``error`` or ``warning`` line (a PD server's failed KV transfer too) whose ``error`` names it
(:data:`~kimitui.sglang.log.kinds.ProblemName`), with the details its kind has.  A traceback's
last line names its exception: ``RuntimeError: ...`` and also a bare ``Exception: ...`` (the real
0.5.18 server's expert-recorder crash).
"""

from __future__ import annotations

import re
from typing import Literal

from kimitui.events import LogSeverity
from kimitui.sglang.log.kinds import ProblemName
from kimitui.sglang.log.values import Fields, as_float, as_int

ProblemKind = Literal["error", "warning"]

# (substring, kind, severity, error) in priority order; the first match wins.
_PROBLEMS: tuple[tuple[str, ProblemKind, LogSeverity, ProblemName], ...] = (
    ("Scheduler hit an exception", "error", "error", "scheduler_exception"),
    ("Received sigquit", "error", "critical", "sigquit"),
    ("SIGQUIT received", "error", "critical", "sigquit"),
    ("crashed with exit code", "error", "critical", "subprocess_crash"),
    ("Watchdog caught collective operation timeout", "error", "critical", "nccl"),
    ("atchdog timeout", "error", "critical", "watchdog"),
    ("NCCL error", "error", "error", "nccl"),
    ("DistBackendError", "error", "error", "nccl"),
    ("ProcessGroupNCCL", "error", "error", "nccl"),
    ("Capture cuda graph failed", "error", "error", "cuda_graph_capture"),
    ("out of memory", "error", "error", "oom"),
    ("OutOfMemoryError", "error", "error", "oom"),
    ("Not enough memory", "error", "error", "oom"),
    ("runs out of memory", "error", "error", "oom"),
    ("KV cache pool is full", "warning", "warning", "kv_retract"),
    ("Health check failed", "error", "error", "health_check"),
    ("peer access is not supported", "error", "error", "p2p"),
    ("Traceback (most recent call last)", "error", "error", "traceback"),
    ("CustomAllreduce is disabled", "warning", "warning", "custom_allreduce"),
    ("Setup Custom allreduce failed", "warning", "warning", "custom_allreduce"),
    ("memory capacity is unbalanced", "warning", "warning", "memory_unbalanced"),
    ("is deprecated", "warning", "warning", "deprecated"),
    ("Cache not flushed", "warning", "warning", "cache_not_flushed"),
    ("transfer failed for request", "error", "error", "kv_transfer"),
    ("UserWarning", "warning", "warning", "user_warning"),
)

_PY_WARNING = re.compile(r"^\S+:\d+: ([A-Z]\w*Warning): ")  # warnings.showwarning: "file.py:61: FutureWarning: ..."
# "ValueError: ...", "torch.OutOfMemoryError: ...", a bare "AssertionError", and plain "Exception: ..."
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Warning)|Exception)(?::|$)")
_RETRACT = re.compile(
    r"#retracted_reqs: (\d+), #new_tokens_gained: (\d+), #new_token_ratio: (\d+(?:\.\d+)?) -> (\d+(?:\.\d+)?)"
)
# Was r"(\w+)? ?[Ww]atchdog timeout \(...": the leading "(\w+)?" restarted at every character of a
# long word (a 20 KB line took 15 s).  Now: str.find the literal, match the tail, walk back for the word.
_WATCHDOG_NEEDLE = "atchdog timeout ("
_WATCHDOG_TAIL = re.compile(r"(?:self\.)?watchdog_timeout=(\d+(?:\.\d+)?)")
_SUBPROC = re.compile(r"Subprocess (\S+) \(pid=(\d+)\) crashed with exit code (-?\d+)")
_OOM_ALLOC = re.compile(r"Tried to allocate (\d+(?:\.\d+)?) ?(MiB|GiB|tokens)?")
_NCCL_TIMEOUT = re.compile(r"Timeout\(ms\)=(\d+)")
# PD (0.5.23 disaggregation/prefill.py, decode.py): "Prefill transfer failed for request rank=0 req.rid='…'
# req.bootstrap_room=12 with exception KVTransferError(bootstrap_room=12): …", "Decode transfer failed …"
_TRANSFER_NEEDLE = " transfer failed for request"
_TRANSFER_TAIL = re.compile(r"bootstrap_room=(\d+) with exception (\w+)")


_LONG_MSG = 2048
"""Past this many characters a message is searched for each needle by a compiled literal, not ``in`` (issue 33)."""
_SEARCHES = tuple((re.compile(re.escape(p[0])).search, p) for p in _PROBLEMS)
"""The needles as regex literal searches: on a long run of the letters a needle holds (``e e e ...``) CPython's
``in`` steps a character at a time, ~40 us per needle on 16 KB (25 needles: 1 ms); the regex engine's literal
search stays ~10 us.  On a short line ``in`` costs less (no call), so both are kept."""


def problem(msg: str, fields: Fields) -> tuple[ProblemKind, LogSeverity] | None:
    """(kind, severity) when ``msg`` says something went wrong, its details into ``fields``; else None."""
    if len(msg) <= _LONG_MSG:
        for needle, kind, severity, error in _PROBLEMS:
            if needle in msg:
                fields["error"] = error
                _problem_details(error, msg, fields)
                return kind, severity
    else:
        for search, (_, kind, severity, error) in _SEARCHES:
            if search(msg):
                fields["error"] = error
                _problem_details(error, msg, fields)
                return kind, severity
    if "Error" in msg or "Exception" in msg or "Warning" in msg:
        # the last line of a traceback, or a Python warning: "ValueError: tp_size 8 must be ..."
        m = _EXCEPTION.match(msg) or _PY_WARNING.match(msg)
        if m:
            name = m.group(1)
            fields["exception"] = name
            if name.endswith("Warning"):
                fields["error"] = "python_warning"
                return "warning", "warning"
            fields["error"] = "exception"
            return "error", "error"
    return None


def _problem_details(error: ProblemName, msg: str, fields: Fields) -> None:
    if error == "kv_retract":
        m = _RETRACT.search(msg)
        if m:
            fields["retracted_reqs"] = as_int(m.group(1))
            fields["new_tokens_gained"] = as_int(m.group(2))
            fields["new_token_ratio_from"] = as_float(m.group(3))
            fields["new_token_ratio_to"] = as_float(m.group(4))
    elif error == "watchdog":
        found = _watchdog(msg)
        if found:
            fields["component"] = found[0] or "Scheduler"
            fields["timeout_s"] = as_float(found[1])
    elif error == "subprocess_crash":
        m = _SUBPROC.search(msg)
        if m:
            fields.update(process=m.group(1), pid=as_int(m.group(2)), exit_code=as_int(m.group(3)))
    elif error == "oom":
        m = _OOM_ALLOC.search(msg)
        if m:
            fields["tried_alloc"] = as_float(m.group(1))
            fields["tried_alloc_unit"] = m.group(2) or ""
        fields["phase"] = "prefill" if "Prefill out of" in msg else "decode" if "Decode out of" in msg else None
    elif error == "kv_transfer":
        at = msg.find(_TRANSFER_NEEDLE)  # one start, so linear however often a line repeats the phrase
        side = msg[max(0, at - 8):at].split()[-1:] if at > 0 else []
        if side and side[0] in ("Prefill", "Decode"):
            fields["side"] = side[0].lower()
        m = _TRANSFER_TAIL.search(msg, at + len(_TRANSFER_NEEDLE))
        if m:
            fields.update(bootstrap_room=as_int(m.group(1)), exception=m.group(2))
    elif error == "nccl":
        m = _NCCL_TIMEOUT.search(msg)
        if m:
            ms = as_float(m.group(1))
            if isinstance(ms, float):
                fields["timeout_s"] = ms / 1000.0


def _watchdog(msg: str) -> tuple[str | None, str] | None:
    """(component word or None, timeout text) of the first ``[Ww]atchdog timeout (...watchdog_timeout=N``.

    What ``(\\w+)? ?[Ww]atchdog timeout \\((?:self\\.)?watchdog_timeout=(N)`` found, in linear time: the
    component is the run of word characters right before the ``W`` (or before one space before it).
    """
    i = msg.find(_WATCHDOG_NEEDLE, 1)
    while i > 0:
        w = i - 1
        if msg[w] in "Ww":
            m = _WATCHDOG_TAIL.match(msg, i + len(_WATCHDOG_NEEDLE))
            if m:
                end = w - 1 if w >= 1 and msg[w - 1] == " " else w
                start = end
                while start > 0 and (msg[start - 1].isalnum() or msg[start - 1] == "_"):
                    start -= 1
                return (msg[start:end] or None), m.group(1)
        i = msg.find(_WATCHDOG_NEEDLE, i + 1)
    return None
