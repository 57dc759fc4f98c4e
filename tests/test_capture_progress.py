"""A CUDA-graph capture as the operator follows it (issue 32): the swap's bar rises with SGLang's own
``Capturing batches ... i/52`` redraws, and the log holds one capture line, not 52."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from kimitui.host.lines import LineSplitter
from kimitui.launcher.readiness import Readiness
from kimitui.sglang.log import capture_progress, parse_line
from kimitui.sim.logfmt import SimLog
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.scheduler import SimClock
from kimitui.sim.settings import settings_from_profile
from kimitui.sim.startup import BootState, run_startup
from kimitui.tui.model.log_ring import LogRing


class _Chunks:
    """A log file as ``tail -F`` hands it on: each write of the server, as it came."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, text: str) -> int:
        self.writes.append(text.encode())
        return len(text)

    def flush(self) -> None:
        pass


def _simulated_start() -> list[bytes]:
    """The simulator's start-up (TP8, fast), each write as its own chunk."""
    sim = settings_from_profile({"name": "ep8", "tp_size": 8, "ep_size": 8, "sim": {"time_scale": 2000.0}})
    out = _Chunks()
    asyncio.run(run_startup(sim, PerfModel(sim), SimLog(sim, out), SimClock(sim.time_scale),  # type: ignore[arg-type]
                            BootState()))
    return out.writes


def test_the_swap_bar_rises_with_each_capture_redraw_before_the_bar_ends() -> None:
    readiness, lines = Readiness(), LineSplitter()
    seen: list[tuple[str, float | None]] = []
    for chunk in _simulated_start():
        for line in lines.feed(chunk):
            step = readiness.feed(line)
            if step is not None and step.phase == "cuda_graph":
                seen.append((step.message, step.fraction))
    fractions = [f for _, f in seen if f is not None]
    assert len(fractions) >= 50, seen  # one step per graph, not one at the bar's end
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert ("capturing CUDA graphs: 26 of 52", 0.5) in seen


def test_a_bar_split_anywhere_gives_the_same_redraws() -> None:
    data = b"".join(_simulated_start())
    whole = LineSplitter().feed(data)
    assert sum(1 for line in whole if capture_progress(line)) == 53  # 0/52 ... 52/52, each its own line
    for size in (1, 7, 64, 1000):
        split = LineSplitter()
        got = [line for at in range(0, len(data), size) for line in split.feed(data[at:at + size])]
        assert got + split.flush() == whole


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"\r", b"\r\r", "\u00e9".encode()]), max_size=60),
       st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_redraws_split_the_same_in_any_chunking(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    whole = LineSplitter()
    expected = whole.feed(data) + whole.flush()
    split = LineSplitter()
    got: list[str] = []
    pos, i = 0, 0
    while pos < len(data):
        got += split.feed(data[pos:pos + cuts[i % len(cuts)]])
        pos, i = pos + cuts[i % len(cuts)], i + 1
    assert got + split.flush() == expected


def test_the_log_ring_holds_one_capture_line_updated_in_place() -> None:
    ring = LogRing(100)
    for n, line in enumerate(LineSplitter().feed(b"".join(_simulated_start()))):
        parsed = parse_line(line)
        ring.add(float(n), parsed.severity, parsed.line_kind, line)
    captures = [e for e in ring.entries if "Capturing" in e.text]
    assert [e.text for e in captures] == ["Capturing batches 52/52 (bs=1)"]
    texts = [e.text for e in ring.entries]
    at = texts.index(captures[0].text)
    assert "Capture cuda graph bs" in texts[at - 1] and "Capture cuda graph end" in texts[at + 1]


def test_a_bar_that_came_as_one_line_is_one_entry_at_its_last_redraw() -> None:
    """The cockpit's follower (``sed`` marks whole lines) hands on the bar with its 53 redraws in one line."""
    data = b"".join(_simulated_start())
    bar = next(line for line in data.decode().split("\n") if line.count("\r") > 50)
    ring = LogRing(10)
    parsed = parse_line(bar)
    entry = ring.add(1.0, parsed.severity, parsed.line_kind, bar)
    assert entry.text == "Capturing batches 52/52 (bs=1)" and "\r" not in entry.text


def test_the_next_bar_is_an_entry_of_its_own() -> None:
    """A piecewise capture's ``Capturing num tokens`` bar, then the decode graphs' ``Capturing batches``."""
    ring = LogRing(10)
    for what, size, done in (("num tokens (num_tokens", 4096, 1), ("num tokens (num_tokens", 2048, 2),
                             ("batches (bs", 8, 1), ("batches (bs", 4, 2)):
        line = f"Capturing {what}={size} avail_mem=9.00 GB):  50%|#####     | {done}/2 [00:01<00:01,  1.00it/s]"
        ring.add(1.0, "info", "startup", line)
    assert [e.text for e in ring.entries] == ["Capturing num tokens 2/2 (num_tokens=2048)",
                                              "Capturing batches 2/2 (bs=4)"]


def test_the_weights_shards_bar_is_one_entry_too() -> None:
    """The simulator's start prints 16 ``Loading safetensors checkpoint shards`` redraws (the real server's
    tqdm bar, one line each): the log holds one entry, at its last redraw, between the lines around it."""
    ring = LogRing(200)
    for n, line in enumerate(LineSplitter().feed(b"".join(_simulated_start()))):
        parsed = parse_line(line)
        ring.add(float(n), parsed.severity, parsed.line_kind, line)
    shards = [e for e in ring.entries if "checkpoint shards" in e.text]
    assert len(shards) == 1 and "100% Completed | 64/64" in shards[0].text, [e.text for e in shards]
    texts = [e.text for e in ring.entries]
    assert "Load weight end" in texts[texts.index(shards[0].text) + 1]


def test_two_bars_of_shards_one_after_the_other_stay_two_entries() -> None:
    ring = LogRing(10)
    for what in ("Loading safetensors checkpoint shards", "Loading draft model checkpoint shards"):
        for done in (1, 2):
            ring.add(1.0, "info", "startup", f"{what}: {done * 50}% Completed | {done}/2 [00:01<00:01, 1.00it/s]")
    assert [e.text.split(":")[0] for e in ring.entries] == ["Loading safetensors checkpoint shards",
                                                             "Loading draft model checkpoint shards"]
    assert all("2/2" in e.text for e in ring.entries)


def test_every_ranks_copy_of_the_shards_bar_is_one_entry_with_the_rank_set() -> None:
    """A TP8 server prints the bar once per rank: one entry, its ranks merged, at the last redraw."""
    ring = LogRing(50)
    for done in (24, 28, 32):
        for rank in range(8):
            ring.add(1.0 + done, "info", "startup",
                     f"[2026-12-06 10:21:{done} TP{rank} EP{rank}] Loading safetensors checkpoint shards: "
                     f"{done * 100 // 64}% Completed "
                     f"| {done}/64 [00:02<00:03, 10.52it/s]")
    assert len(ring.entries) == 1, [e.text for e in ring.entries]
    (entry,) = ring.entries
    assert "32/64" in entry.text and "TP0–7" in entry.text, entry.text
