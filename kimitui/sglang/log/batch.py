"""``Decode batch`` and ``Prefill batch`` lines: the scheduler's figures, most of a busy log.

Every version's form: v0.4 ``Decode batch.``, the 2025 trailing comma, the 2026 forms, speculative
decoding's ``accept len``, a PD server's queues, MFU estimates, hybrid pools.  The usual bodies
are read by one regex each; anything else by the generic ``key: value`` loop, unknown keys kept
slugged.  The graph flag is the device's: ``cuda graph: True`` on a GPU, ``cpu graph: False`` on a
CPU (the real 0.5.18 CPU server's lines): both become ``cuda_graph`` (on/off) and ``graph_backend``.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from kimitui.sglang.log.prefix import PREFIX, ranks
from kimitui.sglang.log.values import NUM_CHARS, RESERVED, Fields, as_int, slug, value

# no trailing "(.*)$": after a "\n" inside the line it made every "Decode batch. " rescan to the end
BATCH = re.compile(r"(Decode|Prefill) batch(?: \[(\d+)\])?[.,] ")

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

_KEY_INFO: dict[str, tuple[str, bool]] = {}


def _key_info(key: str) -> tuple[str, bool]:
    """(field name, is-graph-flag) for a batch-line key; memoised (keys repeat forever)."""
    info = _KEY_INFO.get(key)
    if info is None:
        if key in _GRAPH_KEYS:
            info = (key[:-6], True)
        else:
            name = _KEY_NAMES.get(key) or slug(key)
            info = ("field_" + name if name in RESERVED else name, False)
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
        elif val.isdecimal() and len(val) <= NUM_CHARS:  # isdecimal, not isdigit: int("²") raises
            fields[info[0]] = int(val)
        else:
            try:
                if len(val) > NUM_CHARS:
                    raise ValueError(val)  # text, not a number; and float() of a huge run is slow
                f = float(val)
            except ValueError:
                fields[info[0]] = value(val)
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


def decode_fields(body: str, fields: Fields) -> None:
    """A ``Decode batch`` line's body into :class:`~kimitui.sglang.log.kinds.DecodeFields`."""
    # a real body is ~100-200 characters; a longer one could hold numbers that overflow: generic loop
    m = _DECODE_FAST.match(body) if len(body) <= NUM_CHARS else None
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


def prefill_fields(body: str, fields: Fields) -> None:
    """A ``Prefill batch`` line's body into :class:`~kimitui.sglang.log.kinds.PrefillFields`."""
    m = _PREFILL_FAST.match(body) if len(body) <= NUM_CHARS else None
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


# The usual whole line, SGLang's prefix and all, in one regex (issue 33): most of a busy log is these two forms, and
# one match costs less than the prefix's, the header's and the body's one after another.  ASCII digits only (faster
# than Unicode's ``\d``): a line with other digits fails here and takes the step-by-step path, as before.
_DECODE_LINE = re.compile(PREFIX.pattern + r"Decode batch(?: \[(\d+)\])?[.,] " + _DECODE_FAST.pattern, re.ASCII)
_PREFILL_LINE = re.compile(PREFIX.pattern + r"Prefill batch(?: \[(\d+)\])?[.,] " + _PREFILL_FAST.pattern, re.ASCII)
_decode_line = _DECODE_LINE.match
_prefill_line = _PREFILL_LINE.match


def batch_line(line: str) -> tuple[Literal["decode", "prefill"], Literal["info"], Fields] | None:
    """``("decode" | "prefill", "info", fields)`` for a whole ``[time RANKS] Decode batch, ...`` line of the
    usual form (a cleaned line, no level word), else None: the same fields, in the same order, as the prefix, then
    :data:`BATCH`, then :func:`decode_fields` or :func:`prefill_fields` give it (their fast forms, inline here:
    these are the commonest lines of all; tests/test_logpath_speed_shape.py holds the two paths equal)."""
    if len(line) > NUM_CHARS:  # then the body may be too: the step-by-step path bounds it
        return None
    if "Decode batch" in line:
        m = _decode_line(line)
        if m is None:
            return None
        ts, tags, iteration, running, tokens, usage, accept_len, accept_rate, cap_len, backend, graph, thr, queue = (
            m.groups())
        fields: Fields = {"ts": ts}
        if tags:
            ranks(tags, fields)
        if iteration:
            fields["iter"] = as_int(iteration)
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
        return "decode", "info", fields
    if "Prefill batch" in line:
        p = _prefill_line(line)
        if p is None:
            return None
        (ts, tags, iteration, seqs, new, cached, usage, running, queue, pending, backend, graph, thr, backend2,
         graph2) = p.groups()
        fields = {"ts": ts}
        if tags:
            ranks(tags, fields)
        if iteration:
            fields["iter"] = as_int(iteration)
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
        return "prefill", "info", fields
    return None
