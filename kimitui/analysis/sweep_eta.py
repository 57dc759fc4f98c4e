"""How long a sweep will take: per level and overall, from what it has measured so far.

A full default sweep (eight levels, 512 tokens) takes about a quarter of an hour, so the
cockpit says how far it is and how long is left.  The model, in the order it is used:

* **Requests per level** are what the load process will measure (the spec says,
  :meth:`kimitui.events.SweepSpec.level_requests`); a ``duration_s`` sweep has no count (the
  level runs for that long).  ``repeats`` runs the whole
  level list again; warm-up requests are added to each level's work.
* **The running level** (a ``SweepProgress`` snapshot): its live aggregate rate is
  ``level_tokens / level_elapsed_s`` (in-flight tokens included, so it has a figure before the
  first request ends), and ``ETA = (requests x tokens per request - level_tokens) / rate``.
  Until a request has finished the figure is marked estimated (``~``).
* **Levels not run yet**: a level's seconds are ``requests x tokens per request / agg(C)``,
  with ``agg(C) = C / s(C)`` and ``s(C)`` the seconds per token of one request (1 / its tok/s).
  ``s`` grows as a power of C: the seeds' EP8 figures (65 tok/s at C=1, 345 at C=16, 1538 at
  C=256) give ``s(C) = s(1) x C^0.40`` and ``C^0.43``, the simulator ``C^0.33`` to ``C^0.45``.
  So ``s`` is interpolated between the measured levels on log-log axes, extrapolated past
  the largest on the slope through the two largest (kept within 0..1: throughput never falls),
  and with one measured level it follows ``SEED_EXPONENT``.  With nothing measured the seeds'
  figure is the prior (``SEED_C1_TOK_S`` at C=1), scaled by the simulated host's time scale:
  it is labelled as such.  The whole spec's estimate adds ``START_S`` (the load process
  starting, prompts fitted) to its levels.
* Tokens per request: the finished levels' mean (``output_tokens / ok``), else ``max_tokens``.

Example (tested): levels 1, 8, 64, sustained, 128 tokens, seeds' prior: C=1 is 5 requests x 128
tokens / 65 tok/s = 9.8 s; C=8 is 16 x 128 / 217 tok/s = 9.4 s; C=64 is 128 x 128 / 725 tok/s =
22.6 s: 44 s with the start.  The default sweep (eight levels to 256, 512 tokens) comes to 12.8
minutes.  On the simulator at 2x the quick sweep took 24.4 s for an estimate of 22.9 s.

Pure: events in, numbers out (the TUI draws them; ``kimitui sweep`` may print them).
Times are wall-clock seconds, what the operator waits, on a scaled simulated host too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kimitui.events import LevelResult, SweepProgress, SweepSpec

SEED_C1_TOK_S = 65.0
"""The seeds' single-request decode rate (Kimi K2.6, EP8): the prior before anything is measured."""

SEED_EXPONENT = 0.42
"""``s(C) / s(1) = C ** SEED_EXPONENT``: how one request slows as C grows (the seeds' EP8 curve)."""

START_S = 2.0
"""Wall seconds before a sweep's first level starts (the load process, prompt calibration)."""


def level_requests(spec: SweepSpec, concurrency: int) -> int | None:
    """Measured requests the load process runs at this level; None when it runs for ``duration_s``
    (the rule is the spec's own, :meth:`kimitui.events.SweepSpec.level_requests`)."""
    return spec.level_requests(concurrency)


def plan(spec: SweepSpec) -> list[tuple[int, int]]:
    """(C, repeat) in the order the sweep runs them: the level list, ``repeats`` times."""
    return [(c, r) for r in range(spec.repeats) for c in spec.levels]


@dataclass(frozen=True)
class RateModel:
    """Seconds per token of one request, ``s(C)``, from measured (C, aggregate tok/s) points."""

    points: tuple[tuple[int, float], ...]
    """(C, s) sorted by C, one per C."""
    basis: str
    """Where the figures come from, in words ("measured", "the seeds' figures")."""

    @classmethod
    def measured(cls, agg_points: Iterable[tuple[int, float | None]], basis: str = "measured") -> RateModel | None:
        """From (C, agg tok/s) pairs; the last pair per C wins; None without one usable pair."""
        per: dict[int, float] = {}
        for c, agg in agg_points:
            if agg is not None and agg > 0 and c > 0 and math.isfinite(agg):
                per[c] = c / agg
        return cls(tuple(sorted(per.items())), basis) if per else None

    @classmethod
    def seeds(cls, time_scale: float = 1.0) -> RateModel:
        """The prior: the seeds' C=1 rate, faster on a simulated host running ``time_scale`` x."""
        return cls(((1, 1.0 / (SEED_C1_TOK_S * max(time_scale, 1e-9))),), "the seeds' figures")

    def seconds_per_token(self, c: int) -> float:
        """``s(C)``: log-log interpolation between the measured levels, a power law outside them."""
        pts = self.points
        if len(pts) == 1:
            c1, s1 = pts[0]
            return s1 * (c / c1) ** SEED_EXPONENT
        if c <= pts[0][0]:
            (c0, s0), (c1, s1) = pts[0], pts[1]
        elif c >= pts[-1][0]:
            (c0, s0), (c1, s1) = pts[-2], pts[-1]
        else:
            (c0, s0), (c1, s1) = next((a, b) for a, b in zip(pts, pts[1:]) if c <= b[0])
        slope = min(1.0, max(0.0, math.log(s1 / s0) / math.log(c1 / c0)))
        return s1 * (c / c1) ** slope

    def agg(self, c: int) -> float:
        """Aggregate tok/s expected at concurrency ``c``."""
        return c / self.seconds_per_token(c)


def tokens_per_request(spec: SweepSpec, levels: Sequence[LevelResult]) -> float:
    """The finished levels' mean output per request, else ``max_tokens`` (ignore_eos makes it exact)."""
    ok = sum(lv.ok for lv in levels)
    tokens = sum(lv.output_tokens for lv in levels)
    return tokens / ok if ok > 0 and tokens > 0 else float(spec.max_tokens)


def level_seconds(spec: SweepSpec, c: int, rates: RateModel, tpr: float) -> float:
    """Wall seconds a level not yet run should take (see the module docstring)."""
    per_request_s = tpr * rates.seconds_per_token(c)
    n = level_requests(spec, c)
    if n is None:  # timed: the span, then what is in flight drains (half a request on average)
        return (spec.duration_s or 0.0) + per_request_s / 2 + spec.warmup_requests * per_request_s / c
    n += spec.warmup_requests
    seconds = math.ceil(n / c) * per_request_s if spec.mode == "burst" else n * per_request_s / c
    if spec.mode == "rate" and spec.rate_rps:
        seconds = max(seconds, n / spec.rate_rps)
    return seconds


def spec_seconds(spec: SweepSpec, rates: RateModel, tpr: float | None = None) -> float:
    """The whole spec's expected wall seconds (the sweep form shows it before starting)."""
    tpr = float(spec.max_tokens) if tpr is None else tpr
    return START_S + sum(level_seconds(spec, c, rates, tpr) for c, _ in plan(spec))


def spec_requests(spec: SweepSpec) -> int | None:
    """Measured requests over the whole spec; None for a timed (``duration_s``) sweep."""
    counts = [level_requests(spec, c) for c, _ in plan(spec)]
    return None if any(n is None for n in counts) else sum(n for n in counts if n is not None)


@dataclass(frozen=True)
class LevelEta:
    """The running level: requests done/total and the seconds left."""

    concurrency: int
    done: int
    failed: int
    total: int | None
    eta_s: float | None
    estimated: bool
    """True before any request of the level finished (the rate is from tokens so far or the model)."""


@dataclass(frozen=True)
class SweepEta:
    """The whole sweep: what is done, what is left, and how long that should take."""

    levels_done: int
    levels_total: int
    requests_done: int
    requests_total: int | None
    elapsed_s: float
    eta_s: float | None
    estimated: bool
    """True while levels not yet run count in the ETA (they are modelled), or no request finished."""
    basis: str
    running: LevelEta | None
    finished: bool
    outcome: str | None = None
    """How a finished sweep ended (``completed``, ``stopped``, ``failed``), when known."""


def running_level(spec: SweepSpec, progress: SweepProgress, rates: RateModel | None, tpr: float,
                  age_s: float = 0.0) -> LevelEta:
    """The running level from its latest snapshot, ``age_s`` seconds old."""
    c = progress.concurrency
    total = level_requests(spec, c)
    elapsed = progress.level_elapsed_s + age_s
    finished = progress.done + progress.failed
    eta: float | None = None
    if progress.level_tokens > 0 and progress.level_elapsed_s > 0:
        rate = progress.level_tokens / progress.level_elapsed_s
        if total is not None:
            eta = max(0.0, total * tpr - progress.level_tokens) / rate - age_s
        else:
            eta = (spec.duration_s or 0.0) - elapsed + tpr * c / rate / 2
    elif rates is not None:
        eta = level_seconds(spec, c, rates, tpr) - elapsed
    return LevelEta(c, progress.done, progress.failed, total, None if eta is None else max(0.0, eta), finished == 0)


def sweep_eta(spec: SweepSpec, levels: Sequence[LevelResult], progress: SweepProgress | None,
              elapsed_s: float, *, finished: bool = False, time_scale: float = 1.0,
              age_s: float = 0.0, outcome: str | None = None) -> SweepEta:
    """Progress and ETA of a sweep: its spec, finished levels, latest snapshot, seconds since it began.

    ``outcome`` (a finished sweep's) implies ``finished``."""
    finished = finished or outcome is not None
    tpr = tokens_per_request(spec, levels)
    ok_levels = [(lv.concurrency, lv.agg_tok_s) for lv in levels if lv.status == "ok"]
    rates = RateModel.measured(ok_levels)
    if rates is None and progress is not None and progress.level_tokens > 0 and progress.level_elapsed_s > 0:
        rates = RateModel.measured([(progress.concurrency, progress.level_tokens / progress.level_elapsed_s)],
                                   "the running level")
    if rates is None:
        rates = RateModel.seeds(time_scale)
    done_keys = {(lv.concurrency, lv.repeat) for lv in levels}
    running = running_level(spec, progress, rates, tpr, age_s) if progress is not None and not finished else None
    pending = [(c, r) for c, r in plan(spec) if (c, r) not in done_keys]
    if running is not None and pending and pending[0][0] == running.concurrency:
        pending = pending[1:]
    requests_done = sum(lv.requests for lv in levels) + (running.done + running.failed if running else 0)
    eta: float | None = None
    if not finished:
        later = sum(level_seconds(spec, c, rates, tpr) for c, _ in pending)
        if running is None:
            eta = later
        elif running.eta_s is not None:
            eta = running.eta_s + later
    estimated = rates.basis != "measured" or bool(pending) or (running is not None and running.estimated)
    return SweepEta(len(done_keys), len(plan(spec)), requests_done, spec_requests(spec), elapsed_s,
                    eta, estimated, rates.basis, running, finished, outcome)


def duration(seconds: float | None) -> str:
    """A wall duration for the operator: ``41s``, ``4m12s``, ``1h02m``; ``-`` for none."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta_text(seconds: float | None, estimated: bool) -> str:
    """``ETA 4m12s``, ``ETA ~4m12s`` (estimated), or ``ETA after first tokens`` when there is no basis."""
    if seconds is None:
        return "ETA after first tokens"
    return f"ETA {'~' if estimated else ''}{duration(seconds)}"


def summary(eta: SweepEta, width: int | None = None) -> str:
    """One line, the ETA first: ETA, levels, requests, elapsed (the level panel's subtitle).

    With ``width``, the longest of three wordings that fits (the ETA is always kept).  A finished
    sweep says how it ended and counts only what ran (a stopped sweep's total is not owed)."""
    total = f"/{eta.requests_total:,}" if eta.requests_total is not None and not eta.finished else ""
    reqs = f"{eta.requests_done:,}{total}"
    head = [eta.outcome or "done"] if eta.finished else [eta_text(eta.eta_s, eta.estimated)]
    forms = [
        head + [f"levels {eta.levels_done}/{eta.levels_total}", f"requests {reqs}",
                f"{duration(eta.elapsed_s)} elapsed"],
        head + [f"{eta.levels_done}/{eta.levels_total} levels", f"{reqs} req", duration(eta.elapsed_s)],
        head + [f"{eta.levels_done}/{eta.levels_total} levels"],
    ]
    texts = [" · ".join(parts) for parts in forms]
    if width is None:
        return texts[0]
    return next((t for t in texts if len(t) <= width), texts[-1])
