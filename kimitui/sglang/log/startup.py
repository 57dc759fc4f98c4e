"""Bringing the server up: ``server_args=``, distributed init, weights, KV cache, CUDA graphs, the
token budget, ``Engine startup timings``, uvicorn, and readiness (``The server is fired up and ready
to roll!``): each a ``step`` of :class:`~kimitui.sglang.log.kinds.StartupFields`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kimitui.sglang.log.values import Fields, as_float, as_int, elapsed, finder, gb_fields, kv_pairs, ratio, value

READY_TEXT = "fired up and ready to roll"
"""Readiness: ``The server is fired up and ready to roll!`` (every version kimitui has seen, 0.5.18 included)."""

_CAPTURING = re.compile(
    r"Capturing (batches|num tokens) \((?:bs|num_tokens)=(\d+) avail_mem=(\d+(?:\.\d+)?) GB\):\s*(\d+)%\|[^|]*\|\s*(\d+)/(\d+)"
)
# "(?:Loading|loading) [^:]*shards:" rescanned from every "loading "; now: find "shards:", look back.
_SHARDS = re.compile(r"shards:\s*(\d+)% Completed \|\s*(\d+)/(\d+)")
_LOADING = re.compile(r"[Ll]oading ")
_KV_ALLOC = re.compile(r"KV Cache is allocated\. dtype: (\S+), #tokens: (\d+)")
_CAPTURE_BEGIN_END = re.compile(r"Capture (.+?) (begin|end)\.")
_GRAPH_BS = re.compile(r"Capture cuda graph bs \[([\d, ]*)\]")
_UVICORN_URL = re.compile(r"Uvicorn running on (\S+)")
_PID = re.compile(r"\[(\d+)\]")
_WEIGHT_TYPE = re.compile(r"type=([\w.]+)")
_QUANT = re.compile(r"quant=(\w+)")
# a name starts at a word's start (the lookbehind): restarting inside a long word would be quadratic; possessive
# (``\w++``): a word not followed by "=" is given up at once, not retried one character shorter each time
_TIMING = re.compile(r"(?<!\w)(\w++)=(\d+(?:\.\d+)?)(?=[,}\s]|$)")
_TIMING_GROUP = re.compile(r"(?<!\w)(\w++)=\{([^{}]*)\}")


def startup(msg: str, fields: Fields) -> bool:
    """Startup steps; True when ``msg`` was one."""
    has = finder(msg)
    if has("Capturing ") and _capturing(msg, fields):
        return True
    if has("Load weight "):
        return _weights(msg, fields)
    if has("shards:"):
        m = _shards(msg)
        if m:
            i, n = as_int(m.group(2)), as_int(m.group(3))
            fields.update(step="weights", phase="progress", i=i, n=n, progress=ratio(i, n))
            return True
    if has("KV Cache is allocated"):
        fields.update(step="kv_cache", phase="end")
        m = _KV_ALLOC.search(msg)
        if m:
            fields["dtype"] = m.group(1)
            fields["kv_tokens"] = as_int(m.group(2))
        gb_fields(msg, fields)
        return True
    if msg.startswith("Capture ") and (has(" begin.") or has(" end.")) and _capture_begin_end(msg, fields):
        return True
    if msg.startswith("Capture cuda graph bs"):
        m = _GRAPH_BS.search(msg)
        sizes = [as_int(x) for x in m.group(1).replace(",", " ").split()] if m else []
        fields.update(step="cuda_graph", phase="plan", batch_sizes=sizes, n=len(sizes))
        return True
    if has("max_total_num_tokens="):
        fields.update(step="max_tokens")
        kv_pairs(msg, fields)
        for key in ("available_gpu_mem", "available_cpu_mem"):
            if isinstance(fields.get(key), str):
                fields[key] = value(fields[key])
        return True
    if has(READY_TEXT):
        fields.update(step="ready", progress=1.0)
        return True
    if msg.startswith("server_args=") or has("server_args=ServerArgs("):
        fields.update(step="args", args=_server_args(msg))
        return True
    return _later_steps(msg, fields)


def _later_steps(msg: str, fields: Fields) -> bool:
    """Distributed init, the memory pool, the startup timings and uvicorn's lines."""
    has = finder(msg)
    if has("Init torch distributed"):
        fields.update(step="dist_init", phase="begin" if has("begin") else "end")
        elapsed(msg, fields)
        gb_fields(msg, fields)
        return True
    if msg.startswith("Memory pool end") or has("Max concurrent requests"):
        fields.update(step="kv_cache", phase="pool")
        gb_fields(msg, fields)
        if has("max_num_reqs="):
            kv_pairs(msg.partition("capacity:")[2], fields)
        return True
    if msg.startswith("Engine startup timings"):
        fields.update(step="timings", timings=_timings(msg.partition(":")[2]))
        return True
    if has("Uvicorn running on"):
        m = _UVICORN_URL.search(msg)
        fields.update(step="uvicorn", phase="listening", url=m.group(1) if m else None)
        return True
    if msg.startswith("Started server process"):
        m = _PID.search(msg)
        fields.update(step="uvicorn", phase="process", pid=as_int(m.group(1)) if m else None)
        return True
    if msg.startswith("Waiting for application startup") or msg.startswith("Application startup complete"):
        fields.update(step="uvicorn", phase="startup")
        return True
    return False


def _weights(msg: str, fields: Fields) -> bool:
    """``Load weight begin.`` / ``Load weight end. elapsed=..., type=..., avail mem=...``."""
    has = finder(msg)
    if has("Load weight begin"):
        fields.update(step="weights", phase="begin", progress=0.0)
    elif has("Load weight end"):
        fields.update(step="weights", phase="end", progress=1.0)
        m = _WEIGHT_TYPE.search(msg)
        if m:
            fields["type"] = m.group(1)
        m = _QUANT.search(msg)
        if m:
            fields["quant"] = m.group(1)
    else:
        return False
    elapsed(msg, fields)
    gb_fields(msg, fields)
    return True


def _timings(text: str) -> dict[str, float]:
    """``load_weight=0.18, ..., cuda_graph={prefill=0.00, decode=0.00}, tokenizer_e2e=74.87`` (0.5.18) ->
    phase -> seconds, a group's phases as ``cuda_graph_prefill``."""
    out: dict[str, float] = {}
    if "{" in text:  # else there is no group to find or cut: two passes saved on a long line
        for group, inner in _TIMING_GROUP.findall(text):
            for name, secs in _TIMING.findall(inner):
                if isinstance(f := as_float(secs), float):
                    out[f"{group}_{name}"] = f
        text = _TIMING_GROUP.sub("", text)
    for name, secs in _TIMING.findall(text):
        if isinstance(f := as_float(secs), float):
            out[name] = f
    return out


def _capturing(msg: str, fields: Fields) -> bool:
    """A CUDA-graph capture's progress bar line; True when it was one."""
    m = _CAPTURING.search(msg)
    if not m:
        return False
    i, n = as_int(m.group(5)), as_int(m.group(6))
    fields.update(step="cuda_graph", phase="progress", i=i, n=n, progress=ratio(i, n))
    fields["bs" if m.group(1) == "batches" else "num_tokens"] = as_int(m.group(2))
    fields["avail_mem_gb"] = as_float(m.group(3))
    if m.group(1) != "batches":
        fields["graph"] = "piecewise"
    return True


@dataclass(frozen=True)
class CaptureProgress:
    """Where a CUDA-graph capture's tqdm bar stands: ``done`` of ``total`` graphs, the last one's size.

    SGLang redraws the bar with ``\\r`` and no timestamp, once per graph (52 for ``cuda_graph_max_bs``
    512): the log folds them into one line that each redraw updates (a start's progress reads the same
    figures as a ``startup`` line's ``i``/``n``)."""

    done: int
    total: int
    size: int
    """The batch size (``bs=``) or, for a piecewise graph, the token count (``num_tokens=``)."""
    what: str
    """``batches`` (the decode graphs) or ``num tokens`` (piecewise graphs)."""

    def folded(self) -> str:
        """``Capturing batches 37/52 (bs=64)``: one line that a redraw updates in place."""
        unit = "bs" if self.what == "batches" else "num_tokens"
        return f"Capturing {self.what} {self.done}/{self.total} ({unit}={self.size})"


def capture_progress(text: str) -> CaptureProgress | None:
    """A capture bar's last redraw in ``text`` (a line may hold many, ``\\r`` between), else None."""
    if "Capturing " not in text:
        return None
    last = None
    for last in _CAPTURING.finditer(text[-4096:]):  # the last redraw is all that counts; bounded work
        pass
    if last is None:
        return None
    return CaptureProgress(done=int(last.group(5)), total=int(last.group(6)), size=int(last.group(2)),
                           what=last.group(1))


def _capture_begin_end(msg: str, fields: Fields) -> bool:
    """``Capture <which> cuda graph begin./end.``; True when it was one."""
    m = _CAPTURE_BEGIN_END.match(msg)  # match, not search: each "Capture " re-scanned the rest
    if not m:
        return False
    what = m.group(1).lower()  # "cuda graph", "piecewise cuda graph", "draft extend cuda graph"...
    fields.update(step="cuda_graph", phase=m.group(2))
    fields["progress"] = 0.0 if m.group(2) == "begin" else 1.0
    fields["graph"] = "piecewise" if "piecewise" in what else "draft" if "draft" in what else "main"
    fields["graph_backend"] = what.split("graph")[0].split()[-1] if "graph" in what else what
    elapsed(msg, fields)
    gb_fields(msg, fields)
    return True


def shards_bar(text: str) -> str | None:
    """Which bar a ``Loading ... shards: N% Completed | i/n`` redraw belongs to (the text before
    ``shards:``), else None: the log folds a bar's redraws into one line, as it does a capture's."""
    if "shards:" not in text:
        return None
    m = _shards(text)
    return text[: m.start()].rstrip() if m is not None else None


def _shards(msg: str) -> re.Match[str] | None:
    """The first ``shards: N% Completed | i/n`` preceded by ``Loading``/``loading `` with no ``:`` between.

    Linear: each candidate looks back only to the previous ``:``, which is at most the previous ``shards:``.
    """
    for m in _SHARDS.finditer(msg):
        head = msg[msg.rfind(":", 0, m.start()) + 1 : m.start()]
        if _LOADING.search(head):
            return m
    return None


# a quoted value as "a run, then (escape, run)*": the same strings as "(?:[^'\\]|\\.)*", without a branch per character
_ARG = re.compile(r"[(,] ?(\w+)=('[^'\\]*(?:\\.[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\""
                  r"|-?\d+(?:\.\d+)?(?:e-?\d+)?|True|False|None)(?=[,)])")


def _server_args(msg: str) -> dict[str, Any]:
    """The simple (str/number/bool/None) values of a ``server_args=ServerArgs(...)`` dump."""
    out: dict[str, Any] = {}
    for key, val in _ARG.findall(msg):
        if val[0] in "'\"":
            out[key] = val[1:-1]
        elif val == "None":
            out[key] = None
        else:
            out[key] = value(val)
    return out
