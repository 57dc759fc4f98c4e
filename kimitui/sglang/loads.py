"""SGLang's load endpoints read into :class:`ServerStats`: ``/v1/loads`` and the older ``/get_load``.

``/v1/loads`` (0.5.18 and later) answers ``{"timestamp", "version", "accelerator", "num_accelerators",
"loads": [one object per DP rank]}``; each rank has the scheduler's counts (``num_running_reqs``,
``num_waiting_reqs``, ``num_used_tokens``, ``token_usage``, ``gen_throughput``, ``cache_hit_rate``,
``utilization``...) and sections (``memory``, ``disaggregation``, ``queues``; 0.5.23 adds
``speculative``).  ``/get_load`` (deprecated, still served by 0.5.18) is a list per DP rank of
``num_reqs``, ``num_waiting_reqs``, ``num_tokens``.  Ranks are combined: counts summed, ratios averaged.
"""

from __future__ import annotations

from typing import Any

from kimitui.events import ServerStats

PER_RANK_KEYS = ("num_running_reqs", "num_waiting_reqs", "token_usage", "gen_throughput", "utilization")
"""The per-rank figures kept in ``extra`` as ``dp<rank>_<key>`` (a DP rank that lags shows there)."""


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def stats_from_loads(data: dict[str, Any], *, host: str) -> ServerStats:
    """A ``/v1/loads`` answer -> ServerStats (``source="loads"``)."""
    loads = [x for x in data.get("loads") or [] if isinstance(x, dict)]

    def values(key: str) -> list[float]:
        return [v for v in (_number(x.get(key)) for x in loads) if v is not None]

    def total(key: str) -> float | None:
        vals = values(key)
        return sum(vals) if vals else None

    def mean(key: str) -> float | None:
        vals = values(key)
        return sum(vals) / len(vals) if vals else None

    extra: dict[str, float] = {}
    accepts: list[float] = []
    for x in loads:
        rank = x.get("dp_rank")
        if not isinstance(rank, int):
            continue
        for key in PER_RANK_KEYS:
            value = _number(x.get(key))
            if value is not None:
                extra[f"dp{rank}_{key}"] = value
        spec = x.get("speculative")  # 0.5.23 managers/load_snapshot.py SpeculativeMetrics, per DP rank
        acc = _number(spec.get("accept_length")) if isinstance(spec, dict) else None
        if acc is not None and acc > 0:
            extra[f"dp{rank}_accept_len"] = acc
            accepts.append(acc)
    if accepts:
        extra["accept_len"] = sum(accepts) / len(accepts)
    return ServerStats(host=host, source="loads", running_reqs=total("num_running_reqs"),
                       queued_reqs=total("num_waiting_reqs"), token_usage=mean("token_usage"),
                       gen_throughput=total("gen_throughput"), num_tokens=total("num_used_tokens"),
                       cache_hit_rate=mean("cache_hit_rate"), utilization=mean("utilization"), extra=extra)


def stats_from_get_load(data: list[Any], *, host: str) -> ServerStats:
    """A deprecated ``/get_load`` answer -> ServerStats: running (``num_reqs`` less the waiting), waiting,
    tokens in use.  For a server without ``/v1/loads``."""
    ranks = [x for x in data if isinstance(x, dict)]

    def total(key: str) -> float | None:
        vals = [v for v in (_number(x.get(key)) for x in ranks) if v is not None]
        return sum(vals) if vals else None

    reqs, waiting = total("num_reqs"), total("num_waiting_reqs")
    running = reqs - waiting if reqs is not None and waiting is not None else None
    return ServerStats(host=host, source="loads", running_reqs=running, queued_reqs=waiting,
                       num_tokens=total("num_tokens"))
