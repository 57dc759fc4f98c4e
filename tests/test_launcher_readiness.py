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
