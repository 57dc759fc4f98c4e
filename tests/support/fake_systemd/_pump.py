"""The service's supervisor (systemd's role): runs ExecStart, copies its output into the journal.

Usage: _pump.py UNIT STATEFILE -- ARGV...   (started in its own session = the unit's "cgroup")
It ignores SIGTERM so it can log the service's last lines; SIGKILL of the group ends it.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import journal_append, write_json  # noqa: E402


def main() -> int:
    unit, state_file = sys.argv[1], Path(sys.argv[2])
    spec = json.loads(os.environ.pop("FAKE_SYSTEMD_SPEC"))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    env = {**os.environ, **spec["env"]}
    state = {"pump_pid": os.getpid(), "main_pid": 0, "state": "activating", "exit": None}
    for pre in spec["exec_start_pre"]:
        subprocess.run(pre, env=env, cwd=spec["working_directory"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    try:
        child = subprocess.Popen(
            spec["exec_start"][0], env=env, cwd=spec["working_directory"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
        )
    except OSError as exc:
        journal_append(unit, f"{unit}: Failed to execute {spec['exec_start'][0][0]}: {exc.strerror}")
        write_json(state_file, {**state, "state": "failed", "exit": 203})
        return 1
    write_json(state_file, {**state, "main_pid": child.pid, "state": "active"})
    for post in spec["exec_start_post"]:
        subprocess.run(post, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    assert child.stdout is not None
    for raw in child.stdout:
        journal_append(unit, raw.decode("utf-8", "replace").rstrip("\r\n"))
    code = child.wait()
    stopping = json.loads(state_file.read_text()).get("state") == "deactivating"
    final = "inactive" if code == 0 or stopping else "failed"
    write_json(state_file, {**state, "main_pid": 0, "state": final, "exit": code})
    if code >= 0:
        how = f"code=exited, status={code}/{'SUCCESS' if code == 0 else 'FAILURE'}"
    else:
        how = f"code=killed, status={-code}/{signal.Signals(-code).name[3:]}"
    journal_append(unit, f"{unit}: Main process exited, {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
