"""What the causes cost ``kimitui report`` on an hour-long recording (issue 18).

Before issue 18 a report never parsed a GPU sample or a log line other than EPLB's ("an hour's file in
well under a second").  Attributing stragglers needs both.  On bench_recording's hour (8 GPUs at 4 Hz
for 60 minutes, SGLang's decode lines, a sweep of 8 levels in the middle 12 minutes; its C=1 straggler
stopped 9.8 s by an EPLB rebalance, as SGLang 0.5.23's eplb/eplb_manager.py EPLBManager.rebalance logs it
on every rank) this prints the report's time as it reads the causes' evidence four ways:

* none: the report's own kinds and the EPLB lines only, as before issue 18 (no GPU sample, no other line);
* all: every event of the kinds a cause timeline reads;
* byte test: log lines of the timeline's kinds only (a byte test on the raw line), every GPU sample;
* now: that, and GPU samples and log lines only near the sweeps (kimitui.report.cause_evidence);

and checks that the last gives the same causes and losses as reading everything.  Goals: the report of an
hour with its causes "well under a second" (<= 1 s, the best of ``--runs``; 0.67 s in docs/stragglers.md), and
the same causes and losses as reading everything; PASS/FAIL each, exit 1 on FAIL.

Run:  .venv/bin/python bench/bench_report_causes.py [--minutes 60] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recording import build_hour  # noqa: E402
from kimitui.analysis.causes.catalogue import Confidence  # noqa: E402
from kimitui.analysis.causes.sweep_causes import CAUSE_KINDS  # noqa: E402
import time as clock  # noqa: E402
from kimitui.events import Event, LogLine, RequestResult  # noqa: E402
from kimitui.sglang.log import to_event  # noqa: E402
from kimitui.recording import RecordingIndex, write_recording  # noqa: E402
from kimitui.report.cause_evidence import CAUSE_LINE, cause_events, sweep_spans  # noqa: E402
from kimitui.report.sweep_summary import REPORT_KINDS, SweepRun, sweeps_of  # noqa: E402

STALL_AT_S, STALL_S = 5.0, 9.8
"""The C=1 straggler (bench_recording's ``sw1-1-0``) stops this long, this far after it was sent."""


def _stamp(t: float) -> str:
    return clock.strftime("%Y-%m-%d %H:%M:%S", clock.localtime(t))


def with_stall(events: list[Event]) -> list[Event]:
    """bench_recording's hour with its C=1 straggler really stopped by an EPLB rebalance."""
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, RequestResult) and ev.request_id == "sw1-1-0" and ev.chunk_offsets_ms:
            at = STALL_AT_S * 1000
            offs = [o + STALL_S * 1000 if o > at else o for o in ev.chunk_offsets_ms]
            e2e = offs[-1] / 1000
            ev = ev.model_copy(update={"chunk_offsets_ms": offs, "e2e_s": e2e, "t": ev.sent + e2e,
                                       "decode_tok_s": (len(offs) - 1) / (e2e - offs[0] / 1000),
                                       "max_gap_s": STALL_S, "max_gap_at": ev.sent + STALL_AT_S})
            start = ev.sent + STALL_AT_S
            for k in range(8):
                for t, msg in ((start, "rebalance start"), (start + STALL_S, f"rebalance end time={STALL_S:.3f}s")):
                    out.append(to_event(f"[{_stamp(t)} TP{k} EP{k}] [EPLBManager] {msg}", host="", source="file",
                                        t=t + k * 0.001))
        out.append(ev)
    return sorted(out, key=lambda e: e.t)


Reader = Callable[[RecordingIndex, list[Event]], list[Event]]


def read_none(index: RecordingIndex, _: list[Event]) -> list[Event]:
    """The EPLB lines only (what a report read before issue 18)."""
    return [ev for i, kind in enumerate(index.kinds) if kind == "log_line" and b'"eplb"' in (index.raw(i) or b'"eplb"')
            and isinstance(ev := index.event(i), LogLine) and ev.line_kind == "eplb"]


def read_all(index: RecordingIndex, _: list[Event]) -> list[Event]:
    return list(index.events_of(CAUSE_KINDS))


def read_byte_test(index: RecordingIndex, _: list[Event]) -> list[Event]:
    out: list[Event] = []
    for i, kind in enumerate(index.kinds):
        if kind not in CAUSE_KINDS or (kind == "log_line" and CAUSE_LINE.search(index.raw(i) or b"") is None):
            continue
        if (ev := index.event(i)) is not None:
            out.append(ev)
    return out


def read_now(index: RecordingIndex, report: list[Event]) -> list[Event]:
    return cause_events(index, sweep_spans(report))


def report(path: Path, reader: Reader) -> tuple[float, int, list[SweepRun]]:
    """``summarize``'s work with this reader: (seconds, events parsed, the sweeps)."""
    t = time.perf_counter()
    index = RecordingIndex.open(path)
    events = list(index.events_of(REPORT_KINDS))
    events = sorted([*events, *reader(index, events)], key=lambda e: e.t)
    runs = sweeps_of(events, str(path))
    return time.perf_counter() - t, index.parsed, runs


def causes_of(runs: list[SweepRun]) -> tuple[dict[str, tuple[str, Confidence, float]], dict[tuple[str, int, int], str]]:
    attrs = {rid: (a.cause, a.confidence, round(a.coverage, 6)) for r in runs for rid, a in r.attributions.items()}
    losses = {(r.sweep_id, c, rep): loss.sentence() for r in runs for (c, rep), loss in r.losses.items()}
    return attrs, losses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=3, help="best of this many runs per way")
    args = ap.parse_args()
    events = with_stall(build_hour(args.minutes))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_recording(Path(tmp) / "hour.jsonl.gz", events)
        del events
        print(f"{args.minutes:g} min recording, {path.stat().st_size / 1e6:.1f} MB gzip; best of {args.runs} runs")
        seen = {}
        for name, reader in (("none (before issue 18)", read_none), ("all cause kinds", read_all),
                             ("byte test on log lines", read_byte_test), ("now: byte test + sweep windows", read_now)):
            best, parsed, runs = min((report(path, reader) for _ in range(args.runs)), key=lambda x: x[0])
            seen[name] = causes_of(runs)
            causes = sorted({c for c, _, _ in seen[name][0].values()})
            print(f"  {name:32s} {best:6.3f} s  ({parsed} lines parsed; straggler causes: {', '.join(causes) or '-'})")
            now_s = best
        same = seen["now: byte test + sweep windows"] == seen["all cause kinds"]
        print(f"  windows change no cause or loss against reading everything: {'yes' if same else 'NO'}")
    from benchutil import exit_on, verdict  # bench/ is on sys.path (above)

    exit_on([verdict(f"report of {args.minutes:g} min with causes", f"{now_s:.3f} s (best of {args.runs})", "<= 1 s",
                     now_s <= 1.0),
             verdict("causes and losses, sweep windows vs everything", "same" if same else "different", "same", same)])


if __name__ == "__main__":
    main()
