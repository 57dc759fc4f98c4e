"""``kimitui swap | status | stop`` headless, as an operator runs them, on the simulated host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["tests.support.launcher_env"]

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run ``kimitui ARGS`` in this process (the same ``main`` as the console script), capturing output."""
    import tempfile

    from kimitui.cli import main

    env = {
        "TMPDIR": str(tmp_path),  # the sim host's state dir: $TMPDIR/kimitui-sim-<uid>
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "xstate"),
        "KIMITUI_STATE_DIR": str(tmp_path / "kstate"),
        "KIMITUI_SIM_STATE": str(tmp_path / "gpus.json"),
        "COLUMNS": "200",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(tempfile, "tempdir", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(["kimitui", *args], code, out.out, out.err)

    def run_process(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kimitui", *args], cwd=ROOT, env={**os.environ, **env},
                              text=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=100)

    run.process = run_process  # type: ignore[attr-defined]
    yield run
    run("stop", "--yes")


def test_swap_status_drift_and_stop_from_the_shell(cli, sim_env, tmp_path: Path) -> None:
    port = sim_env.port
    good = sim_env.profile("good", "ep8-tuned")
    broken = sim_env.profile("broken", "ep8-tuned", body="ep_size = 3")

    nothing = cli("status")
    assert nothing.returncode == 1 and "nothing kimitui started is running" in nothing.stdout

    rec = tmp_path / "swap.jsonl"
    swapped = cli.process("swap", str(good), "--yes", "--timeout", "60", "--out", str(rec))  # the real entry point
    assert swapped.returncode == 0, swapped.stdout + swapped.stderr
    assert "good serving on sim" in swapped.stdout and "Traceback" not in swapped.stderr
    from kimitui.events import ProfileSwitch
    from kimitui.recording import read_recording

    recorded = read_recording(next(tmp_path.glob("swap.jsonl*")))
    kinds = [e.kind for e in recorded.events]
    last = recorded.events[-1]
    assert "swap_progress" in kinds and isinstance(last, ProfileSwitch) and last.outcome == "ok"

    status = cli("status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    info = json.loads(status.stdout)
    assert (info["profile"], info["health"], info["drift"], info["launcher"]) == ("good", 200, {}, "process")
    assert info["url"] == f"http://127.0.0.1:{port}"

    # the profile meant to run changes under the running server: status reports the drift
    good.write_text(good.read_text().replace("[sim]", "max_running_requests = 128\n[sim]"))
    drifted = json.loads(cli("status", "--json").stdout)
    assert drifted["drift"] == {"max_running_requests": [128, 256]}
    assert "drift" in cli("status").stdout

    refused = cli("swap", str(broken), "--yes")
    assert refused.returncode == 1 and "refused by preflight" in refused.stdout

    unconfirmed = cli("swap", str(broken))  # stdin is not a terminal and no --yes
    assert unconfirmed.returncode == 1 and "--yes" in unconfirmed.stdout

    nohost = cli("status", "--host", "gpu-host.example")
    assert nohost.returncode == 2 and "no host 'gpu-host.example'" in nohost.stdout

    missing = cli("swap", "no-such-profile", "--yes")
    assert missing.returncode == 2 and "no profile named 'no-such-profile'" in missing.stdout

    still = json.loads(cli("status", "--json").stdout)
    assert still["profile"] == "good" and still["pid"] == info["pid"]  # untouched by the refusals

    stopped = cli("stop", "--yes")
    assert stopped.returncode == 0 and "good stopped" in stopped.stdout
    assert cli("status").returncode == 1
