"""A log line's figures as :class:`~kimitui.events.ServerStats` (``source="log"``): Decode lines and
``[Expert Balancedness]`` lines."""

from __future__ import annotations

import math
import time
from typing import Any

from kimitui.events import ServerStats
from kimitui.sglang.log.kinds import LogLineLike

_STATS_KEYS = ("running_reqs", "queued_reqs", "token_usage", "gen_throughput", "num_tokens")


def _figure(val: object) -> float | None:
    """A stats figure: a finite int/float (not bool), else None (text, huge, inf, nan, anything else)."""
    if type(val) is float:
        return val if math.isfinite(val) else None
    if type(val) is int:
        return float(val) if -1e300 < val < 1e300 else None
    return None


EXTRA_KEYS = ("accept_len", "accept_rate", "cap_len", "block_accept_len", "prealloc_usage", "prealloc_reqs",
              "transfer_reqs", "host_receive_reqs", "retracted_reqs", "est_tflops", "est_read_gbs", "est_write_gbs")
"""Decode-line figures carried in ``ServerStats.extra`` under these names (docs/telemetry.md)."""


def to_stats(parsed: LogLineLike, *, host: str, t: float | None = None) -> ServerStats | None:
    """A Decode line's figures (or an ``[Expert Balancedness]`` line's) as :class:`ServerStats` (source="log").

    ``parsed``: a parsed line or a :class:`~kimitui.events.LogLine` (its fields are the parse).  None for
    other kinds.  Total over any fields (extra keys, text where a number was expected, huge numbers): a
    figure that is not one is left out.  It feeds the follower's stream, so it must never raise.
    """
    if parsed.line_kind == "eplb":
        return _balance_stats(parsed, host=host, t=t)
    if parsed.line_kind != "decode":
        return None
    try:
        f = parsed.fields
        kw: dict[str, Any] = {key: _figure(f.get(key)) for key in _STATS_KEYS}
        extra: dict[str, float] = {}
        for key in EXTRA_KEYS:
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
    except Exception:  # noqa: BLE001 - a line built elsewhere with odd types: no stats, not a dead stream
        return None


def _balance_stats(parsed: LogLineLike, *, host: str, t: float | None) -> ServerStats | None:
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
