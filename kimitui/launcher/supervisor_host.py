"""The swap supervisor that runs *on the host* (stdlib only; sent with ``python3 -c``).

Why: the controlling kimitui can die (SIGKILL, a laptop lid) or lose its SSH
link between stopping the old server and the new one serving.  This process is
started detached (its own session) for the duration of a swap.  It holds the
host's swap lock (``flock`` on ``<state>/swap.lock``), is told each step before
the controller takes it, and records it in ``<state>/swap.json``.  When its
stdin ends before the controller said ``done``, it carries the swap through
alone: it finishes the stop, starts the target if that had not happened,
waits for ``/health`` 200 and "ready to roll" (watching for a crash in the
log), and rolls back to the previous server exactly as it ran when the
target fails.  Then it writes how the swap ended and releases the lock.

Protocol on stdin, one JSON object a line: the plan first, then
``{"phase": ...}`` notes, then ``{"done": outcome, ...}``.  It prints
``locked`` or ``busy`` once, and nothing else (its controller may be gone).
Nothing is signalled that does not carry the run's ``KIMITUI_RUN_ID`` marker.
"""

import errno
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

MARKER = "KIMITUI_RUN_ID"
FATAL = re.compile(r"Scheduler hit an exception|Received sigquit|SIGQUIT received|CUDA out of memory|Watchdog timeout|"
                   r"NCCL error")
"""A line that means the server is dying.  SGLang's main process says ``SIGQUIT received. signum=...`` (0.5.18 and
later, the real crash log's form) or ``Received sigquit from a child process`` (older) when a child failed."""
READY = "The server is fired up and ready to roll!"


def now():
    return time.time()


class Guardian:
    def __init__(self, state_dir, plan):
        self.dir = state_dir
        self.plan = plan
        self.state = {
            "swap_id": plan.get("swap_id"),
            "supervisor_pid": os.getpid(),
            "host": plan.get("host"),
            "target": (plan.get("target") or {}).get("name"),
            "previous": (plan.get("previous") or {}).get("profile"),
            "started_at": now(),
            "phase": "preflight",
            "controller": "attached",
            "outcome": None,
            "reason": "",
            "serving": None,
            "ended_at": None,
        }
        self.target_run = None  # run id announced for the target's start
        self.rollback_run = None
        self.records = {}  # run id -> record dict the controller reported
        self.failed_reason = ""
        self.done = None

    # -- the state file -------------------------------------------------------------
    def save(self, **kw):
        self.state.update(kw)
        self.state["updated_at"] = now()
        path = os.path.join(self.dir, "swap.json")
        tmp = path + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, path)

    # -- messages from the controller ------------------------------------------------
    def read(self, stream):
        for raw in stream:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if "done" in msg:
                self.done = msg
                return
            phase = msg.get("phase")
            if msg.get("run_id") and phase == "start":
                self.target_run = msg["run_id"]
            if msg.get("run_id") and phase == "rollback":
                self.rollback_run = msg["run_id"]
            if msg.get("record"):
                self.records[msg["record"].get("run_id")] = msg["record"]
            if phase == "failed":
                self.failed_reason = msg.get("reason", "")
            if phase:
                self.save(phase=phase)

    # -- processes ---------------------------------------------------------------------
    @staticmethod
    def _stat(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                s = f.read()
        except OSError:
            return None
        rest = s.rsplit(") ", 1)[-1].split()
        return rest  # rest[0] state, rest[2] pgrp, rest[19] starttime

    @staticmethod
    def _marker(pid):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            return None
        for item in env:
            if item.startswith(MARKER.encode() + b"="):
                return item.split(b"=", 1)[1].decode(errors="replace")
        return None

    def members(self, run_id):
        """Live pids carrying ``run_id``'s marker, and their process groups."""
        pids, groups = [], set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            st = self._stat(pid)
            if st is None or st[0] in ("Z", "X"):
                continue
            if self._marker(pid) == run_id:
                pids.append(pid)
                groups.add(int(st[2]))
        return pids, groups

    def alive(self, run_id):
        return bool(run_id) and bool(self.members(run_id)[0])

    def reap(self):
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass

    def stop(self, run_id, grace):
        """TERM every process group of the run, KILL after ``grace``; only marked processes."""
        if not run_id:
            return "gone"
        _, groups = self.members(run_id)
        if not groups:
            return "gone"
        for g in groups:
            try:
                os.killpg(g, signal.SIGTERM)
            except OSError:
                pass
        end = now() + grace
        while now() < end:
            self.reap()
            if not self.alive(run_id):
                return "stopped-term"
            time.sleep(0.05)
        for pid in self.members(run_id)[0]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for _ in range(100):
            self.reap()
            if not self.alive(run_id):
                break
            time.sleep(0.05)
        return "stopped-kill"

    def start(self, spec):
        """Start ``spec`` (argv, env, port, profile...) detached, as the launcher would; returns the record."""
        run_id = uuid.uuid4().hex
        run_dir = os.path.join(self.dir, str(spec.get("port") or "default"))
        os.makedirs(run_dir, exist_ok=True)
        log_path = os.path.join(run_dir, "%s-%s.log" % (time.strftime("%Y%m%d-%H%M%S"), run_id[:8]))
        env = dict(os.environ)
        env.update(spec.get("env") or {})
        env[MARKER] = run_id
        old_umask = os.umask(0o077)
        try:
            log = open(log_path, "ab")
        finally:
            os.umask(old_umask)
        proc = subprocess.Popen(list(spec["argv"]), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True, close_fds=True)
        log.close()
        with open(os.path.join(run_dir, "server.pid"), "w") as f:
            f.write("%d\n" % proc.pid)
        st = self._stat(proc.pid)
        record = {
            "launcher": "process",
            "profile": spec.get("profile") or spec.get("name"),
            "profile_path": spec.get("profile_path") or spec.get("source"),
            "port": spec.get("port"),
            "run_id": run_id,
            "started_at": now(),
            "pid": proc.pid,
            "start_ticks": st[19] if st else None,
            "log_path": log_path,
            "record_path": os.path.join(run_dir, "run.json"),
            "simulated": bool(self.plan.get("simulated")),
            "extra": {"argv": list(spec["argv"]), "env": spec.get("env") or {}, "bind_host": spec.get("bind_host")},
        }
        tmp = record["record_path"] + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.chmod(tmp, 0o600)
        os.replace(tmp, record["record_path"])
        self.records[run_id] = record
        return run_id

    def wait_serving(self, run_id, spec, deadline):
        """(True, "") once /health is 200 and the log said ready; (False, why) on exit, a fatal line or timeout."""
        bind = spec.get("bind_host") or "127.0.0.1"
        if bind in ("0.0.0.0", "::", "", "localhost"):
            bind = "127.0.0.1"
        if ":" in bind:
            bind = "[%s]" % bind
        url = "http://%s:%s/health" % (bind, spec.get("port") or 30000)
        log_path = self.log_of(run_id, spec)
        while True:
            self.reap()
            lines = _read_lines(log_path)
            fatal = [i for i, line in enumerate(lines) if FATAL.search(line)]
            if fatal:
                return False, quote_exception(lines, fatal[0])
            if not self.alive(run_id):
                return False, self.why_dead(run_id, spec)
            if any(READY in line for line in lines) and _healthy(url):
                return True, ""
            if now() >= deadline:
                return False, "not ready within the timeout"
            time.sleep(0.1)

    def log_of(self, run_id, spec):
        """This start's log: from its record, else by the run id in the file name."""
        path = (self.records.get(run_id) or {}).get("log_path")
        if path or not run_id:
            return path
        run_dir = os.path.join(self.dir, str(spec.get("port") or "default"))
        try:
            names = [n for n in os.listdir(run_dir) if n.endswith("-%s.log" % run_id[:8])]
        except OSError:
            return None
        return os.path.join(run_dir, names[0]) if names else None

    def why_dead(self, run_id, spec):
        """The exception line of a start that ended, else that it exited."""
        lines = _read_lines(self.log_of(run_id, spec))
        fatal = [i for i, line in enumerate(lines) if FATAL.search(line)]
        if fatal:
            return quote_exception(lines, fatal[0])
        return "the server process exited during start-up"

    # -- carrying the swap through alone -----------------------------------------------
    def solo(self):
        plan = self.plan
        prev = plan.get("previous")
        target = plan.get("target") or {}
        grace = float(plan.get("grace_s") or 10.0)
        phase = self.state["phase"]
        self.save(controller="lost", lost_at=phase, lost_at_time=now())
        time.sleep(0.5)  # let a start or stop the controller had under way land
        if phase == "preflight":
            return self.finish("interrupted", prev and prev.get("profile"),
                               "the controller went away before anything was touched")
        if plan.get("kind") == "systemd" and plan.get("systemd"):
            return self.solo_systemd(phase)
        if plan.get("kind") != "process":
            return self.finish("interrupted", None, "the controller went away during the %s step; the supervisor "
                               "cannot carry this launcher's swap, so it was left as it was" % phase)
        if prev is not None and phase == "stop" and self.alive(prev["run_id"]):
            self.save(phase="stop", solo=True)
            self.stop(prev["run_id"], grace)
        rolling_back = phase in ("failed", "rollback", "rollback_started")
        if not rolling_back:
            run = self.target_run if self.alive(self.target_run) else None
            if run is None and phase in ("stop", "stopped", "start"):
                # the start never happened (or was cut off): carry the swap through
                self.save(phase="start", solo=True)
                try:
                    run = self.start(target)
                except (OSError, KeyError) as exc:
                    self.failed_reason = "could not start %s: %s" % (target.get("name"), exc)
            if run is not None:
                self.target_run = run
                self.save(phase="readiness", solo=True)
                ok, why = self.wait_serving(run, target, now() + float(plan.get("timeout_s") or 1800))
                if ok:
                    return self.finish("ok", target.get("name"), "")
                self.failed_reason = "%s failed during start-up: %s" % (target.get("name"), why)
                self.stop(run, min(grace, 10.0))
            elif not self.failed_reason:
                self.failed_reason = "%s failed during start-up: %s" % (
                    target.get("name"), self.why_dead(self.target_run, target))
        else:
            if self.alive(self.target_run):
                self.stop(self.target_run, min(grace, 10.0))
        reason = self.failed_reason or "the swap to %s failed" % target.get("name")
        if prev is None or not plan.get("rollback", True):
            return self.finish("failed", None, reason)
        self.save(phase="rollback", solo=True)
        run = self.rollback_run if self.alive(self.rollback_run) else None
        if run is None:
            if self.alive(prev["run_id"]):
                run = prev["run_id"]  # never stopped (a refused stop): it still serves
            else:
                spec = dict(prev.get("extra") or {})
                spec.update(profile=prev.get("profile"), profile_path=prev.get("profile_path"), port=prev.get("port"))
                if not spec.get("argv"):
                    return self.finish("rollback_failed", None, reason + "; the previous run kept no command")
                run = self.start(spec)
        prev_spec = {"port": prev.get("port"), "bind_host": (prev.get("extra") or {}).get("bind_host")}
        ok, why = self.wait_serving(run, prev_spec, now() + float(plan.get("rollback_timeout_s") or 1800))
        if ok:
            return self.finish("rolled_back", prev.get("profile"), reason)
        self.stop(run, 10.0)
        return self.finish("rollback_failed", None, "%s; rollback to %s failed too: %s" % (reason, prev.get("profile"), why))

    # -- systemd: the unit file, systemctl and /health ------------------------------------
    def _ctl(self, *args):
        sd = self.plan["systemd"]
        argv = ["systemctl"] + (["--user"] if sd.get("user_mode") else []) + list(args)
        try:
            res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return 1, str(exc)
        return res.returncode, (res.stdout + res.stderr).strip()

    def _unit_profile(self, path):
        """The profile a kimitui-written unit names (its "Generated by kimitui" line), else None."""
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(GENERATED_MARK):
                        return line[len(GENERATED_MARK):].split(";")[0].strip()
        except OSError:
            pass
        return None

    def _wait_unit(self, unit, port, bind, deadline):
        host = "127.0.0.1" if bind in (None, "", "0.0.0.0", "::", "localhost") else bind
        url = "http://%s:%s/health" % ("[%s]" % host if ":" in host else host, port or 30000)
        while True:
            _, state = self._ctl("is-active", unit + ".service")
            if state.splitlines()[-1:] in (["failed"], ["inactive"]):
                return False, "the unit stopped during start-up (%s)" % state
            if _healthy(url):
                return True, ""
            if now() >= deadline:
                return False, "not ready within the timeout"
            time.sleep(0.2)

    def solo_systemd(self, phase):
        """Carry a systemd swap through: the target's unit up to /health 200, else the previous unit back."""
        plan, sd = self.plan, self.plan["systemd"]
        target, prev = plan.get("target") or {}, plan.get("previous")
        unit, path = sd["unit"], sd["unit_path"]
        tname, pname = target.get("name"), prev and prev.get("profile")
        rolling_back = phase in ("failed", "rollback", "rollback_started")
        reason = self.failed_reason
        if not rolling_back:
            if self._unit_profile(path) != tname and sd.get("unit_text"):
                self.save(phase="start", solo=True)  # the target's unit was not written yet: write it
                old = None
                try:
                    with open(path) as f:
                        old = f.read()
                except OSError:
                    pass
                if old is not None and old != sd["unit_text"]:
                    with open(path + ".bak", "w") as f:
                        f.write(old)
                _write_atomic(path, sd["unit_text"])
                self._ctl("daemon-reload")
            self.save(phase="readiness", solo=True)
            self._ctl("start", unit + ".service")
            ok, why = self._wait_unit(unit, target.get("port"), target.get("bind_host"),
                                      now() + float(plan.get("timeout_s") or 1800))
            if ok:
                self._unit_record(tname, target.get("profile_path"), target.get("port"), target.get("bind_host"))
                return self.finish("ok", tname, "")
            reason = "%s failed during start-up: %s" % (tname, why)
        if prev is None or not plan.get("rollback", True):
            self._ctl("stop", unit + ".service")
            return self.finish("failed", None, reason or "the swap to %s failed" % tname)
        self.save(phase="rollback", solo=True)
        self._ctl("stop", unit + ".service")
        if self._unit_profile(path) == tname and os.path.exists(path + ".bak"):
            with open(path + ".bak") as f:
                _write_atomic(path, f.read())
            self._ctl("daemon-reload")
        self._ctl("start", unit + ".service")
        ok, why = self._wait_unit(unit, prev.get("port"), (prev.get("extra") or {}).get("bind_host"),
                                  now() + float(plan.get("rollback_timeout_s") or 1800))
        reason = reason or "the swap to %s failed" % tname
        if ok:
            self._unit_record(pname, prev.get("profile_path"), prev.get("port"), (prev.get("extra") or {}).get("bind_host"))
            return self.finish("rolled_back", pname, reason)
        return self.finish("rollback_failed", None, "%s; rollback to %s failed too: %s" % (reason, pname, why))

    def _unit_record(self, profile, source, port, bind):
        """The run record the systemd launcher reads (what the unit runs now), as it would write it."""
        sd = self.plan["systemd"]
        _, out = self._ctl("show", "-p", "MainPID", sd["unit"] + ".service")
        pid = out.partition("=")[2].strip()
        record = {"launcher": "systemd", "profile": profile, "profile_path": source, "port": port,
                  "run_id": uuid.uuid4().hex, "started_at": now(), "pid": int(pid) if pid.isdigit() and pid != "0" else None,
                  "unit": sd["unit"], "unit_path": sd["unit_path"], "record_path": sd["record_path"],
                  "extra": {"bind_host": bind}}
        _write_atomic(sd["record_path"], json.dumps(record))

    def finish(self, outcome, serving, reason):
        self.save(outcome=outcome, serving=serving, reason=reason, ended_at=now(), phase="done")


GENERATED_MARK = "# Generated by kimitui from profile "


def _write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _read_lines(path):
    if not path:
        return []
    try:
        with open(path, "rb") as f:
            data = f.read()[-200000:]
    except OSError:
        return []
    return [line.rsplit("\r", 1)[-1] for line in data.decode(errors="replace").splitlines()]


def quote_exception(lines, at):
    """The exception line of a traceback that starts at ``at``: its last ``Name: message`` line before the
    next log record (the line itself when there is none)."""
    exc = re.compile(r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)\b.*")  # a bare "Exception: ..." too
    record = re.compile(r"^\[\d{4}-\d\d-\d\d ")  # the next log record ends the traceback
    found = lines[at].strip()
    for line in lines[at + 1: at + 2000]:  # a real scheduler traceback runs ~100 lines (0.5.18's crash log)
        if record.match(line):
            break
        if exc.match(line.strip()):
            found = line.strip()
    return found


def _healthy(url):
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as resp:
            return resp.status == 200
    except Exception:  # noqa: BLE001 - not up yet
        return False


LOCK_WAIT_S = 5.0
"""A swap that just ended lets go of the lock once its supervisor exits, which a loaded host can take a few
seconds to do; one really under way holds it for minutes, so waiting this long refuses it all the same."""


def take_lock(lock):
    """The swap lock, waiting up to LOCK_WAIT_S for a holder that is letting go; False if it is still held."""
    end = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= end:
            return False
        time.sleep(0.1)


def main():
    state_dir = sys.argv[1]
    for sig in (signal.SIGHUP, signal.SIGPIPE, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    os.makedirs(state_dir, exist_ok=True)
    lock = open(os.path.join(state_dir, "swap.lock"), "a")
    if not take_lock(lock):
        sys.stdout.write("busy\n")
        sys.stdout.flush()
        sys.exit(1)
    sys.stdout.write("locked\n")
    sys.stdout.flush()
    # from here on nothing is written to the controller's pipes: it may be gone
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    first = sys.stdin.readline()
    try:
        plan = json.loads(first)
    except ValueError:
        sys.exit(0)  # the controller went away before saying anything: nothing was touched
    if not isinstance(plan, dict) or "done" in plan:
        sys.exit(0)  # refused before a plan (cannot tell what runs): nothing was touched
    g = Guardian(state_dir, plan)
    g.save()
    g.read(sys.stdin)
    if g.done is not None:
        d = g.done
        g.save(outcome=d.get("done"), serving=d.get("serving"), reason=d.get("reason", ""), ended_at=now(),
               phase="done")
        return
    try:
        g.solo()
    except Exception as exc:  # noqa: BLE001 - say it in the state file rather than die silently
        g.save(outcome="unknown", reason="the supervisor failed: %r" % (exc,), ended_at=now(), phase="done")


if __name__ == "__main__":
    main()
