"""One autopilot per tune: a second process holding the tune's lock, alive then dead.

The holder is a real process (``python -c``) that takes the lock the way ``kimitui tune`` does; the
refusal is checked through the command line, the takeover through the lock and its one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.events import SweepSpec
from kimitui.tune import state as store
from kimitui.tune.lock import LOCK_NAME, TuneLocked, acquire, held
from kimitui.tune.state import TunePlan
from kimitui.tune.tuner import new_state

REPO = Path(__file__).resolve().parent.parent
HOLDER = """
import sys, time
from pathlib import Path
from kimitui.tune.lock import held
with held(Path(sys.argv[1]), "kimitui tune --resume"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
print("released", flush=True)
"""


@pytest.fixture
def tune_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    tune_id, where = store.new_tune_dir("sim")
    plan = TunePlan(start="ep8-tuned", candidates=[], workload=SweepSpec(url="", model="", levels=[1]))
    st = new_state(tune_id, "sim", plan)
    st.status = "running"
    store.save(st, where)
    return where


def _holder(where: Path, seconds: float = 60.0) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(where), str(seconds)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_resume_refuses_a_tune_whose_process_is_alive_naming_its_pid(tune_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    proc = _holder(tune_dir)
    try:
        code = main(["tune", "--resume"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 3 and len(err) == 1, err
        assert f"already being run by pid {proc.pid} (kimitui tune --resume, started " in err[0]
        assert err[0].startswith(f"kimitui tune: tune {tune_dir.name} ")
        with pytest.raises(TuneLocked) as caught:
            acquire(tune_dir, "the cockpit")
        assert caught.value.pid == proc.pid and abs(caught.value.started - time.time()) < 60
    finally:
        proc.kill()
        proc.wait(10)


def test_a_lock_whose_process_died_is_taken_over_and_that_is_said(tune_dir: Path) -> None:
    proc = _holder(tune_dir)
    os.kill(proc.pid, signal.SIGKILL)  # no clean-up: the file stays, naming a dead pid
    proc.wait(10)
    assert (tune_dir / LOCK_NAME).exists()
    with held(tune_dir, "kimitui tune --resume") as lock:
        assert lock.took_over is not None
        assert f"took over the lock of pid {proc.pid} (kimitui tune --resume, started " in lock.took_over
        assert lock.took_over.endswith("which is no longer running")
        with pytest.raises(TuneLocked, match=f"pid {os.getpid()} "):  # ours now: a second driver is refused
            acquire(tune_dir, "the cockpit")
    assert not (tune_dir / LOCK_NAME).exists()


def test_the_lock_is_released_when_the_tune_ends_or_fails(tune_dir: Path) -> None:
    proc = _holder(tune_dir, seconds=0.2)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "released"
    proc.wait(10)
    lock = acquire(tune_dir, "kimitui tune")  # released cleanly: nothing to take over
    assert lock.took_over is None and oct((tune_dir / LOCK_NAME).stat().st_mode & 0o777) == "0o600"
    lock.release()
    with pytest.raises(RuntimeError, match="boom"):
        with held(tune_dir, "kimitui tune"):
            raise RuntimeError("boom")
    assert acquire(tune_dir, "kimitui tune").took_over is None  # the error released it


def test_a_finished_holder_lets_the_resume_through_to_the_tune(tune_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """With the lock free, ``--resume`` gets past it: a broken state file is then what it reports."""
    (tune_dir / "state.json").write_text('{"status": "running"}')
    assert main(["tune", "--resume", tune_dir.name]) == 2
    err = capsys.readouterr().err
    assert "state.json" in err and "already being run" not in err
    assert not (tune_dir / LOCK_NAME).exists()
