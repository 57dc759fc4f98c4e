"""The lock that gives one measurement the machine to itself in a two-worker run: real processes, real flock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support.quiet_run import QuietLock

ROOT = Path(__file__).resolve().parents[1]

WORKER = """
import sys, time
from pathlib import Path
from tests.support.quiet_run import QuietLock
lock, hold = QuietLock(Path(sys.argv[1])), float(sys.argv[2])
print("waiting", flush=True)
with lock.held_for_a_test():
    print("in", time.monotonic(), flush=True)
    time.sleep(hold)
    done = time.monotonic()  # still holding: anything that waited for this test began after it
print("out", done, flush=True)
"""


def _worker(folder: Path, hold_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(folder), str(hold_s)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
    return proc


def _line(proc: subprocess.Popen[str], word: str) -> float:
    assert proc.stdout is not None
    said, _, t = proc.stdout.readline().strip().partition(" ")
    assert said == word, (said, word)
    return float(t)


def test_the_measurement_waits_for_the_other_workers_test_and_holds_its_next_one_back(tmp_path: Path) -> None:
    lock = QuietLock(tmp_path)
    with lock.held_for_a_test():  # this worker's own test, the one that measures
        other = _worker(tmp_path, 1.0)  # the other worker, in a test of its own for a second
        _line(other, "in")  # tests on both workers run side by side
        with lock.machine_to_itself() as waited:
            quiet_from = time.monotonic()
            out = _line(other, "out")
            assert out <= quiet_from, "the measurement began while the other worker's test still ran"
            assert "waited" in waited
            follower = _worker(tmp_path, 0.0)  # the other worker's next test
            time.sleep(0.5)
            quiet_to = time.monotonic()
        assert _line(follower, "in") >= quiet_to, "the next test started while the measurement held the machine"
        _line(follower, "out")
        for proc in (other, follower):
            assert proc.wait(timeout=10) == 0


def test_tests_on_two_workers_share_the_machine(tmp_path: Path) -> None:
    lock = QuietLock(tmp_path)
    with lock.held_for_a_test():
        other = _worker(tmp_path, 0.0)
        _line(other, "in")  # not held back by a test that is not measuring
        _line(other, "out")
        assert other.wait(timeout=10) == 0


MEASURING = """
import json, os, time
from pathlib import Path
from tests.support.quiet_run import machine_to_itself

def test_measure(request):
    time.sleep(1.0)  # the other worker is into its tests by now
    with machine_to_itself(request.config) as waited:
        t0 = time.time()
        time.sleep(1.5)
        t1 = time.time()
    Path(os.environ["QUIET_OUT"], "quiet.json").write_text(json.dumps([t0, t1, waited]))
"""

OTHERS = """
import json, os, time
from pathlib import Path
import pytest

@pytest.mark.timeout(1)  # a test held back is not charged for the wait
@pytest.mark.parametrize("i", range(12))
def test_other(i):
    t0 = time.time()
    time.sleep(0.3)
    Path(os.environ["QUIET_OUT"], f"other-{i}.json").write_text(json.dumps([t0, time.time()]))
"""


def test_in_a_two_worker_run_no_other_test_overlaps_the_measurement(tmp_path: Path) -> None:
    """The real hook (tests/conftest.py's pytest_runtest_protocol) in a real pytest-xdist run of two files."""
    import json
    import os

    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    (suite / "test_a_measuring.py").write_text(MEASURING)
    (suite / "test_b_others.py").write_text(OTHERS)
    (suite / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QUIET_OUT": str(out)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                          "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", "--rootdir", str(suite),
                          "-c", str(suite / "pytest.ini"), "--basetemp", str(tmp_path / "base"), str(suite)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    t0, t1, waited = json.loads((out / "quiet.json").read_text())
    others = [json.loads((out / f"other-{i}.json").read_text()) for i in range(12)]
    assert not [o for o in others if o[0] < t1 and o[1] > t0], (t0, t1, others)
    assert [o for o in others if o[1] <= t0] and [o for o in others if o[0] >= t1], (t0, t1, others)  # both sides
    assert "waited" in waited
