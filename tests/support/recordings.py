"""Shared helpers for recording/replay/report tests: event strategies and synthetic sessions."""

from __future__ import annotations

import random
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from hypothesis import strategies as st
from pydantic import BaseModel

from kimitui.events import (
    EVENT_TYPES,
    Event,
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    LogLine,
    Marker,
    Note,
    Percentiles,
    ProfileSwitch,
    RequestResult,
    ServerInfo,
    Straggler,
    SweepResult,
    SweepSpec,
    SweepStarted,
)

_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
_ints = st.integers(min_value=-(2**53), max_value=2**53)
_json_scalar = st.one_of(st.none(), st.booleans(), _ints, _floats, _text)
_json = st.recursive(_json_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)), max_leaves=6)


def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    """A hypothesis strategy for any annotation used in ``kimitui.events``."""
    origin = get_origin(annotation)
    if annotation is Any:
        return _json
    if annotation is float:
        return _floats
    if annotation is int:
        return _ints
    if annotation is bool:
        return st.booleans()
    if annotation is str:
        return _text
    if annotation is type(None):
        return st.none()
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin in (Union, types.UnionType):
        return st.one_of(*(strategy_for(a) for a in get_args(annotation)))
    if origin is list:
        (inner,) = get_args(annotation)
        return st.lists(strategy_for(inner), max_size=3)
    if origin is tuple:
        return st.tuples(*(strategy_for(a) for a in get_args(annotation)))
    if origin is dict:
        _, inner = get_args(annotation)
        return st.dictionaries(_text, strategy_for(inner), max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_strategy(annotation)
    raise TypeError(f"no strategy for {annotation!r}")


def model_strategy(cls: type[BaseModel]) -> st.SearchStrategy[BaseModel]:
    hints = typing.get_type_hints(cls)
    fields = {}
    for name, info in cls.model_fields.items():
        if name == "kind":
            continue
        fields[name] = _bounded(strategy_for(hints[name]), info.metadata)
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _bounded(strategy: st.SearchStrategy[Any], metadata: list[Any]) -> st.SearchStrategy[Any]:
    """Values a field's own bounds allow (``Field(ge=1)``: SweepSpec.workers), not every int or float."""
    for bound in metadata:
        if isinstance(bound, annotated_types.Ge):
            strategy = strategy.filter(lambda v, b=bound.ge: v is None or v >= b)
        elif isinstance(bound, annotated_types.Gt):
            strategy = strategy.filter(lambda v, b=bound.gt: v is None or v > b)
        elif isinstance(bound, annotated_types.Le):
            strategy = strategy.filter(lambda v, b=bound.le: v is None or v <= b)
        elif isinstance(bound, annotated_types.Lt):
            strategy = strategy.filter(lambda v, b=bound.lt: v is None or v < b)
    return strategy


any_event: st.SearchStrategy[Event] = st.one_of(*(model_strategy(c) for c in EVENT_TYPES.values()))


# --------------------------------------------------------------------------- synthetic sessions

SEED_LEVELS = [1, 8, 32]


def gpu_sample(t: float, host: str = "sim", util: float = 90.0) -> GpuSample:
    return GpuSample(t=t, host=host, gpus=[GpuReading(index=i, util_pct=util, power_w=400.0 + i, temp_c=60.0)
                                           for i in range(8)])


def synthetic_sweep(
    *,
    t0: float = 1_000_000.0,
    profile: str = "ep8-tuned",
    levels: list[int] | None = None,
    per_request_tok_s: float = 65.0,
    peak_scale: float = 1.0,
    requests_per_level: int = 6,
    straggler_at: int | None = None,
    seed: int = 0,
    spec: SweepSpec | None = None,
    sweep_id: str = "s1",
    knobs: dict[str, Any] | None = None,
    noise: float = 0.03,
    repeats: int = 1,
    failures: dict[int, int] | None = None,
    server_info: bool = True,
    from_profile: str | None = None,
    switch_diff: dict[str, list[Any]] | None = None,
) -> list[Event]:
    """A plausible recorded sweep: ProfileSwitch, ServerInfo, SweepStarted, levels with requests, SweepResult.

    Each request decodes at ``per_request_tok_s * f(C) * peak_scale`` with ``noise`` jitter;
    ``straggler_at`` makes one request at that level crawl at 1/8 speed; ``failures``
    maps a level to a number of failed (timeout) requests.
    """
    rng = random.Random(seed)
    levels = levels or SEED_LEVELS
    spec = spec or SweepSpec(url="http://127.0.0.1:30000", model="kimi", levels=levels, max_tokens=512,
                             requests_per_level=requests_per_level)
    evs: list[Event] = []
    t = t0
    evs.append(ProfileSwitch(t=t, from_profile=from_profile, to_profile=profile, outcome="ok",
                             diff=dict(switch_diff or {})))
    if server_info:
        evs.append(ServerInfo(t=t, args=dict(knobs or {"ep_size": 8, "enable_eplb": False})))
    evs.append(SweepStarted(t=t, sweep_id=sweep_id, spec=spec, profile=profile))
    peak = 0.0
    for c in levels:
        for rep in range(repeats):
            t = _level(evs, rng, t, c, rep, spec, sweep_id, per_request_tok_s * peak_scale, requests_per_level,
                       noise, straggler_at == c and rep == 0, failures.get(c, 0) if failures else 0)
            peak = max(peak, evs[-1].agg_tok_s or 0.0)  # type: ignore[attr-defined]
    t += 0.1
    evs.append(SweepResult(t=t, sweep_id=sweep_id, levels=levels, peak_tok_s=peak))
    return evs


def busy_minute(t0: float = 2_000_000.0, seconds: int = 60) -> list[Event]:
    """Telemetry-like background: 4 Hz GPU samples, a log line per second, a note and a marker."""
    evs: list[Event] = []
    for i in range(seconds * 4):
        evs.append(gpu_sample(t0 + i * 0.25))
        if i % 4 == 0:
            evs.append(LogLine(t=t0 + i * 0.25, raw=f"Decode batch. #running-req: {i}", line_kind="decode"))
    evs.insert(min(10, len(evs)), Note(t=evs[min(9, len(evs) - 1)].t, text="before the swap"))
    evs.insert(len(evs) // 2, Marker(t=evs[len(evs) // 2 - 1].t, label="here"))
    return evs


def _level(evs: list[Event], rng: random.Random, t: float, c: int, rep: int, spec: SweepSpec, sweep_id: str,
           base_rate: float, requests_per_level: int, noise: float, straggler: bool, n_failed: int) -> float:
    t += 1.0
    evs.append(LevelStarted(t=t, sweep_id=sweep_id, concurrency=c, repeat=rep))
    per = base_rate * (1.0 / (1 + c / 40))
    rates: list[float] = []
    stragglers: list[Straggler] = []
    n = max(requests_per_level, c)
    for r in range(n):
        rate = per * (1 + rng.uniform(-noise, noise))
        rid = f"{sweep_id}-c{c}-p{rep}-r{r}"
        gap = 0.05
        if straggler and r == 0:
            rate = per / 8
            gap = 9.8
        e2e = spec.max_tokens / rate
        rates.append(rate)
        t += 0.01
        evs.append(RequestResult(t=t, sweep_id=sweep_id, request_id=rid, concurrency=c, ok=True,
                                 intended_send=t - e2e, sent=t - e2e, ttft_s=0.2 * (1 + rng.uniform(-noise, noise)),
                                 e2e_s=e2e, completion_tokens=spec.max_tokens, decode_tok_s=rate,
                                 e2e_tok_s=spec.max_tokens / e2e, tpot_s=1 / rate, max_gap_s=gap,
                                 max_gap_at=t - gap - 0.1))
        if gap > 5:
            stragglers.append(Straggler(request_id=rid, concurrency=c, decode_tok_s=rate,
                                        median_decode_tok_s=per, max_gap_s=gap, reason="stall"))
    for r in range(n_failed):
        t += 0.01
        evs.append(RequestResult(t=t, sweep_id=sweep_id, request_id=f"{sweep_id}-c{c}-p{rep}-f{r}", concurrency=c,
                                 ok=False, error_class="timeout", error="timed out", intended_send=t - 1, sent=t - 1))
    srt = sorted(rates)
    agg = sum(srt) / len(srt) * c
    t += 0.5
    evs.append(LevelResult(
        t=t, sweep_id=sweep_id, concurrency=c, repeat=rep, requests=n + n_failed, ok=n, failed=n_failed,
        failures={"timeout": n_failed} if n_failed else {}, wall_s=n * spec.max_tokens / agg,
        output_tokens=n * spec.max_tokens, agg_tok_s=agg, steady_tok_s=agg * 1.02,
        decode_tok_s=Percentiles(p50=srt[len(srt) // 2], p90=srt[int(len(srt) * 0.9)], p99=srt[-1],
                                 mean=sum(srt) / len(srt)),
        ttft=Percentiles(p50=0.2, p90=0.25, p99=0.3, mean=0.21), tpot=Percentiles(p50=1 / srt[len(srt) // 2]),
        stragglers=stragglers))
    return t
