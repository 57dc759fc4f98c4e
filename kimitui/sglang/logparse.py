"""SGLang server log lines -> typed fields.

One function, :func:`parse_line`, understands every line kind of SGLang's log
across versions (reference/sglang.md §1): v0.4 ``Decode batch.``, the 2025
trailing-comma forms, the 2026 forms, rank tags (DP PP ATTN_CP MOE_DP TP EP),
custom ``SGLANG_LOGGING_CONFIG_PATH`` prefixes, journald ``short-iso``
prefixes, ANSI colour and tqdm ``\\r`` updates.  It never raises: a line it
does not understand is ``plain`` and keeps its text.

Speed matters (a busy server logs thousands of lines per second and a replay
parses hours of them), so dispatch is on cheap substring checks and only then
on precompiled regexes.

``line_kind`` values and field names are a contract (UI, launcher, analyzers):

- ``decode``  {running_reqs, queued_reqs, num_tokens, token_usage, gen_throughput,
  cuda_graph, graph_backend, accept_len?, accept_rate?, cap_len?, block_accept_len?, iter?,
  PD decode: prealloc_usage?, prealloc_reqs?, transfer_reqs?, host_receive_reqs?, retracted_reqs?,
  MFU: est_tflops?, est_read_gbs?, est_write_gbs?, ...unknown keys}
- ``prefill`` {new_seq, new_token, cached_token, token_usage, running_reqs,
  queued_reqs, pending_token?, input_throughput?, cuda_graph?, ...}
- ``startup`` {step: args|dist_init|weights|kv_cache|cuda_graph|max_tokens|uvicorn|ready,
  phase: begin|progress|end?, progress: 0..1?, i?, n?, ...}
- ``access``  {client, method, path, status, http_version}
- ``eplb``    {phase: start|end|init|skipped|balancedness, duration_s? (end), utilization?, threshold?
  (skipped), forward_pass_id?, current_pass_balancedness?, last_N_average_balancedness?,
  gpu_physical_count_sum? (balancedness)}
- ``error`` / ``warning`` {error: oom|watchdog|nccl|kv_retract|scheduler_exception|
  sigquit|subprocess_crash|health_check|cuda_graph_capture|traceback|custom_allreduce|
  memory_unbalanced|deprecated|cache_not_flushed|p2p|logged, ...}
- ``plain``   {}

Every kind may also carry ``ts`` (the line's own timestamp text), ``rank``
(``"DP3_TP3_EP3"``, the same spelling as the scheduler's process title) and
``ranks`` ({"dp": 3, "tp": 3, "ep": 3}).

Secrets never leave the parser (issue 29): SGLang logs ``server_args=ServerArgs(... api_key='…',
admin_api_key='…', ssl_keyfile_password='…')`` at start, and a logged command line may carry ``--api-key
VALUE``.  :func:`redact_secrets` writes each secret-named setting's value as ``***`` (the names by
:func:`kimitui.knobs.is_secret`) and the line is parsed again, before it becomes the event's fields and ``raw``, so
recordings, the cockpit's log and reports only ever see ``***``.  It stays off the hot path: decode,
prefill and EPLB lines skip it, an access line is checked for ``=`` only, and a line with no ``=`` or
``--``, or naming no key, token, secret or password, is passed by substring checks alone, never a regex.

Bad input costs bounded time and never a line (issue 13): a line longer than
:data:`MAX_LINE_CHARS` is parsed (and kept in its :class:`LogLine`) as its first
``MAX_LINE_CHARS`` characters (a tqdm line: its last redraw) with
``truncated: true`` and ``raw_chars`` (the original length) in its fields; every
pattern is linear-time (no quantifier that can restart inside a run it already
scanned; watchdog and shard lines are found with ``str.find`` first).  A number
longer than :data:`_NUM_CHARS` characters, or one that is not finite (``inf``,
``nan``, ``1e999``), stays text; a body key that would overwrite one of the
line's own fields (``rank: 3`` next to a ``TP3`` prefix) is kept as ``field_rank``.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, Literal, NamedTuple

from kimitui.events import LogLine, LogSeverity, ServerStats
from kimitui.knobs import REDACTED, redact_line

Fields = dict[str, Any]
Value = bool | int | float | str
"""A value read from a log line: a number or a flag when it is one, else its text."""


Severity = LogSeverity
"""A line's severity, as :attr:`kimitui.events.LogLine.severity` takes it."""


class Parsed(NamedTuple):
    line_kind: str
    severity: Severity
    fields: Fields


MAX_LINE_CHARS = 16384
"""Longer lines are cut to this many characters and flagged ``truncated`` (SGLang's longest real
lines, ``server_args=ServerArgs(...)`` dumps, are ~6 KB)."""

_NUM_CHARS = 300
"""A digit run longer than this stays text: as a float it could overflow, as an int it is no figure."""

_RESERVED = frozenset({"ts", "rank", "ranks", "iter", "truncated", "raw_chars", "unparsed", "parse_error"})
"""Fields the parser sets from the line's prefix or about the line itself; a body key never overwrites one."""


def _int(text: str) -> int | str:
    """Digits (``\\d+``) -> int; an absurdly long run stays text."""
    return int(text) if len(text) <= _NUM_CHARS else text


def _float(text: str) -> float | str:
    """A finite float, else the text (``inf``/``nan``/``1e999`` would not survive JSON)."""
    if len(text) <= _NUM_CHARS:
        try:
            f = float(text)
        except ValueError:
            return text
        if math.isfinite(f):
            return f
    return text


def _ratio(i: object, n: object) -> float | None:
    """``i / n`` as progress (0..1) when both are sane counts, else None; never overflows."""
    if type(i) is int and type(n) is int and n > 0 and i >= 0:
        return min(i, n) / n
    return None


# --------------------------------------------------------------------------- prefixes

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# journalctl -o short-iso: "2026-05-28T10:00:00+0000 host python3[123]: <message>"
_JOURNAL = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})? \S+ [^\s:\[]+(?:\[\d+\])?: "
)
# SGLang's own: "[2026-05-28 10:00:09(.123)( DP2)( TP2)( EP2)] message"
_PREFIX = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)((?: [A-Z_]+\d+)*)\] ?")
# A user's logging dictConfig: "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 file.py:222] message"
_CUSTOM = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)[\s|-]+"
    r"(?:\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?[\s|:-]+)?"
    r"(?:\d+\s+)?(?:\[([^\]]*)\]\s*)?"
)
_RANK_TAG = re.compile(r"\b(ATTN_CP|MOE_DP|DP|PP|TP|EP)(\d{1,9})\b")
_UVICORN_LEVEL = re.compile(r"^(TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")

_LEVEL_SEVERITY: dict[str, Severity] = {
    "TRACE": "debug",
    "DEBUG": "debug",
    "INFO": "info",
    "WARNING": "warning",
    "WARN": "warning",
    "ERROR": "error",
    "CRITICAL": "critical",
    "FATAL": "critical",
}

# --------------------------------------------------------------------------- message regexes

# no trailing "(.*)$": after a "\n" inside the line it made every "Decode batch. " rescan to the end
_BATCH = re.compile(r"(Decode|Prefill) batch(?: \[(\d+)\])?[.,] ")
_ACCESS = re.compile(r'^(\S+) - "([A-Z]+) (\S+)(?: (HTTP/[\d.]+))?" (\d{3})')
# A key starts at a word's start (the lookbehind): restarting inside a long run made it quadratic.
_KV_EQ = re.compile(r"(?<![\w.])([\w.]+)=([^\s,]+)")
_ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: )(\d+(?:\.\d+)?) ?s")
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
_EPLB_END = re.compile(r"rebalance end(?: time=(\d+(?:\.\d+)?)s)?")
_EPLB_EVERY = re.compile(r"rebalance per (\d+) iterations")
_EPLB_SKIP = re.compile(r"utilization (\d+(?:\.\d+)?) > minimum rebalance threshold (\d+(?:\.\d+)?)")
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

# Keys of Decode/Prefill lines -> contract names.  Unknown keys are kept, slugged.
_KEY_NAMES = {
    "#running-req": "running_reqs",
    "#queue-req": "queued_reqs",
    "#token": "num_tokens",
    "token usage": "token_usage",
    "gen throughput (token/s)": "gen_throughput",
    "input throughput (token/s)": "input_throughput",
    "accept len": "accept_len",
    "accept rate": "accept_rate",
    "cap len": "cap_len",
    "block accept len": "block_accept_len",
    "#host-receive-req": "host_receive_reqs",
    "#optimistic-req": "optimistic_reqs",
    "#replay-token": "replay_token",
    "est. decode TFLOPS/s (per GPU)": "est_tflops",
    "est. prefill TFLOPS/s (per GPU)": "est_tflops",
    "est. read BW (GB/s per GPU)": "est_read_gbs",
    "est. write BW (GB/s per GPU)": "est_write_gbs",
    "#new-seq": "new_seq",
    "#new-token": "new_token",
    "#cached-token": "cached_token",
    "#pending-token": "pending_token",
    "pre-allocated usage": "prealloc_usage",
    "#prealloc-req": "prealloc_reqs",
    "#transfer-req": "transfer_reqs",
    "#retracted-req": "retracted_reqs",
    "#bootstrap-req": "bootstrap_reqs",
    "#inflight-req": "inflight_reqs",
    "waiting-image-req": "waiting_image_reqs",
    "#full token": "full_tokens",
    "#swa token": "swa_tokens",
    "#gpu token": "gpu_tokens",
    "#cpu token": "cpu_tokens",
}
_GRAPH_KEYS = frozenset({"cuda graph", "cpu graph", "npu graph", "musa graph"})
_USAGE_POOLS = ("full_token_usage", "swa_token_usage", "mamba_usage", "gpu_token_usage")
_SLUG = re.compile(r"[^0-9a-z]+")


def _slug(key: str) -> str:
    return _SLUG.sub("_", key.lower()).strip("_") or "key"


def _value(text: str) -> Value:
    """A log value as int / float / bool when it is one (finite, not absurdly long), else the text."""
    if text == "True":
        return True
    if text == "False":
        return False
    if len(text) > _NUM_CHARS:
        return text
    try:
        if "." in text or "e" in text:
            f = float(text)
            return f if math.isfinite(f) else text
        return int(text)
    except ValueError:
        if text.endswith("%"):
            f2 = _float(text[:-1])
            if isinstance(f2, float):
                return f2
        return text


_KEY_INFO: dict[str, tuple[str, bool]] = {}


def _key_info(key: str) -> tuple[str, bool]:
    """(field name, is-graph-flag) for a batch-line key; memoised (keys repeat forever)."""
    info = _KEY_INFO.get(key)
    if info is None:
        if key in _GRAPH_KEYS:
            info = (key[:-6], True)
        else:
            name = _KEY_NAMES.get(key) or _slug(key)
            info = ("field_" + name if name in _RESERVED else name, False)
        if len(_KEY_INFO) < 4096 and len(key) <= 64:  # bounded: fuzzed or hostile input must not grow memory
            _KEY_INFO[key] = info
    return info


def _batch_fields(body: str, fields: Fields) -> None:
    """``k: v, k: v`` (tolerating the trailing ``", "`` of 2025) into fields.  The hot path."""
    info_of = _KEY_INFO.get
    for item in body.rstrip(", ").split(", "):
        key, sep, val = item.partition(": ")
        if not sep:
            if item:
                fields.setdefault("unparsed", []).append(item)
            continue
        info = info_of(key) or _key_info(key)
        if info[1]:
            fields["cuda_graph"] = val == "True"
            fields["graph_backend"] = info[0]
        elif val.isdecimal() and len(val) <= _NUM_CHARS:  # isdecimal, not isdigit: int("²") raises
            fields[info[0]] = int(val)
        else:
            try:
                if len(val) > _NUM_CHARS:
                    raise ValueError(val)  # text, not a number; and float() of a huge run is slow
                f = float(val)
            except ValueError:
                fields[info[0]] = _value(val)
            else:
                fields[info[0]] = f if math.isfinite(f) else val
    if "token_usage" not in fields:  # hybrid pools: the max, as SGLang's own gauge does
        pools = [fields[p] for p in _USAGE_POOLS if isinstance(fields.get(p), (int, float))]
        if pools:
            fields["token_usage"] = max(pools)


# The usual Decode body in every version (v0.4 without the graph flag, 2025 trailing ", "):
# one regex instead of the generic loop.  Anything else (hybrid pools, PD, MFU...) goes generic.
_DECODE_FAST = re.compile(
    r"#running-req: (\d+), #token: (\d+), token usage: (\d+\.\d+), "
    r"(?:accept len: (\d+\.\d+), (?:accept rate: (\d+\.\d+), )?(?:cap len: (\d+\.\d+), )?)?"
    r"(?:(cuda|cpu|npu|musa) graph: (True|False), )?"
    r"gen throughput \(token/s\): (\d+\.\d+), #queue-req: (\d+)(?:, )?$"
)


def _decode_fields(body: str, fields: Fields) -> None:
    # a real body is ~100-200 characters; a longer one could hold numbers that overflow: generic loop
    m = _DECODE_FAST.match(body) if len(body) <= _NUM_CHARS else None
    if m is None:
        _batch_fields(body, fields)
        return
    running, tokens, usage, accept_len, accept_rate, cap_len, backend, graph, thr, queue = m.groups()
    fields["running_reqs"] = int(running)
    fields["num_tokens"] = int(tokens)
    fields["token_usage"] = float(usage)
    if accept_len is not None:
        fields["accept_len"] = float(accept_len)
        if accept_rate is not None:
            fields["accept_rate"] = float(accept_rate)
        if cap_len is not None:
            fields["cap_len"] = float(cap_len)
    if backend is not None:
        fields["cuda_graph"] = graph == "True"
        fields["graph_backend"] = backend
    fields["gen_throughput"] = float(thr)
    fields["queued_reqs"] = int(queue)


_PREFILL_FAST = re.compile(
    r"#new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+), token usage: (\d+\.\d+), "
    r"#running-req: (\d+), #queue-req: (\d+)(?:, #pending-token: (\d+))?"
    r"(?:, (cuda|cpu|npu|musa) graph: (True|False))?(?:, input throughput \(token/s\): (\d+\.\d+))?"
    r"(?:, (cuda|cpu|npu|musa) graph: (True|False))?(?:, )?$"
)


def _prefill_fields(body: str, fields: Fields) -> None:
    m = _PREFILL_FAST.match(body) if len(body) <= _NUM_CHARS else None
    if m is None:
        _batch_fields(body, fields)
        return
    seqs, new, cached, usage, running, queue, pending, backend, graph, thr, backend2, graph2 = m.groups()
    fields["new_seq"] = int(seqs)
    fields["new_token"] = int(new)
    fields["cached_token"] = int(cached)
    fields["token_usage"] = float(usage)
    fields["running_reqs"] = int(running)
    fields["queued_reqs"] = int(queue)
    if pending is not None:
        fields["pending_token"] = int(pending)
    if backend is not None or backend2 is not None:
        fields["cuda_graph"] = (graph or graph2) == "True"
        fields["graph_backend"] = backend or backend2
    if thr is not None:
        fields["input_throughput"] = float(thr)


_KEY_START = re.compile(r"[A-Za-z_]")


def _kv_pairs(text: str, fields: Fields) -> None:
    """``key=value`` pairs; never overwrites what the line already set (``step``, ``ts``, ``rank``...)."""
    for key, val in _KV_EQ.findall(text):
        start = _KEY_START.search(key)  # the key begins at its first letter, as r"[A-Za-z_][\w.]*" did
        if start is None:
            continue
        key = key[start.start():]
        if key in fields or key in _RESERVED:
            key = "field_" + key
        fields[key] = _value(val.rstrip(".,)"))


def _gb_fields(text: str, fields: Fields) -> None:
    """``avail mem=20.17 GB``, ``KV size: 34.30 GB`` -> ``avail_mem_gb``, ``kv_size_gb``."""
    chunks = text.split(" GB")
    for chunk in chunks[:-1]:
        tail = chunk[-64:]
        i = len(tail)
        while i and (tail[i - 1].isdigit() or tail[i - 1] == "."):
            i -= 1
        number, rest = tail[i:], tail[:i]
        if not number or number == ".":
            continue
        if rest.endswith("="):
            rest = rest[:-1]
        elif rest.endswith(": "):
            rest = rest[:-2]
        else:
            continue
        words = rest.split()
        if not words:
            continue
        key = words[-1]
        if len(words) > 1 and words[-2].isalpha():  # two-word keys: "avail mem", "KV size"
            key = f"{words[-2]} {key}"
        try:
            fields[_slug(key) + "_gb"] = float(number)
        except ValueError:
            continue


# --------------------------------------------------------------------------- kinds


def _startup(msg: str, fields: Fields) -> bool:
    """Startup steps; True when ``msg`` was one."""
    if "Capturing " in msg and _capturing(msg, fields):
        return True
    if "Load weight " in msg:
        if "Load weight begin" in msg:
            fields.update(step="weights", phase="begin", progress=0.0)
        elif "Load weight end" in msg:
            fields.update(step="weights", phase="end", progress=1.0)
            m = _WEIGHT_TYPE.search(msg)
            if m:
                fields["type"] = m.group(1)
            m = _QUANT.search(msg)
            if m:
                fields["quant"] = m.group(1)
        else:
            return False
        _elapsed(msg, fields)
        _gb_fields(msg, fields)
        return True
    if "shards:" in msg:
        m = _shards(msg)
        if m:
            i, n = _int(m.group(2)), _int(m.group(3))
            fields.update(step="weights", phase="progress", i=i, n=n, progress=_ratio(i, n))
            return True
    if "KV Cache is allocated" in msg:
        fields.update(step="kv_cache", phase="end")
        m = _KV_ALLOC.search(msg)
        if m:
            fields["dtype"] = m.group(1)
            fields["kv_tokens"] = _int(m.group(2))
        _gb_fields(msg, fields)
        return True
    if msg.startswith("Capture ") and (" begin." in msg or " end." in msg) and _capture_begin_end(msg, fields):
        return True
    if msg.startswith("Capture cuda graph bs"):
        m = _GRAPH_BS.search(msg)
        sizes = [_int(x) for x in m.group(1).replace(",", " ").split()] if m else []
        fields.update(step="cuda_graph", phase="plan", batch_sizes=sizes, n=len(sizes))
        return True
    if "max_total_num_tokens=" in msg:
        fields.update(step="max_tokens")
        _kv_pairs(msg, fields)
        for key in ("available_gpu_mem",):
            if isinstance(fields.get(key), str):
                fields[key] = _value(fields[key])
        return True
    if "fired up and ready to roll" in msg:
        fields.update(step="ready", progress=1.0)
        return True
    if msg.startswith("server_args=") or "server_args=ServerArgs(" in msg:
        fields.update(step="args", args=_server_args(msg))
        return True
    if "Init torch distributed" in msg:
        fields.update(step="dist_init", phase="begin" if "begin" in msg else "end")
        _elapsed(msg, fields)
        _gb_fields(msg, fields)
        return True
    if msg.startswith("Memory pool end") or "Max concurrent requests" in msg:
        fields.update(step="kv_cache", phase="pool")
        _gb_fields(msg, fields)
        if "max_num_reqs=" in msg:
            _kv_pairs(msg.partition("capacity:")[2], fields)
        return True
    if "Uvicorn running on" in msg:
        m = _UVICORN_URL.search(msg)
        fields.update(step="uvicorn", phase="listening", url=m.group(1) if m else None)
        return True
    if msg.startswith("Started server process"):
        m = _PID.search(msg)
        fields.update(step="uvicorn", phase="process", pid=_int(m.group(1)) if m else None)
        return True
    if msg.startswith("Waiting for application startup") or msg.startswith("Application startup complete"):
        fields.update(step="uvicorn", phase="startup")
        return True
    return False


def _capturing(msg: str, fields: Fields) -> bool:
    """A CUDA-graph capture's progress bar line; True when it was one."""
    m = _CAPTURING.search(msg)
    if not m:
        return False
    i, n = _int(m.group(5)), _int(m.group(6))
    fields.update(step="cuda_graph", phase="progress", i=i, n=n, progress=_ratio(i, n))
    fields["bs" if m.group(1) == "batches" else "num_tokens"] = _int(m.group(2))
    fields["avail_mem_gb"] = _float(m.group(3))
    if m.group(1) != "batches":
        fields["graph"] = "piecewise"
    return True


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
    _elapsed(msg, fields)
    _gb_fields(msg, fields)
    return True


def _elapsed(msg: str, fields: Fields) -> None:
    m = _ELAPSED.search(msg)
    if m:
        fields["elapsed_s"] = _float(m.group(1))


def _shards(msg: str) -> re.Match[str] | None:
    """The first ``shards: N% Completed | i/n`` preceded by ``Loading``/``loading `` with no ``:`` between.

    Linear: each candidate looks back only to the previous ``:``, which is at most the previous ``shards:``.
    """
    for m in _SHARDS.finditer(msg):
        head = msg[msg.rfind(":", 0, m.start()) + 1 : m.start()]
        if _LOADING.search(head):
            return m
    return None


_ARG = re.compile(r"[(,] ?(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:e-?\d+)?|True|False|None)(?=[,)])")


def _server_args(msg: str) -> dict[str, Any]:
    """The simple (str/number/bool/None) values of a ``server_args=ServerArgs(...)`` dump."""
    out: dict[str, Any] = {}
    for key, val in _ARG.findall(msg):
        if val[0] in "'\"":
            out[key] = val[1:-1]
        elif val == "None":
            out[key] = None
        else:
            out[key] = _value(val)
    return out


def _eplb(msg: str, fields: Fields) -> bool:
    if "[EPLBManager]" in msg:
        if "rebalance start" in msg:
            fields["phase"] = "start"
        elif "rebalance end" in msg:
            fields["phase"] = "end"
            m = _EPLB_END.search(msg)
            fields["duration_s"] = _float(m.group(1)) if m and m.group(1) else None
        elif "system started" in msg:
            fields["phase"] = "init"
            m = _EPLB_EVERY.search(msg)
            if m:
                fields["every_iters"] = _int(m.group(1))
        elif "Skipped" in msg:
            fields["phase"] = "skipped"
            m = _EPLB_SKIP.search(msg)
            if m:
                fields["utilization"], fields["threshold"] = _float(m.group(1)), _float(m.group(2))
        else:
            fields["phase"] = "other"
        return True
    if "[Expert Balancedness]" in msg:
        fields["phase"] = "balancedness"
        _kv_pairs(msg, fields)
        return True
    return False


# (substring, kind, severity, error) in priority order; the first match wins.
_PROBLEMS: tuple[tuple[str, str, Severity, str], ...] = (
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
    ("UserWarning", "warning", "warning", "user_warning"),
)


_PY_WARNING = re.compile(r"^\S+:\d+: ([A-Z]\w*Warning): ")  # warnings.showwarning: "file.py:61: FutureWarning: ..."
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Warning))(?::|$)")


def _problem(msg: str, fields: Fields) -> tuple[str, Severity] | None:
    for needle, kind, severity, error in _PROBLEMS:
        if needle in msg:
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


def _problem_details(error: str, msg: str, fields: Fields) -> None:
    if error == "kv_retract":
        m = _RETRACT.search(msg)
        if m:
            fields["retracted_reqs"] = _int(m.group(1))
            fields["new_tokens_gained"] = _int(m.group(2))
            fields["new_token_ratio_from"] = _float(m.group(3))
            fields["new_token_ratio_to"] = _float(m.group(4))
    elif error == "watchdog":
        found = _watchdog(msg)
        if found:
            fields["component"] = found[0] or "Scheduler"
            fields["timeout_s"] = _float(found[1])
    elif error == "subprocess_crash":
        m = _SUBPROC.search(msg)
        if m:
            fields.update(process=m.group(1), pid=_int(m.group(2)), exit_code=_int(m.group(3)))
    elif error == "oom":
        m = _OOM_ALLOC.search(msg)
        if m:
            fields["tried_alloc"] = _float(m.group(1))
            fields["tried_alloc_unit"] = m.group(2) or ""
        fields["phase"] = "prefill" if "Prefill out of" in msg else "decode" if "Decode out of" in msg else None
    elif error == "nccl":
        m = _NCCL_TIMEOUT.search(msg)
        if m:
            ms = _float(m.group(1))
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


# --------------------------------------------------------------------------- entry points


def _clean(raw: str) -> str:
    line = raw.rstrip("\r\n")
    if "\r" in line:  # tqdm redraws: keep the last non-empty state
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return line


_RANK_CACHE: dict[str, tuple[dict[str, int], str] | None] = {}


_GLUED = re.compile(r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


def split_glued(raw: str) -> list[str]:
    """One physical line -> the log lines in it.

    tqdm redraws its bar with ``\r`` and no newline, so when stderr and stdout
    share a file or journal the next log line is glued onto the bar:
    ``...\rCapturing batches (...) 7/52 [00:00<00:00][2026-05-28 10:00:01] INFO: ...``.
    That becomes two lines: the bar's last state and the log line.
    """
    if "\r" not in raw:
        return [raw]
    parts = [p for p in raw.rstrip("\r\n").split("\r") if p.strip()]
    if not parts:
        return [raw]
    last = parts[-1]
    m = _GLUED.search(last, 1)
    if m is None:
        return [raw]
    return [last[: m.start()], last[m.start() :]]


def _ranks(tags: str, fields: Fields) -> None:
    hit = _RANK_CACHE.get(tags, False)
    if hit is False:
        found = _RANK_TAG.findall(tags)
        hit = ({n.lower(): int(v) for n, v in found}, "_".join(n + v for n, v in found)) if found else None
        if len(_RANK_CACHE) < 4096 and len(tags) <= 128:
            _RANK_CACHE[tags] = hit
    if isinstance(hit, tuple):  # not None, nor the False of "not cached"
        fields["ranks"] = dict(hit[0])
        fields["rank"] = hit[1]


def _bounded(raw: str) -> tuple[str, int | None]:
    """The line to parse and keep, and its original length when that was over :data:`MAX_LINE_CHARS`.

    Work per line is bounded by the cap, not by what a host sends: a tqdm line (many ``\\r``
    redraws) is first reduced to its last non-empty redraw, as :func:`_clean` would.
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
    return _parse_bounded(raw)[0]


_NO_SECRETS = frozenset({"decode", "prefill", "eplb"})
"""Line kinds whose format carries only figures: not scanned for secrets (they are most of a busy log)."""
_FLAG_KINDS = frozenset({"plain", "error", "warning"})
"""Where a command line's ``--api-key VALUE`` is logged (a wrapper's echo, argparse's complaint): the kinds
scanned for ``--`` as well as ``=``.  SGLang's own startup and access lines carry settings as ``name=value``."""
_SECRET_HINTS = ("key", "token", "secret", "passw", "KEY", "TOKEN", "SECRET", "PASSW")
UNREDACTABLE = f"{REDACTED} (a line naming a secret that kimitui could not redact)"


def redact_secrets(text: str) -> str:
    """``text`` with every secret-named setting's value ``***`` (:func:`kimitui.knobs.redact_line`); the same
    object when it cannot hold one (no ``=`` nor ``--``, or no key/token/secret/password in it: substring
    checks only).  Total: a redaction that fails drops the line's text rather than keep a secret."""
    if "=" not in text and "--" not in text:
        return text
    for hint in _SECRET_HINTS:
        if hint in text:
            try:
                return redact_line(text)
            except Exception:  # noqa: BLE001 - never keep a secret because the redaction broke
                return UNREDACTABLE
    return text


def _parse_bounded(raw: str) -> tuple[Parsed, str]:
    text, length = _bounded(raw)
    try:
        parsed = _parse(text)
        kind = parsed.line_kind  # the gate inline: most lines stop at a kind or one character's scan
        if kind not in _NO_SECRETS and ("=" in text or (kind in _FLAG_KINDS and "--" in text)):
            shown = redact_secrets(text)
            if shown != text:  # rare: parse what is kept, so the fields hold *** too
                text, parsed = shown, _parse(shown)
    except Exception as exc:  # a parser bug must never cost the line
        text = redact_secrets(text)
        parsed = Parsed("plain", "info", {"parse_error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    if length is not None:
        parsed.fields["truncated"] = True
        parsed.fields["raw_chars"] = length
    return parsed, text


def _parse(raw: str) -> Parsed:
    line = _clean(raw)
    fields: Fields = {}
    severity: Severity = "info"
    level: str | None = None
    if line[:1].isdigit():  # journalctl short-iso: strip its prefix once (no recursion: no depth to exhaust)
        m = _JOURNAL.match(line)
        if m:
            line = line[m.end() :]
    msg = line
    if line[:1] == "[":
        m = _PREFIX.match(line)
        if m:
            ts, tags = m.groups()
            fields["ts"] = ts
            if tags:
                _ranks(tags, fields)
            msg = line[m.end() :]
    elif line[:1].isdigit():
        m = _CUSTOM.match(line)
        if m:
            fields["ts"] = m.group(1)
            level = m.group(2)
            if m.group(3):
                _ranks(m.group(3), fields)
            msg = line[m.end() :]
    # uvicorn's "INFO:     ..." level prefix
    if msg[:1] in "TDIWEC" and ":" in msg[:10]:
        m = _UVICORN_LEVEL.match(msg)
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
                    return Parsed("access", "error" if status >= 500 else "info", fields)
    if level is not None:
        severity = _LEVEL_SEVERITY.get(level, "info")

    if " batch" in msg:
        m = _BATCH.match(msg) or _BATCH.search(msg)
        if m:
            which, iteration = m.groups()
            body = msg[m.end() :]
            if iteration:
                fields["iter"] = _int(iteration)
            if which == "Decode":
                _decode_fields(body, fields)
                return Parsed("decode", severity, fields)
            _prefill_fields(body, fields)
            return Parsed("prefill", severity, fields)
    if "EPLBManager" in msg or "Expert Balancedness" in msg:
        if _eplb(msg, fields):
            return Parsed("eplb", severity, fields)
    problem = _problem(msg, fields)
    if problem is not None:
        return Parsed(problem[0], problem[1], fields)
    if _startup(msg, fields):
        return Parsed("startup", severity, fields)
    if severity in ("error", "critical"):
        fields["error"] = "logged"
        return Parsed("error", severity, fields)
    if severity == "warning":
        fields["error"] = "logged"
        return Parsed("warning", severity, fields)
    return Parsed("plain", severity, fields)


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
    parsed, text = _parse_bounded(raw.rstrip("\r\n"))
    return LogLine(
        t=time.time() if t is None else t,
        host=host,
        raw=text,
        line_kind=parsed.line_kind,
        severity=parsed.severity,
        fields=parsed.fields,
        source=source,
        cursor=cursor,
    )


_STATS_KEYS = ("running_reqs", "queued_reqs", "token_usage", "gen_throughput", "num_tokens")


def _figure(val: object) -> float | None:
    """A stats figure: a finite int/float (not bool), else None (text, huge, inf, nan, anything else)."""
    if type(val) is float:
        return val if math.isfinite(val) else None
    if type(val) is int:
        return float(val) if -1e300 < val < 1e300 else None
    return None


_EXTRA_KEYS = ("accept_len", "accept_rate", "cap_len", "block_accept_len", "prealloc_usage", "prealloc_reqs",
               "transfer_reqs", "host_receive_reqs", "retracted_reqs", "est_tflops", "est_read_gbs", "est_write_gbs")
"""Decode-line figures carried in ``ServerStats.extra`` under these names (docs/telemetry.md)."""


def to_stats(parsed: Parsed, *, host: str, t: float | None = None) -> ServerStats | None:
    """A Decode line's figures (or an ``[Expert Balancedness]`` line's) as :class:`ServerStats` (source="log").

    None for other kinds.  Total over any fields (extra keys, text where a number was expected, huge
    numbers): a figure that is not one is left out.  It feeds the follower's stream, so it must never raise.
    """
    if parsed.line_kind == "eplb":
        return _balance_stats(parsed, host=host, t=t)
    if parsed.line_kind != "decode":
        return None
    try:
        f = parsed.fields
        kw: dict[str, Any] = {key: _figure(f.get(key)) for key in _STATS_KEYS}
        extra: dict[str, float] = {}
        for key in _EXTRA_KEYS:
            val = _figure(f.get(key))
            if val is not None:
                extra[key] = val
        ranks = f.get("ranks")
        if isinstance(ranks, dict):
            for name, num in ranks.items():
                val = _figure(num)
                if isinstance(name, str) and val is not None:
                    extra[f"rank_{name}"] = val
        cuda_graph = f.get("cuda_graph")
        return ServerStats(
            t=time.time() if t is None else t,
            host=host,
            source="log",
            cuda_graph=cuda_graph if isinstance(cuda_graph, bool) else None,
            extra=extra,
            **kw,
        )
    except Exception:  # noqa: BLE001 - a Parsed built elsewhere with odd types: no stats, not a dead stream
        return None


def _balance_stats(parsed: Parsed, *, host: str, t: float | None) -> ServerStats | None:
    """``[Expert Balancedness] ... current_pass_balancedness=0.812 ...`` -> extra ``eplb_balancedness``
    (and ``eplb_balancedness_last_N`` for each window the line averages over)."""
    f = parsed.fields
    if f.get("phase") != "balancedness":
        return None
    current = _figure(f.get("current_pass_balancedness"))
    if current is None:
        return None
    extra = {"eplb_balancedness": current}
    for key, val in f.items():
        if key.startswith("last_") and key.endswith("_average_balancedness") and (v := _figure(val)) is not None:
            extra["eplb_balancedness_" + key[: -len("_average_balancedness")]] = v
    return ServerStats(t=time.time() if t is None else t, host=host, source="log", extra=extra)
