"""Straggler cause attribution (issue 18), cause by cause, on events as a host sends them.

Each test builds one C=1 level whose straggler stops (or slows) at GAP_AT, with the evidence SGLang
0.5.23 and NVML would give for one cause (tests/support/causecase.py), and checks the cause, how sure
kimitui is, the sentence and the level's loss.  Log formats: ``eplb/eplb_manager.py`` ``rebalance``;
``managers/scheduler.py`` ``update_running_batch`` (retraction); ``managers/scheduler_components/
metrics_reporter.py`` ``log_prefill_stats`` / ``log_decode_stats``; NVML clock-event reasons as
``kimitui/telemetry/agent.py`` names them.
"""

from __future__ import annotations

import pytest

from kimitui.analysis.causes.event_clock import LogClock
from kimitui.analysis.causes.sweep_causes import sweep_causes
from kimitui.analysis.causes.tail import explained, pct
from kimitui.analysis.causes.words import evidence_lines, headline
from kimitui.events import ClientHealth, ConnectionState, ServerHealth
from tests.support.causecase import (GAP_AT, GAP_S, back_to_back, decode, level_of, eplb_lines, level_events, line, normal, prefill, reading,
                                     result, samples)


def _run(evidence: list, slow=None, **kw):
    slow = slow if slow is not None else result()
    events = sorted([*evidence, *level_events(slow, **kw)], key=lambda e: e.t)
    sc = sweep_causes(events)
    return sc.attributions[slow.request_id], sc.losses[("s1", 1, 0)]


def _gpus(make, lag: float = 0.0):
    return samples(GAP_AT - 30, GAP_AT + GAP_S + 30, make, lag=lag)


def _eplb_gpus(t: float) -> list:
    inside = GAP_AT <= t <= GAP_AT + GAP_S
    return [reading(i, 9.0 if inside else 92.0, pcie=21e6 if inside else 2e6) for i in range(8)]


def test_the_seeds_c1_straggler_is_one_eplb_rebalance() -> None:
    a, loss = _run([*eplb_lines(GAP_AT, GAP_S), *_gpus(_eplb_gpus)])
    assert (a.cause, a.confidence) == ("eplb", "high")
    assert headline(a) == ("EPLB rebalance, 20.0 s, covers 99 % of the 20.0 s gap "
                           "(all 8 GPUs fell from 92 % to 9 % utilisation, PCIe 21 GB/s)")
    assert "rebalance end time=20.0s" in evidence_lines(a)[0]
    assert loss.main_cause == "eplb" and loss.share("eplb") > 0.95
    assert loss.sentence().endswith("% of the loss is one EPLB rebalance")
    assert loss.expected_tok_s is not None and loss.agg_tok_s is not None
    assert abs(loss.expected_tok_s - 61.0) < 1.0 and loss.agg_tok_s < 0.85 * loss.expected_tok_s
    # no count here: a sweep's rebalances are counted once, in each level's window (spec_eplb.eplb_line)
    assert explained([loss]) == f"explained by EPLB rebalances ({pct(loss.by_cause['eplb'] / loss.lost_s)} of the time lost)"


def test_a_rebalance_whose_end_has_not_come_is_quoted_as_so_far() -> None:
    starts = [e for e in eplb_lines(GAP_AT, GAP_S) if "rebalance start" in e.raw]
    a, _ = _run([*starts, decode(GAP_AT + GAP_S + 1)])  # a later event: the recording goes on, the end line never came
    assert a.cause == "eplb" and "so far" in headline(a)
    done, _ = _run(eplb_lines(GAP_AT, GAP_S))
    assert "so far" not in headline(done)


def test_kv_retraction_at_the_gap_start_until_the_re_prefill() -> None:
    ev = [decode(GAP_AT - 1, usage=0.97),
          line(GAP_AT, "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 9000, "
                       "#new_token_ratio: 0.5000 -> 0.6000"),
          prefill(GAP_AT + GAP_S - 0.3, 1200)]
    a, _ = _run(ev)
    assert (a.cause, a.confidence) == ("kv_retract", "high")
    assert "2 requests retracted" in evidence_lines(a)[0]


def test_a_prefill_surge_starves_decode() -> None:
    ev = [prefill(GAP_AT + k * 0.9, 8192, queue=6 - k // 4, pending=120_000 - k * 8192, thr=9100.0)
          for k in range(int(GAP_S / 0.9) + 1)]
    a, _ = _run(ev)
    assert (a.cause, a.confidence) == ("prefill_surge", "high")
    assert "new tokens" in a.shares[0].evidence[0] and "queue up to 6" in a.shares[0].evidence[0]


def test_a_prefill_line_ends_its_pass_and_its_rate_counts_the_time_since_the_last_line() -> None:
    """0.5.23 prints the line after the pass; its input throughput is tokens over the time since the previous
    Prefill line.  Back-to-back chunks show the real speed; a lone batch after 10 s of decode does not last 10 s."""
    from kimitui.analysis.causes.timeline import CauseTimeline
    chunks = [prefill(GAP_AT + k, 8192, thr=8192.0) for k in range(1, 4)]  # whole seconds: no placement shift
    lone = prefill(GAP_AT + 13, 4096, thr=4096 / 10.0)
    tl = CauseTimeline()
    for ev in [*chunks, lone]:
        tl.add(ev)
    eps = tl.episodes(GAP_AT - 5, GAP_AT + 20)
    surge = [e for e in eps if e.cause == "prefill_surge"]
    assert len(surge) == 2
    assert abs(surge[0].start - GAP_AT) < 0.05 and abs(surge[0].end - (GAP_AT + 3)) < 0.05
    assert abs(surge[1].end - (GAP_AT + 13)) < 0.05
    assert abs((surge[1].end - surge[1].start) - 0.5) < 0.05  # 4096 tokens at the 8192 tok/s the chunks showed


def test_eager_decode_slows_a_stretch_but_not_when_it_held_all_level() -> None:
    slow = result(gap_s=0.0, slow=4.0, slow_s=12.0)
    stretch = [decode(GAP_AT + k, graph=False) for k in range(1, 13)]
    around = [decode(GAP_AT - 20 + k, graph=True) for k in range(20)] + [decode(GAP_AT + 13 + k) for k in range(5)]
    a, _ = _run([*stretch, *around], slow=slow)
    assert a.cause == "graph_off" and a.confidence in ("high", "medium")
    assert "cuda graph: False" in evidence_lines(a)[0]
    everywhere = [decode(slow.sent - 300 + k, graph=False) for k in range(340)]
    b, _ = _run(everywhere, slow=slow)
    assert b.cause == "unknown" and any("held over most of the level" in n for n in b.notes)


def test_gpu_throttling_with_its_clock_event_reasons() -> None:
    def make(t: float) -> list:
        if GAP_AT <= t <= GAP_AT + GAP_S:
            return [reading(i, 99.0, clock=1005.0, reasons=["hw_thermal_slowdown"], temp=92.0) for i in range(8)]
        return normal(t)
    a, _ = _run(_gpus(make), slow=result(gap_s=0.0, slow=3.0, slow_s=GAP_S))
    assert (a.cause, a.confidence) == ("gpu_throttle", "high")
    assert "all 8 GPUs hw_thermal_slowdown, SM clock 1005 MHz (from 2430), 92 °C" in a.shares[0].evidence[0]


def test_one_slow_gpu_without_a_reason() -> None:
    def make(t: float) -> list:
        if GAP_AT <= t <= GAP_AT + GAP_S:
            return [reading(i, 100.0 if i == 3 else 45.0, clock=1200.0 if i == 3 else 2430.0, temp=88.0 if i == 3 else 66.0)
                    for i in range(8)]
        return normal(t)
    a, _ = _run(_gpus(make), slow=result(gap_s=0.0, slow=3.0, slow_s=GAP_S))
    assert (a.cause, a.confidence) == ("slow_gpu", "high")
    assert a.shares[0].evidence[0].startswith("GPU 3 SM clock 1200 MHz against 2430")


def test_pcie_saturation_and_eplb_wins_while_it_rebalances() -> None:
    def make(t: float) -> list:
        inside = GAP_AT <= t <= GAP_AT + GAP_S
        return [reading(i, 60.0 if inside else 92.0, pcie=55e6 if inside else 2e6) for i in range(8)]
    a, _ = _run(_gpus(make), slow=result(gap_s=0.0, slow=3.0, slow_s=GAP_S))
    assert (a.cause, a.confidence) == ("pcie_saturation", "high")
    assert "PCIe at 55 GB/s of 63 GB/s" in a.shares[0].evidence[0]
    b, _ = _run([*eplb_lines(GAP_AT, GAP_S), *_gpus(make)])
    assert b.cause == "eplb"  # the rebalance's own traffic is its evidence, not a second cause


def test_server_unhealthy_from_failing_health_polls() -> None:
    polls = [ServerHealth(t=GAP_AT - 30 + 5 * k, ok=not (GAP_AT <= GAP_AT - 30 + 5 * k <= GAP_AT + GAP_S), status=503)
             for k in range(20)]
    a, _ = _run(polls)
    assert (a.cause, a.confidence) == ("server_unhealthy", "high")
    assert "/health failed (HTTP 503)" in a.shares[0].evidence[0]


def test_the_client_itself_stalled() -> None:
    ticks = [ClientHealth(t=GAP_AT + GAP_S + 0.05, loop_lag_ms=GAP_S * 1000 + 50, cpu_pct=100.0)]
    a, _ = _run(ticks)
    assert (a.cause, a.confidence) == ("client_lag", "high")
    assert "event loop ran 20.05 s late (CPU 100 % of a core)" in a.shares[0].evidence[0]


def test_a_lost_ssh_link() -> None:
    ev = [ConnectionState(t=GAP_AT - 0.2, state="lost", detail="Connection lost"),
          ConnectionState(t=GAP_AT + 1, state="reconnecting", attempt=1),
          ConnectionState(t=GAP_AT + GAP_S + 0.1, state="connected")]
    a, _ = _run(ev)
    assert (a.cause, a.confidence) == ("link_lost", "high")


def test_nothing_overlaps_so_unknown_never_a_guess() -> None:
    ev = [decode(GAP_AT - 5 + k) for k in range(3)] + _gpus(normal)
    a, loss = _run(ev)
    assert (a.cause, a.confidence) == ("unknown", "none")
    assert headline(a).startswith("Unknown: nothing kimitui saw covers the 20.0 s gap")
    assert loss.main_cause == "unknown"
    assert "unexplained stragglers" in loss.sentence()
    assert explained([loss]) is None


def test_two_causes_share_a_gap() -> None:
    half = GAP_S / 2
    ev = [*eplb_lines(GAP_AT, half),
          ServerHealth(t=GAP_AT + half - 0.01, ok=True),
          *[ServerHealth(t=GAP_AT + half + 1 + k, ok=False, status=503) for k in range(int(half) - 1)],
          ServerHealth(t=GAP_AT + GAP_S, ok=True)]
    a, _ = _run(ev)
    assert {s.cause for s in a.shares} >= {"eplb", "server_unhealthy"}
    assert a.confidence in ("medium", "low") and 0.4 < a.coverage < 0.6
    words = headline(a)
    assert words.startswith(("Likely ", "Possibly ")) and "; also " in words
    assert "EPLB rebalance" in words and "Server unhealthy" in words


@pytest.mark.parametrize("lag", [0.0, 3.0, 8.0])
def test_a_link_that_delivers_seconds_late_moves_nothing(lag: float) -> None:
    """Log lines and GPU samples arrive ``lag`` seconds late: the lines' own stamps and the samples'
    ``host_t`` put them back; a busy log (a decode line every 0.3 s) lets the lag be read off."""
    chatter = [decode(GAP_AT - 60 + 0.3 * k + 0.01 * (k % 7), lag=lag) for k in range(200)
               if not GAP_AT <= GAP_AT - 60 + 0.3 * k <= GAP_AT + GAP_S]
    ev = [*chatter, *eplb_lines(GAP_AT, GAP_S, lag=lag), *_gpus(_eplb_gpus, lag=lag)]
    a, _ = _run(ev)
    assert (a.cause, a.confidence) == ("eplb", "high")
    assert a.coverage > 0.95


def test_log_clock_reads_the_lag_and_the_hosts_time_zone() -> None:
    clock = LogClock()
    placed = [clock.place(line(1000.0 + 0.37 * k, "Decode batch, #running-req: 1", lag=4.0, zone_s=3600.0))
              for k in range(60)]
    assert clock.zone_s == -3600.0 and 3.9 < clock.lag_s <= 4.05
    assert all(abs(p - (1000.0 + 0.37 * k)) < 0.1 for k, p in enumerate(placed[10:], start=10))


def test_a_health_check_held_by_a_stuck_scheduler() -> None:
    """0.5.23 ``http_server.py`` ``health_generate`` answers once the scheduler answers: a 200 after 19 s is a
    scheduler that stood still since the poll before it."""
    polls = [ServerHealth(t=GAP_AT - 10 + 2 * k, ok=True, latency_s=0.01) for k in range(5)]
    polls.append(ServerHealth(t=GAP_AT + GAP_S, ok=True, latency_s=GAP_S - 1.0))
    a, _ = _run(polls)
    assert (a.cause, a.confidence) == ("server_unhealthy", "high")
    assert "/health took 19.0 s to answer" in a.shares[0].evidence[0]


def test_the_seeds_c1_level_three_requests_one_of_them_stalled_by_a_rebalance() -> None:
    """The field notes' ep8-v2 C=1 run: three requests of 512 tokens, one of them at 7.7 tok/s (66.6 s, a
    58 s stall at the level's ~61 tok/s); the stall was an EPLB rebalance, which the operator could not tell."""
    stall = 512 / 7.7 - 512 / 61.0
    results = back_to_back(3, {1: stall})
    events = sorted([*level_of(results), *eplb_lines(results[1].sent + 2.0, stall)], key=lambda e: e.t)
    sc = sweep_causes(events)
    a = sc.attributions["s1-c1-r1"]
    assert (a.cause, a.confidence) == ("eplb", "high")
    loss = sc.losses[("s1", 1, 0)]
    assert loss.sentence() == "aggregate 18.4 tok/s vs 61.0 expected: 99 % of the loss is one EPLB rebalance"


def test_every_gpu_idle_with_requests_running_is_a_server_that_stood_still() -> None:
    """A stuck scheduler the health polls missed: the Decode line said 4 running, then every GPU idled."""
    def make(t: float) -> list:
        return [reading(i, 0.0 if GAP_AT <= t <= GAP_AT + GAP_S else 92.0) for i in range(8)]
    ev = [decode(GAP_AT - 0.5 - k, running=4) for k in range(3)] + _gpus(make)
    a, _ = _run(ev)
    assert (a.cause, a.confidence) == ("server_unhealthy", "medium")  # a weak sign alone: "Likely"
    assert "all 8 GPUs idle (≤ 5 %) with 4 requests running" in a.shares[0].evidence[0]
    assert headline(a).startswith("Likely Server unhealthy")
    b, _ = _run([*ev, *eplb_lines(GAP_AT, GAP_S)])
    assert b.cause == "eplb" and b.confidence == "high"  # what the server said wins over the weak sign
