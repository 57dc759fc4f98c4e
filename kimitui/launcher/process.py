"""Start the server as a plain detached process (no systemd, no root).

Used on hosts without systemd or root, and on the simulated host (where the
profile runs the simulator instead of SGLang).  Each start gets its own
session and process group (``setsid``), a pid file, a run record and its own
log file under a kimitui state dir on the host::

    <base>/<port>/run.json           what runs: pid, start time, run id, profile
    <base>/<port>/server.pid
    <base>/<port>/<stamp>-<run id>.log

``<base>`` is ``$XDG_STATE_HOME/kimitui`` (``~/.local/state/kimitui``) on a
real host and ``<that>/sim`` for the simulated one (where the simulator's GPU
state lives too, :func:`kimitui.sim.gpustate.sim_state_dir`), so each user's
simulated host is their own.  The old shared ``$TMPDIR/kimitui-sim-<uid>`` is ignored.
"""

from __future__ import annotations

import json
import posixpath
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from kimitui.host.base import Host, HostError, Stream
from kimitui.launcher import procscript
from kimitui.launcher.base import LaunchError, Launcher, RunRecord
from kimitui.launcher.profiles import argv_for, env_for, profile_name, profile_port, profile_source, sim_python
from kimitui.profiles import Profile

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

SIM_STATE_HOME = r"""printf '%s/kimitui/sim%s\n' "${XDG_STATE_HOME:-$HOME/.local/state}" \
"${KIMITUI_SIM_NAME:+/hosts/$KIMITUI_SIM_NAME}" """
"""The simulated host's state dir, found on the host: the user's own kimitui state dir plus ``/sim``
(``/sim/hosts/NAME`` for one of several simulated hosts: :data:`kimitui.sim.gpustate.SIM_NAME_ENV`)."""


def _sh(script: str, *args: str) -> list[str]:
    """``sh -c SCRIPT sh ARGS...``: arguments stay positional parameters, never code."""
    return ["sh", "-c", script, "sh", *args]


def deployment_tags(deployment: str, role: str | None, node: str | None, entry: bool, waits_ready: bool,
                    members: Sequence[RunRecord] = ()) -> dict[str, Any]:
    """What :meth:`ProcessLauncher.start_argv` writes into a deployment process's record (``tags``)."""
    return {"deployment": deployment, "role": role, "node": node, "entry": entry, "waits_ready": waits_ready,
            "members": [m.model_dump(mode="json") for m in members]}


def _tagged(record: RunRecord, tags: dict[str, Any], run_key: str | None) -> RunRecord:
    """A deployment process's record: its deployment, role, node; the entry lists the others."""
    extra = {**record.extra, "run_key": run_key, "waits_ready": bool(tags.get("waits_ready", True))}
    if tags.get("members"):
        extra["members"] = list(tags["members"])
    return record.model_copy(update={"deployment": tags.get("deployment"), "role": tags.get("role"),
                                     "node": tags.get("node"), "entry": bool(tags.get("entry")), "extra": extra})


class ProcessLauncher(Launcher):
    """Detached process launcher; stops only what it started (pid + start time + marker)."""

    kind = "process"

    def __init__(
        self,
        host: Host,
        *,
        simulated: bool = False,
        state_dir: str | None = None,
        keep_logs: int = 20,
        sim_args: Sequence[str] = (),
    ) -> None:
        super().__init__(host)
        self.simulated = simulated
        self.sim_args = tuple(sim_args)
        """Extra ``kimitui sim serve`` options on a simulated host (e.g. ``--time-scale 20``)."""
        self._state_dir = state_dir
        self.keep_logs = keep_logs
        """Start logs kept per port; older ones (files kimitui wrote) are deleted at the next start."""

    # -- where things live ---------------------------------------------------------
    async def state_dir(self) -> str:
        """The kimitui state dir on the host (resolved once, on the host itself)."""
        if self._state_dir is None:
            if self.simulated:
                res = await self.host.run(_sh(SIM_STATE_HOME), timeout=20)
                base = res.stdout.strip()
            else:
                res = await self.host.run(_sh(procscript.STATE_HOME), timeout=20)
                base = posixpath.join(res.stdout.strip(), "kimitui")
            if not res.ok or not base.startswith("/"):
                raise LaunchError(f"{self.host.name}: cannot find a state dir: {res.stderr.strip()}")
            self._state_dir = base
        return self._state_dir

    async def _run_dir(self, port: int | None) -> str:
        return posixpath.join(await self.state_dir(), str(port or "default"))

    # -- what runs -----------------------------------------------------------------
    async def records(self) -> list[RunRecord]:
        """Every run record kimitui left on this host (running or not)."""
        res = await self.host.run(_sh(procscript.LIST_RECORDS, await self.state_dir()), timeout=20)
        out: list[RunRecord] = []
        for line in res.stdout.splitlines():
            path, _, text = line.partition("\t")
            try:
                rec = RunRecord.model_validate(json.loads(text))
            except ValueError:
                continue  # a half-written or foreign file: not ours to interpret
            if rec.launcher == self.kind:
                out.append(rec.model_copy(update={"record_path": path}))
        return sorted(out, key=lambda r: r.started_at)

    async def current(self) -> RunRecord | None:
        """The newest start that still runs; for a process of a deployment, that deployment's entry."""
        records = await self.records()
        for rec in reversed(records):
            if await self.alive(rec):
                if rec.deployment and not rec.entry:
                    entry = next((r for r in records if r.deployment == rec.deployment and r.entry), None)
                    return entry or rec
                return rec
        return None

    async def deployment_records(self, deployment: str) -> list[RunRecord]:
        """This host's records of one deployment's processes."""
        return [r for r in await self.records() if r.deployment == deployment]

    async def inspect(self, record: RunRecord) -> str:
        """``alive``, ``gone`` or ``foreign`` (the pid now belongs to someone else)."""
        if record.pid is None:
            return "gone"
        res = await self.host.run(
            _sh(procscript.INSPECT, str(record.pid), record.start_ticks or "-", record.run_id), timeout=20
        )
        return res.stdout.strip() or "gone"

    async def alive(self, record: RunRecord) -> bool:
        return await self.inspect(record) == "alive"

    # -- start / stop --------------------------------------------------------------
    async def start(self, profile: Profile) -> RunRecord:
        return await self.start_argv(
            profile_name(profile),
            argv_for(
                profile,
                simulated=self.simulated,
                python=sim_python(self.host) if self.simulated else None,
                sim_args=self.sim_args,
            ),
            env=env_for(profile),
            port=profile_port(profile),
            source=profile_source(profile),
            bind_host=profile.host,
            workdir=profile.launcher.workdir,
        )

    async def relaunch(self, record: RunRecord, deployment: str | None = None,
                       members: list[RunRecord] | None = None) -> RunRecord:
        """Start again exactly what ``record`` ran; a deployment's process joins ``deployment`` (a new start's id)."""
        argv = record.extra.get("argv")
        if not argv:
            raise LaunchError(f"{self.host.name}: run {record.run_id[:8]} of {record.profile} kept no command to rerun")
        tags = deployment_tags(deployment or record.deployment, record.role, record.node, record.entry,
                               bool(record.extra.get("waits_ready", True)), members or ()) if record.deployment else None
        return await self.start_argv(
            record.profile,
            list(argv),
            env=dict(record.extra.get("env") or {}),
            port=record.port,
            source=record.profile_path,
            bind_host=record.extra.get("bind_host"),
            run_key=record.extra.get("run_key"),
            tags=tags,
            workdir=record.extra.get("workdir"),
        )

    async def start_argv(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        port: int | None = None,
        source: str | None = None,
        bind_host: str | None = None,
        run_key: str | None = None,
        tags: dict[str, Any] | None = None,
        workdir: str | None = None,
    ) -> RunRecord:
        """Start ``argv`` detached, with ``env`` added, as the server called ``name``.

        ``run_key``: its folder in the state dir (default: the port).  ``tags``: a deployment's
        process says which (``deployment``, ``role``, ``node``, ``entry``, ``waits_ready``, and the
        entry's ``members``).  ``workdir``: the folder it runs in (``launcher.workdir``, as the
        rendered ``cd DIR && ...`` and the unit's ``WorkingDirectory=`` say); else the shell's own."""
        env = env or {}
        bad = [k for k in env if not _ENV_NAME.match(k)]
        if bad:
            raise LaunchError(f"profile {name}: invalid environment variable name(s) {bad}")
        if not argv:
            raise LaunchError(f"profile {name}: empty command")
        run_id, self.next_run_id = self.next_run_id or uuid.uuid4().hex, None
        run_dir = posixpath.join(await self.state_dir(), run_key) if run_key else await self._run_dir(port)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        log_path = posixpath.join(run_dir, f"{stamp}-{run_id[:8]}.log")
        pid_path = posixpath.join(run_dir, "server.pid")
        full = ["env", f"{procscript.MARKER_VAR}={run_id}", *(f"{k}={v}" for k, v in env.items()), *argv]
        try:
            res = await self.host.run(_sh(procscript.START, run_dir, log_path, pid_path, workdir or "", *full),
                                      timeout=30)
        except HostError as exc:
            raise LaunchError(f"{self.host.name}: starting {name} failed: {exc}") from exc
        parts = res.stdout.split()
        if not res.ok or not parts or not parts[0].isdigit():
            raise LaunchError(
                f"{self.host.name}: starting {name} failed (exit {res.exit_code}): "
                f"{res.stderr.strip() or res.stdout.strip()}"
            )
        record_path = posixpath.join(run_dir, "run.json")
        record = RunRecord(
            launcher="process",
            profile=name,
            profile_path=source,
            port=port,
            run_id=run_id,
            pid=int(parts[0]),
            start_ticks=parts[1] if len(parts) > 1 and parts[1] != "-" else None,
            log_path=log_path,
            record_path=record_path,
            simulated=self.simulated,
            extra={"argv": argv, "env": env, "bind_host": bind_host, "workdir": workdir},
        )
        if tags:
            record = _tagged(record, tags, run_key)
        await self.host.write_file(record_path, record.model_dump_json(), mode=0o600)
        await self.host.run(_sh(procscript.PRUNE_LOGS, run_dir, str(max(1, self.keep_logs))), timeout=20)
        return record

    async def stop(self, record: RunRecord, grace_s: float = 10.0) -> str:
        if record.pid is None:
            return "gone"
        res = await self.host.run(
            _sh(procscript.STOP, str(record.pid), record.start_ticks or "-", record.run_id, f"{grace_s:g}"),
            timeout=grace_s + 30,
        )
        if res.exit_code == 5:
            raise LaunchError(f"{self.host.name}: refused to stop pid {record.pid}: {res.stderr.strip()}")
        if not res.ok:
            raise LaunchError(f"{self.host.name}: stopping pid {record.pid} failed: {res.stderr.strip()}")
        await self._forget(record)
        return res.stdout.strip()

    async def _forget(self, record: RunRecord) -> None:
        """Remove the run record and pid file of a start that has ended (files kimitui wrote)."""
        paths = [p for p in (record.record_path,) if p]
        if record.record_path:
            paths.append(posixpath.join(posixpath.dirname(record.record_path), "server.pid"))
        # only if the record on disk is this start's (a newer start may own the port dir)
        try:
            on_disk = json.loads(await self.host.read_file(record.record_path)) if record.record_path else {}
        except (HostError, ValueError):
            on_disk = {}
        if on_disk.get("run_id") == record.run_id:
            await self.host.run(_sh(procscript.REMOVE, *paths), timeout=20)

    # -- logs ----------------------------------------------------------------------
    async def follow_log(self, record: RunRecord) -> Stream:
        if not record.log_path:
            raise LaunchError(f"{self.host.name}: run {record.run_id[:8]} has no log file")
        argv = ["tail", "-n", "+1", "-F", "-s", "0.05"]
        if record.pid is not None:
            argv += ["--pid", str(record.pid)]
        return await self.host.stream([*argv, record.log_path])

    async def read_log_tail(self, record: RunRecord, lines: int = 40) -> list[str]:
        if not record.log_path:
            return []
        res = await self.host.run(["tail", "-n", str(lines), record.log_path], timeout=20)
        return res.stdout.splitlines()
