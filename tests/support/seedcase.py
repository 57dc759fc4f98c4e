"""The field notes' A/B as recordings: tuned EP8 (peak 1538 tok/s at C=256) vs EP8 with EPLB (862).

The baseline swept the seeds' eight levels; the candidate only 1, 8, 64, 256 (the issue's
case: the two level lists differ, yet C=256 is C=256 in both).  ``b_status`` and
``b_distorted`` make one of B's levels failed/aborted/cut or distorted by the client, as the
load process records them.
"""

from __future__ import annotations

import random
from pathlib import Path

from kimitui.events import (
    ClientSummary,
    Event,
    LevelResult,
    LevelStarted,
    LevelStatus,
    Percentiles,
    ProfileSwitch,
    RequestResult,
    ServerInfo,
    SweepResult,
    SweepSpec,
    SweepStarted,
)
from kimitui.recording import write_recording

T0 = 1_764_498_000.0
TUNED_AGG = {1: 65.1, 8: 420.0, 32: 1010.0, 64: 1290.0, 96: 1420.0, 128: 1490.0, 192: 1530.0, 256: 1538.0}
EPLB_AGG = {1: 38.4, 8: 300.0, 64: 700.0, 256: 862.0}
MAX_TOKENS = 512
PROMPT_TOKENS = 23.0


def seed_spec(levels: list[int]) -> SweepSpec:
    return SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=levels, mode="sustained",
                     max_tokens=MAX_TOKENS)


def sweep_events(sweep_id: str, profile: str, knobs: dict, aggs: dict[int, float], *, t0: float, seed: int,
                 status: dict[int, tuple[LevelStatus, str, float | None]] | None = None,
                 distorted: dict[int, str] | None = None, from_profile: str | None = None,
                 spec: SweepSpec | None = None) -> list[Event]:
    """One recorded sweep: requests at ``agg / C`` tok/s each (±3 %), a LevelResult per level.

    ``status`` maps C -> (status, reason, agg it still measured); such a level's requests failed
    (``failed``) or were aborted/cancelled; ``distorted`` maps C -> the client's reason.
    """
    rng = random.Random(seed)
    status, distorted = status or {}, distorted or {}
    spec = spec or seed_spec(sorted(aggs))
    evs: list[Event] = [ProfileSwitch(t=t0, from_profile=from_profile, to_profile=profile, outcome="ok"),
                        ServerInfo(t=t0, args=dict(knobs)),
                        SweepStarted(t=t0, sweep_id=sweep_id, spec=spec, profile=profile)]
    t = t0
    for c in sorted(aggs):
        t += 10
        evs.append(LevelStarted(t=t, sweep_id=sweep_id, concurrency=c))
        n = max(6, c)
        default: tuple[LevelStatus, str, float | None] = ("ok", "", aggs[c])
        st, why, measured_agg = status.get(c, default)
        n_bad = n if st == "failed" else (n // 2 if st in ("aborted", "cut") else 0)
        error_class = {"failed": "http_status", "aborted": "aborted", "cut": "cancelled"}.get(st)
        per = aggs[c] / c
        rates = []
        for r in range(n):
            t += 0.01
            if r < n_bad:
                evs.append(RequestResult(t=t, sweep_id=sweep_id, request_id=f"{sweep_id}-c{c}-r{r}", concurrency=c,
                                         ok=False, error_class=error_class, status=503 if st == "failed" else None,
                                         error="HTTP 503: server overloaded" if st == "failed" else st,
                                         intended_send=t - 1, sent=t - 1))
                continue
            rate = per * (1 + rng.uniform(-0.03, 0.03))
            rates.append(rate)
            e2e = MAX_TOKENS / rate
            evs.append(RequestResult(t=t, sweep_id=sweep_id, request_id=f"{sweep_id}-c{c}-r{r}", concurrency=c,
                                     ok=True, intended_send=t - e2e, sent=t - e2e, ttft_s=0.05 + c * 0.001,
                                     e2e_s=e2e, prompt_tokens=int(PROMPT_TOKENS), completion_tokens=MAX_TOKENS,
                                     decode_tok_s=rate, e2e_tok_s=rate, tpot_s=1 / rate, max_gap_s=0.05))
        srt = sorted(rates)
        mid = srt[len(srt) // 2] if srt else None
        client = ClientSummary(samples=10, loop_lag_max_ms=730.0 if c in distorted else 4.0, loop_lag_p50_ms=2.0,
                               cpu_max_pct=99.0 if c in distorted else 30.0)
        evs.append(LevelResult(
            t=t + 0.5, sweep_id=sweep_id, concurrency=c, requests=n, ok=n - n_bad, failed=n_bad,
            failures={error_class: n_bad} if n_bad and error_class else {},
            errors={"http_status": "HTTP 503: server overloaded"} if st == "failed" else {},
            wall_s=MAX_TOKENS / per, output_tokens=MAX_TOKENS * (n - n_bad),
            agg_tok_s=measured_agg, steady_tok_s=None if measured_agg is None else measured_agg * 1.02,
            ttft=Percentiles(p50=0.05 + c * 0.001, p99=0.09 + c * 0.002) if mid else Percentiles(),
            tpot=Percentiles(p50=1 / mid) if mid else Percentiles(),
            decode_tok_s=Percentiles(p50=mid, p90=srt[int(len(srt) * 0.9)], p99=srt[-1]) if mid else Percentiles(),
            status=st, status_reason=why, prompt_tokens=Percentiles(p50=PROMPT_TOKENS) if mid else Percentiles(),
            client=client, client_distorted=distorted.get(c),
            stopped=f"error rate {n_bad}/{n} above 50%" if st == "failed" else None))
        if st == "failed":
            break
    evs.append(SweepResult(t=t + 1, sweep_id=sweep_id, levels=sorted(aggs),
                           outcome="stopped" if any(s[0] == "failed" for s in status.values()) else "completed"))
    return evs


def tuned_events(t0: float = T0, **kw) -> list[Event]:
    return sweep_events("s1", "ep8-tuned", {"ep_size": 8, "enable_eplb": False}, TUNED_AGG, t0=t0, seed=1, **kw)


def eplb_events(t0: float = T0 + 1_000, *, aggs: dict[int, float] | None = None, **kw) -> list[Event]:
    return sweep_events("s2", "ep8-eplb", {"ep_size": 8, "enable_eplb": True}, aggs or EPLB_AGG, t0=t0, seed=2,
                        from_profile="ep8-tuned", **kw)


def write_seed_pair(tmp: Path, **b_kw) -> tuple[Path, Path]:
    """(A, B) recording files on disk, as ``kimitui report A --vs B`` reads them; ``b_kw`` shape B."""
    tmp.mkdir(parents=True, exist_ok=True)
    a = tmp / "tuned.jsonl.gz"
    if not a.exists():
        a = write_recording(a, tuned_events())
    b = write_recording(tmp / f"eplb-{len(list(tmp.glob('eplb-*')))}.jsonl.gz", eplb_events(**b_kw))
    return a, b
