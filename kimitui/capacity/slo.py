"""Service-level objectives: ``ttft_p99<=2s,decode_p50>=20`` parsed, described and checked on a level.

Grammar (comma-separated terms): ``<metric>_<stat><op><value>[unit]`` with ops ``<= < >= >``
(``≤``/``≥`` read too).  Metrics: ``ttft``, ``tpot``, ``itl``, ``e2e`` (seconds; units ``s`` or
``ms``, default ``s``), ``decode`` (decode tok/s per user; no unit or ``tok/s``) and
``error_rate`` (no statistic; a fraction 0..1 or a percentage with ``%``).  Stats: ``p50``,
``p90``, ``p99``, ``mean``.

A term is judged on a level's measured (non-warm-up) requests, the way the operator reads it:
a percentile over the requests' own values (``itl`` is each request's median inter-token gap).
The confidence is a seeded bootstrap over those requests: the share of resamples in which the
term (or, overall, every term) still holds, so a point right at the line reads ~0.5.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kimitui.analysis.level_stats import effective_status, quantile
from kimitui.events import LevelResult, RequestResult
from kimitui.report.noise import resample_indices

LATENCY = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_p50_s", "e2e": "e2e_s"}
"""Latency metric -> the RequestResult field it reads (seconds)."""
METRICS = (*LATENCY, "decode", "error_rate")
STATS = ("p50", "p90", "p99", "mean")
_OPS = {"<=": "≤", "<": "<", ">=": "≥", ">": ">"}
_OP_RE = re.compile(r"<=|>=|≤|≥|<|>")
_VALUE_RE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)
MIN_OK_REQUESTS = 3
"""Fewer completed requests than this and a level cannot say anything about a percentile."""
BOOTSTRAP_RESAMPLES = 200


class SloError(ValueError):
    """An SLO that does not parse; the message names the term and what is wrong with it."""


@dataclass(frozen=True)
class SloTerm:
    """One bound: ``metric`` (``stat``) ``op`` ``value``, the value in base units (s, tok/s, fraction)."""

    metric: str
    stat: str | None
    op: str
    value: float
    unit: str = ""
    """The unit the operator wrote (``ms`` shows back as ms)."""
    text: str = ""

    @property
    def key(self) -> str:
        """A stable name for the term (``ttft_p99``, ``error_rate``): JSON keys and table columns."""
        return self.metric if self.stat is None else f"{self.metric}_{self.stat}"

    @property
    def unit_label(self) -> str:
        """The unit values are shown in: ``s``, ``ms``, ``tok/s/user``, ``%``."""
        if self.metric == "decode":
            return "tok/s/user"
        if self.metric == "error_rate":
            return "%"
        return "ms" if self.unit == "ms" else "s"

    def bare(self, value: float) -> str:
        """``value`` in :attr:`unit_label`, without it (a table column names the unit once)."""
        scale = {"%": 100.0, "ms": 1000.0}.get(self.unit_label, 1.0)
        return fmt_figure(value * scale)

    def show(self, value: float) -> str:
        """``value`` in the term's unit: ``2 s``, ``150 ms``, ``20 tok/s/user``, ``1 %``."""
        return f"{self.bare(value)} {self.unit_label}"

    def describe(self) -> str:
        """``ttft p99 ≤ 2 s``."""
        name = "error rate" if self.metric == "error_rate" else f"{self.metric} {self.stat}"
        return f"{name} {_OPS[self.op]} {self.show(self.value)}"

    def holds_for(self, measured: float | None) -> bool:
        """Whether a measured value meets the bound (nothing measured never does)."""
        if measured is None or not math.isfinite(measured):
            return False
        return {"<=": measured <= self.value, "<": measured < self.value,
                ">=": measured >= self.value, ">": measured > self.value}[self.op]

    def request_value(self, r: RequestResult) -> float | None:
        """The request's own value of the metric (an error-rate term reads 0 for ok, 1 for failed)."""
        if self.metric == "error_rate":
            return 0.0 if r.ok else 1.0
        if not r.ok:
            return None
        value: float | None = r.decode_tok_s if self.metric == "decode" else getattr(r, LATENCY[self.metric])
        return value if value is not None and math.isfinite(value) else None

    def request_meets(self, r: RequestResult) -> bool:
        """Whether one request, alone, is within the bound (what goodput counts)."""
        if not r.ok:
            return False
        return self.metric == "error_rate" or self.holds_for(self.request_value(r))


def fmt_figure(v: float) -> str:
    """A figure as people write it: 2, 0.5, 3.1, 1,234."""
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def statistic(values: Sequence[float], stat: str | None) -> float | None:
    """p50/p90/p99/mean (linear interpolation, as the level tables) of ``values``; None when empty."""
    if not values:
        return None
    if stat == "mean" or stat is None:
        return sum(values) / len(values)
    return quantile(sorted(values), int(stat[1:]) / 100)


@dataclass(frozen=True)
class TermCheck:
    term: SloTerm
    value: float | None
    holds: bool
    confidence: float
    """Share of bootstrap resamples in which the term holds."""

    def explain(self) -> str:
        """``ttft p99 3.1 s > 2 s`` (a failing term) or ``ttft p99 1.2 s ≤ 2 s``."""
        t = self.term
        name = "error rate" if t.metric == "error_rate" else f"{t.metric} {t.stat}"
        if self.value is None:
            return f"{name} not measured (no completed request)"
        rel = _OPS[t.op] if self.holds else {"<=": ">", "<": "≥", ">=": "<", ">": "≤"}[t.op]
        return f"{name} {t.show(self.value)} {rel} {t.show(t.value)}"


@dataclass(frozen=True)
class SloCheck:
    """An SLO judged on one level (or several measurements of one point, pooled)."""

    terms: tuple[TermCheck, ...]
    holds: bool
    confidence: float
    """Share of bootstrap resamples in which every term holds."""
    requests: int = 0
    ok: int = 0
    reason: str = ""
    """Why it does not hold, in words (a failing term, too few requests, a level that is not ok)."""

    def value(self, key: str) -> float | None:
        return next((tc.value for tc in self.terms if tc.term.key == key), None)


@dataclass(frozen=True)
class Slo:
    terms: tuple[SloTerm, ...]
    text: str = ""
    resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = 0
    time_scale: float = 1.0
    """The clock the bounds are on: N for an SLO brought to a simulator running N x faster (:meth:`scaled`)."""

    def describe(self) -> str:
        """``ttft p99 ≤ 2 s, decode p50 ≥ 20 tok/s/user``."""
        return ", ".join(t.describe() for t in self.terms)

    def scaled(self, time_scale: float) -> Slo:
        """The SLO on a simulator's clock running ``time_scale`` x faster than a real host: every time bound
        divided by it, every rate bound multiplied by it (an error rate stays), so a simulated server is
        held to what the real one would be.  ``text`` stays the operator's (the bootstrap's seed with it)."""
        if time_scale <= 0:
            raise ValueError(f"time scale {time_scale:g} must be > 0")
        terms = tuple(replace(t, value=t.value / time_scale if t.metric in LATENCY
                              else t.value * time_scale if t.metric == "decode" else t.value) for t in self.terms)
        return replace(self, terms=terms, time_scale=self.time_scale * time_scale)

    def scale_note(self) -> str:
        """``the SLO as written (ttft p99 ≤ 2 s, ...) scaled to the simulator's time scale 20``; "" unscaled."""
        if self.time_scale == 1.0:
            return ""
        written = self.scaled(1.0 / self.time_scale).describe()
        return f"the SLO as written ({written}) scaled to the simulator's time scale {self.time_scale:g}"

    def request_meets(self, r: RequestResult) -> bool:
        """One request within every bound (goodput's test)."""
        return all(t.request_meets(r) for t in self.terms)

    def check(self, results: Sequence[RequestResult], levels: Sequence[LevelResult] = ()) -> SloCheck:
        """Every term on the measured requests, with the bootstrap confidence (deterministic: seeded)."""
        measured = [r for r in results if not r.warmup]
        n_ok = sum(r.ok for r in measured)
        columns = [[t.request_value(r) for r in measured] for t in self.terms]
        values = [_term_value(t, col) for t, col in zip(self.terms, columns, strict=True)]
        holds = [t.holds_for(v) for t, v in zip(self.terms, values, strict=True)]
        term_conf, all_conf = self._bootstrap(columns)
        checks = tuple(TermCheck(t, v, h, c) for t, v, h, c in zip(self.terms, values, holds, term_conf, strict=True))
        reason = next((tc.explain() for tc in checks if not tc.holds), "")
        bad = next(((lv, st) for lv in levels if (st := effective_status(lv))[0] != "ok"), None)
        if bad is not None:
            reason = f"the level at C={bad[0].concurrency} is {bad[1][0]}" + (f": {bad[1][1]}" if bad[1][1] else "")
        elif n_ok < MIN_OK_REQUESTS:
            reason = f"only {n_ok} of {len(measured)} requests completed (at least {MIN_OK_REQUESTS} needed)"
        if bad is not None or n_ok < MIN_OK_REQUESTS:
            return SloCheck(checks, False, 0.0, len(measured), n_ok, reason)
        return SloCheck(checks, all(holds), all_conf, len(measured), n_ok, reason)

    def _bootstrap(self, columns: list[list[float | None]]) -> tuple[list[float], float]:
        """(per-term share of resamples holding, share where all hold) over the requests, resampled together."""
        n = len(columns[0]) if columns else 0
        if n == 0:
            return [0.0] * len(columns), 0.0
        rng = random.Random(self.seed ^ zlib.crc32(self.text.encode()))
        term_hits = [0] * len(columns)
        all_hits = 0
        for _ in range(self.resamples):
            idx = resample_indices(rng, n)
            every = True
            for k, (t, col) in enumerate(zip(self.terms, columns, strict=True)):
                ok = t.holds_for(_term_value(t, [col[i] for i in idx]))
                term_hits[k] += ok
                every = every and ok
            all_hits += every
        return [h / self.resamples for h in term_hits], all_hits / self.resamples


def _term_value(term: SloTerm, column: Sequence[float | None]) -> float | None:
    """The term's statistic over one column of per-request values (failed requests are None)."""
    return statistic([v for v in column if v is not None], term.stat)


def parse_slo(text: str) -> Slo:
    """``ttft_p99<=2s,decode_p50>=20`` -> :class:`Slo`; raises :class:`SloError` naming the bad term."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(parts):
        raise SloError(f'--slo "{text}": empty term; write terms like ttft_p99<=2s,decode_p50>=20')
    return Slo(tuple(_parse_term(p) for p in parts), text=text)


def _parse_term(text: str) -> SloTerm:
    where = f'--slo "{text}"'
    m = _OP_RE.search(text)
    if m is None:
        raise SloError(f"{where}: no comparison (<=, <, >=, >); write <metric>_<stat><op><value>, e.g. ttft_p99<=2s")
    op = {"≤": "<=", "≥": ">="}.get(m.group(), m.group())
    name, rest = text[:m.start()].strip().lower(), text[m.end():].strip()
    metric, stat = _parse_name(where, name)
    num = _VALUE_RE.match(rest)
    if num is None:
        raise SloError(f"{where}: value {rest!r} is not a number (e.g. 2, 0.5, 150ms)")
    value, unit = float(num.group()), rest[num.end():].strip().lower()
    return SloTerm(metric, stat, op, _to_base(where, metric, value, unit), unit, text)


def _parse_name(where: str, name: str) -> tuple[str, str | None]:
    if name == "error_rate":
        return "error_rate", None
    if name.startswith("error_rate_"):
        raise SloError(f"{where}: error_rate takes no statistic (write error_rate<=1%)")
    metric, _, stat = name.rpartition("_")
    if not metric:
        metric, stat = name, ""
    if metric not in METRICS:
        raise SloError(f"{where}: metric {metric or name!r} unknown; one of {', '.join(METRICS)}")
    if not stat:
        raise SloError(f"{where}: {metric!r} needs a statistic: " + ", ".join(f"{metric}_{s}" for s in STATS))
    if stat not in STATS:
        raise SloError(f"{where}: statistic {stat!r} unknown; one of {', '.join(STATS)}")
    return metric, stat


def _to_base(where: str, metric: str, value: float, unit: str) -> float:
    """The value in seconds, tok/s or a fraction; a unit that does not fit the metric is refused."""
    if metric in LATENCY:
        if unit not in ("", "s", "ms"):
            raise SloError(f"{where}: unit {unit!r} is not a time unit; {metric} takes s or ms (default s)")
        return value / 1000 if unit == "ms" else value
    if metric == "decode":
        if unit not in ("", "tok/s"):
            raise SloError(f"{where}: unit {unit!r}: decode is in tok/s per user (no unit, or tok/s)")
        return value
    if unit not in ("", "%"):
        raise SloError(f"{where}: unit {unit!r}: error_rate is a fraction 0..1 or a percentage with %")
    rate = value / 100 if unit == "%" else value
    if rate > 1:
        raise SloError(f"{where}: error rate {value:g} is above 1; write a fraction (0.01) or a percentage (1%)")
    return rate
