"""Readiness from the log: steps in order, glued tqdm lines, the first fatal error."""

from kimitui.launcher.readiness import Readiness

READY = "[2026-11-30 10:00:05] The server is fired up and ready to roll!"


def test_ready_line_glued_onto_a_capture_bar_is_not_missed():
    r = Readiness()
    glued = ("Capturing batches (bs=1 avail_mem=20.12 GB): 100%|██████████| 52/52 [00:09<00:00,  5.6it/s]\r"
             + READY)
    step = r.feed(glued)
    assert r.ready and step is not None and step.phase == "ready"


def test_an_oom_is_fatal_and_kept_with_its_line():
    r = Readiness()
    r.feed("[2026-11-30 10:00:01 TP0] Load weight begin. avail mem=94.50 GB")
    oom = "[2026-11-30 10:00:02 TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    r.feed(oom)
    assert r.fatal == "oom" and r.fatal_line() == oom and not r.ready


def test_a_crash_during_weight_load_quotes_the_exception_line_not_the_traceback_header():
    """Issue 13: the reason was "Scheduler hit an exception: Traceback (most recent call last):"."""
    from kimitui.sim.faults import crash_load_lines

    first, rest = crash_load_lines()
    r = Readiness()
    r.feed(f"[2025-12-09 11:20:00 TP3] {first}")
    for line in rest:
        r.feed(line)
    r.feed("[2025-12-09 11:20:00] Received sigquit from a child process. It usually means the child failed.")
    assert r.fatal == "scheduler_exception"
    assert r.fatal_quote() == "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"
    # a fatal line that is not a traceback header is quoted as it is
    oom = Readiness()
    oom.feed("[2025-12-09 11:20:00 TP0] RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert oom.fatal_quote().endswith("Tried to allocate 2.00 GiB")


def test_what_readiness_keeps_for_messages_is_bounded() -> None:
    """A crash loop of huge fatal lines must not grow the readiness state (issue 13: bounded input)."""
    from kimitui.launcher.readiness import MAX_FATAL_LINES, Readiness
    from kimitui.sglang.log import MAX_LINE_CHARS

    r = Readiness()
    for i in range(500):
        r.feed(f"[2026-12-01 10:00:{i % 60:02d} TP0] Scheduler hit an exception: {'x' * 100_000}")
    assert len(r.fatal_lines) == MAX_FATAL_LINES
    assert max(len(x) for x in [*r.fatal_lines, *r.recent, *r.around_fatal]) <= MAX_LINE_CHARS
