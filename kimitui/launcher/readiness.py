"""Readiness from the server's own log: progress steps, and the lines that mean failure.

SGLang prints its start-up in order (reference/sglang.md §1.4): weights, KV
cache, CUDA graph capture (bs i of N), uvicorn, "The server is fired up and
ready to roll!".  The shared parser (:mod:`kimitui.sglang.log`) turns
each line into a step; this module turns steps into monotonic progress and
decides which error lines end a start (OOM, scheduler exception, watchdog...).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from kimitui.sglang.log import MAX_LINE_CHARS, Parsed, StartupFields, fields_if, parse_line, split_glued
from kimitui.sglang.log.kinds import ProblemName, StartupStep

PHASES: tuple[str, ...] = (
    "stop",
    "start",
    "weights",
    "kv_cache",
    "cuda_graph",
    "uvicorn",
    "ready",
    "health",
    "warmup",
    "serving",
)
"""A swap's phases, in order; progress never moves backwards through them."""

_LOG_PHASES: tuple[StartupStep, ...] = ("weights", "kv_cache", "cuda_graph", "uvicorn", "ready")

FATAL_ERRORS: frozenset[ProblemName] = frozenset(
    {
        "oom",
        "watchdog",
        "scheduler_exception",
        "sigquit",
        "subprocess_crash",
        "nccl",
        "cuda_graph_capture",
        "traceback",
        "p2p",
    }
)
"""Error kinds that end a start: the server will not become ready after one of them."""

_SPECIFICITY: tuple[ProblemName, ...] = ("oom", "cuda_graph_capture", "watchdog", "nccl", "p2p", "subprocess_crash",
                "scheduler_exception", "sigquit", "traceback")
"""Most telling first: an OOM inside a scheduler exception is reported as the OOM."""

PHASE_LABELS = {
    "stop": "stopping the running server",
    "start": "starting",
    "weights": "loading weights",
    "kv_cache": "KV cache allocated",
    "cuda_graph": "capturing CUDA graphs",
    "uvicorn": "HTTP server up",
    "ready": "fired up and ready to roll",
    "health": "/health",
    "warmup": "warm-up request",
    "serving": "serving",
}

MAX_FATAL_LINES = 20
"""Fatal lines kept for the failure message (the first ones say what happened)."""


@dataclass(frozen=True)
class Step:
    """One progress update: a phase, how far within it (0..1 or None), a message."""

    phase: str
    fraction: float | None
    message: str


@dataclass
class Readiness:
    """Feed log lines; read progress steps, readiness and the first fatal error."""

    phase_index: int = PHASES.index("start")
    fraction: float | None = None
    ready: bool = False
    fatal_kinds: list[str] = field(default_factory=list)
    fatal_lines: list[str] = field(default_factory=list)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=30))
    around_fatal: list[str] = field(default_factory=list)
    """The log in order around the first fatal line: 3 lines before it, it, and up to 25 after."""
    _after_left: int = 0
    tracebacks: dict[str, str] = field(default_factory=dict)
    """A fatal ``... Traceback (most recent call last):`` line -> the exception line that ended its traceback
    (a real one runs ~100 lines through torch's frames: far past what ``around_fatal`` keeps)."""
    _open_traceback: str | None = None

    def feed(self, raw: str) -> Step | None:
        """One physical line; returns a progress step when it moves progress forward.

        A log line glued onto a tqdm bar (stdout and stderr sharing one file)
        is split first, so "ready to roll" after a capture bar is not missed.
        """
        step = None
        for line in split_glued(raw):
            step = self._feed_line(line) or step
        return step

    def _feed_line(self, raw: str) -> Step | None:
        parsed = parse_line(raw)
        raw = raw[:MAX_LINE_CHARS]  # kept for messages: at most the parser's line cap, never 1 MiB whole
        fatal = self._is_fatal(parsed)
        if fatal and not self.fatal_kinds:
            self.around_fatal = [line for line in list(self.recent)[-3:] if line.strip()]
            self._after_left = 26
        self._follow_traceback(raw)
        if fatal and "Traceback (most recent call last)" in raw and len(self.fatal_lines) < MAX_FATAL_LINES:
            self._open_traceback = raw
        self.recent.append(raw)
        if self._after_left > 0 and raw.strip() and raw not in self.around_fatal:
            self.around_fatal.append(raw)
            self._after_left -= 1
        if fatal:
            if len(self.fatal_lines) < MAX_FATAL_LINES:  # a crash loop must not grow this
                self.fatal_kinds.append(str(parsed.fields.get("error")))
                self.fatal_lines.append(raw)
            return None
        startup = fields_if(parsed, "startup")
        return None if startup is None else self._advance(startup)

    @property
    def fatal(self) -> str | None:
        """The error kind that ended this start (``oom``, ``watchdog``...): the most telling one seen."""
        if not self.fatal_kinds:
            return None
        return min(self.fatal_kinds, key=lambda k: _SPECIFICITY.index(k) if k in _SPECIFICITY else 99)

    def fatal_line(self) -> str:
        """The first line of the most telling kind."""
        kind = self.fatal
        for k, line in zip(self.fatal_kinds, self.fatal_lines):
            if k == kind:
                return line
        return ""

    def fatal_quote(self) -> str:
        """The line to quote for the failure: for "... Traceback (most recent call last):" the exception
        line that ends that traceback (``safetensors_rust.SafetensorError: ...``), else the fatal line."""
        line = self.fatal_line()
        if "Traceback (most recent call last)" not in line:
            return line.strip()
        if line in self.tracebacks:
            return self.tracebacks[line]
        for lines in (self.around_fatal, list(self.recent)):
            if line in lines:
                found = exception_line(lines[lines.index(line) + 1:])
                if found:
                    return found
        return line.strip()

    def _follow_traceback(self, raw: str) -> None:
        """Inside a fatal line's traceback: its exception line, until the next log record ends it."""
        if self._open_traceback is None:
            return
        text = raw.rsplit("\r", 1)[-1].strip()
        if _TIMESTAMPED.match(text):
            self._open_traceback = None
        elif _EXCEPTION.match(text):
            self.tracebacks[self._open_traceback] = text

    @staticmethod
    def _is_fatal(parsed: Parsed) -> bool:
        problem = fields_if(parsed, "error")
        return (
            problem is not None
            and parsed.severity in ("error", "critical")
            and problem.get("error") in FATAL_ERRORS
        )

    def _advance(self, fields: StartupFields) -> Step | None:
        step = fields.get("step")
        if step is None or step not in _LOG_PHASES:
            return None
        index = PHASES.index(step)
        fraction = _fraction(step, fields)
        if index < self.phase_index:
            return None
        if index == self.phase_index and (fraction is None or (self.fraction or 0.0) >= fraction):
            return None
        self.phase_index, self.fraction = index, fraction
        if step == "ready":
            self.ready = True
        return Step(step, fraction, _message(step, fields))


# "ValueError: ...", "torch.OutOfMemoryError: ...", "KeyboardInterrupt", and a bare "Exception: ..." (0.5.18)
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|Exception)\b(?::.*)?$")
_TIMESTAMPED = re.compile(r"^\[\d{4}-\d\d-\d\d")


def exception_line(after: list[str]) -> str:
    """The last ``Name: message`` line of the traceback that ``after`` continues ("" if none)."""
    found = ""
    for raw in after[:80]:
        text = raw.rsplit("\r", 1)[-1].strip()
        if found and _TIMESTAMPED.match(text):
            break  # the next log record: the traceback has ended
        if _EXCEPTION.match(text):
            found = text
    return found


def _fraction(step: StartupStep, fields: StartupFields) -> float | None:
    if step == "ready":
        return 1.0
    progress = fields.get("progress")
    if isinstance(progress, (int, float)):
        return max(0.0, min(1.0, float(progress)))
    if fields.get("phase") == "begin":
        return 0.0
    if fields.get("phase") == "end":
        return 1.0
    return None


def _message(step: StartupStep, fields: StartupFields) -> str:
    label = PHASE_LABELS[step]
    if fields.get("i") is not None and fields.get("n"):
        return f"{label}: {fields['i']} of {fields['n']}"
    return label
