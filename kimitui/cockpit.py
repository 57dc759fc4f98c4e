"""The live controller: everything the cockpit shows, started and wired.

``LiveController`` owns one Session and starts, for one host:

* the recorder (a Session sink, so nothing is ever dropped from the file);
* the GPU agent stream (fake NVML on the simulated host, pynvml elsewhere);
* a log follower and a metrics poller for whatever server runs, retargeted
  whenever a swap starts a new server (it reacts to ``ProfileState`` events);
* swaps (``kimitui.launcher.swap``) and sweeps (``kimitui.loadgen.runner``).

On the simulated host with nothing running it launches the known-good
profile, so a newcomer sees a server start — unless a process kimitui did not
start holds its port: then it says which process and the two ways on (another
port, ``--sim-port N`` / ``[sim] port``, or watching that server), and offers
:meth:`LiveController.watch` when it answers ``/v1/models``.  Nothing here imports Textual, and
nothing raises into the UI: failures become ``ErrorEvent``s.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import platformdirs

from kimitui.control import NotAvailable
from kimitui.launcher.plan import SwapPlan
from kimitui.events import Baseline, ErrorEvent, Event, Marker, Note, ProfileState, ProfileSwitch, SweepSpec
from kimitui.host.base import HostUnavailable
from kimitui.session import Session

log = logging.getLogger(__name__)

DEFAULT_PROFILE = "ep8-tuned"
"""The field notes' known-good profile: what the simulated host starts with."""

DEFAULT_LEVELS = [1, 8, 32, 64, 96, 128, 192, 256]


def _state_file(name: str) -> Path:
    return Path(platformdirs.user_state_dir("kimitui")) / name


async def _openai_model(url: str) -> str | None:
    """The first model id ``url`` serves at ``/v1/models``, or None when it is no OpenAI-compatible server."""
    from kimitui.launcher.http_ready import client, served_model

    try:
        async with client(url, timeout=3.0) as http:
            return await served_model(http, url)
    except Exception as exc:  # NotHealthy, or anything else on that port: not a server to watch
        log.debug("%s/v1/models: %s", url, exc)
        return None


class LiveController:
    """Controller of a live host (see ``kimitui.control.Controller``)."""

    live = True

    def __init__(
        self,
        config_path: str | None = None,
        host: str | None = None,
        profile_dirs: list[str] | None = None,
        record_path: str | None = None,
        record: bool = True,
        default_profile: str = DEFAULT_PROFILE,
        autostart: bool = True,
        sim_time_scale: float | None = None,
        watch_url: str | None = None,
        sim_port: int | None = None,
    ) -> None:
        """``watch_url``: watch a server kimitui did not start (metrics, health, sweeps); never swap it.

        ``sim_port``: the simulated host's profiles serve on this port (``--sim-port``; else ``[sim] port``)."""
        from kimitui.config import load_config

        self.config = load_config(config_path)
        self.profile_dirs = list(profile_dirs or [])
        self.default_profile = default_profile
        self.autostart = autostart
        self.sim_time_scale = sim_time_scale
        self.watch_url = watch_url.rstrip("/") if watch_url else None
        sim_config = getattr(self.config, "sim", None)
        self.sim_port: int | None = sim_port or getattr(sim_config, "port", None)
        self.watch_offer: str | None = None
        """A server kimitui did not start that holds the simulated host's port and answers
        ``/v1/models``: :meth:`watch` it (``None``: nothing to offer)."""
        self._host_choice = host or ("local" if watch_url and not getattr(self.config, "hosts", None) else None)
        self.host_name = self._resolve_host_name(self._host_choice)
        self.session = Session(host=self.host_name)
        self._record_wanted = record
        self._record_path = record_path
        self.last_recording_path: str | None = None
        """The closed recording's path on disk (its final name)."""
        self._recorder: Any = None
        self._host: Any = None
        self._launcher: Any = None
        self._record: Any = None  # the RunRecord of what serves
        self._running_profile: str | None = None
        self._gpu: Any = None
        self._logs: Any = None
        self._metrics: Any = None
        self._sweep: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._busy: str | None = None
        self._retarget_lock = asyncio.Lock()
        self._closed = False
        self._connected = False
        self._early: list[Event] | None = None
        """Events published before the recorder opened (it is named after the running profile)."""
        self._started_here = False
        self._following: str | None = None
        self._serving = False
        self._server_url: str | None = None
        """How this machine reaches the followed server (through the SSH link for a loopback bind)."""
        self._metrics_args: tuple[str, str, dict[str, Any] | None] | None = None
        """Did this session start the server?  On the simulated host it is stopped on quit."""

    # ------------------------------------------------------------------ set-up
    def _resolve_host_name(self, host: str | None) -> str:
        if host:
            return host
        default = getattr(self.config, "default_host", None)
        if default:
            return default
        hosts = getattr(self.config, "hosts", {}) or {}
        if len(hosts) == 1:
            return next(iter(hosts))
        return "sim"

    @property
    def simulated(self) -> bool:
        from kimitui.launcher.select import is_simulated_host

        return self._host is not None and is_simulated_host(self._host)

    async def start(self) -> None:
        from kimitui.host import make_host

        loop = asyncio.get_running_loop()
        self.session.bind_loop(loop)
        self.session.add_sink(self._watch)
        if self._record_wanted:
            # Until we know which profile runs (the recording is named after it), keep the events.
            self._early = []
            self._remove_early_sink = self.session.add_sink(self._early.append)
        try:
            self._host = make_host(self.config, self._host_choice, on_event=self.session.publish)
        except Exception as exc:  # unknown host name, jump loop: shown, not raised
            self._error("host", f"cannot use host {self.host_name}: {exc}")
            self._open_recorder(None)
            return
        self.host_name = self._host.name
        try:
            await self._host.connect()
        except HostUnavailable as exc:
            # Down or unreachable for now: say so, keep trying in the background.
            self._error("host", f"cannot connect to {self.host_name}: {exc}; retrying")
            self._open_recorder(None)
            self._spawn(self._connect_later())
            return
        except Exception as exc:  # a changed host key, refused credentials: a human must act
            self._error("host", f"cannot connect to {self.host_name}: {exc}")
            self._open_recorder(None)
            return
        self._connected = True
        self._spawn(self._start_sources())

    async def _connect_later(self) -> None:
        from kimitui.host.base import HostError

        try:
            await self._host.wait_connected(None)
        except HostError as exc:
            self._error("host", f"giving up on {self.host_name}: {exc}")
            return
        self._connected = True
        await self._start_sources()

    async def _start_sources(self) -> None:
        from kimitui.launcher.guard import baseline_name
        from kimitui.launcher.select import find_running
        from kimitui.telemetry.gpu import GpuStream

        backend = "fake" if self.simulated else "pynvml"
        python = getattr(getattr(self.config, "hosts", {}).get(self.host_name, None), "python", None) or "python3"
        self._gpu = GpuStream(self._host, self.session, backend=backend, python=python)
        await self._gpu.start()
        if self.watch_url is not None:
            await self._watch_server(self.watch_url)
            return
        if self.sim_port is not None and not self.simulated:
            self.session.publish(ErrorEvent(
                host=self.host_name, source="cockpit", severity="info",
                message=f"the simulated host's port {self.sim_port} does not apply to {self.host_name}, a real "
                        "host: its profiles serve on their own ports"))
        found = None
        try:
            found = await find_running(self._host, simulated=self.simulated)
        except Exception as exc:
            self._error("launcher", f"cannot tell what runs on {self.host_name}: {exc}")
        self._found_at_start = found is not None
        if found is not None:
            self._launcher, self._record = found
            self._running_profile = self._record.profile
            self.session.publish(
                ProfileState(host=self.host_name, profile=self._record.profile, state="serving", detail="found running")
            )
            self._serving = True
            await self._follow(self._record, serving=True)
        autostart = found is None and self.simulated and self.autostart
        self._open_recorder(self.default_profile if autostart else self._running_profile)
        base = baseline_name(self.host_name, self._running_profile)
        if base:
            self.session.publish(Baseline(host=self.host_name, profile=base))
        if autostart and not await self._port_taken(self.default_profile):
            await self.swap(self.default_profile)

    def _target(self, profile: str) -> Any:
        """The profile as it will run here: on the simulated host, on ``sim_port`` when one is set."""
        from kimitui.profiles import load_profile

        target = load_profile(profile, self.profile_dirs)
        if self.simulated and self.sim_port is not None and target.port != self.sim_port:
            target = target.model_copy(update={"port": self.sim_port})
        return target

    async def _port_taken(self, profile: str) -> bool:
        """Before the simulated host's first start: is its port held by a process kimitui did not start?

        If so, say who holds it and the ways on, offer to watch it when it is an OpenAI-compatible
        server, and start nothing (the swap would only fail on the same port)."""
        from kimitui.launcher import ports
        from kimitui.launcher.swap import reach_server

        try:
            target = self._target(profile)
            holder = await ports.holder(self._host, target.port)
            if holder is None:
                return False
            url = await reach_server(self._host, target.host, target.port)
        except Exception as exc:  # a broken profile or host: the swap itself will say it
            log.debug("port check for %s: %s", profile, exc)
            return False
        model = await _openai_model(url)
        command, ways = self._ways_on(target)
        message = (f"port {target.port} on {self.host_name} is in use by a process kimitui did not start: "
                   f"{holder.describe()}; {profile} was not started. Ways on: {ways}")
        self.session.publish(ProfileState(host=self.host_name, profile=None, state="stopped",
                                          detail=f"port {target.port} held by a process kimitui did not start"))
        self.session.publish(ErrorEvent(host=self.host_name, source="launcher", message=message,
                                        detail=f"{holder.socket}; uid {holder.uid}"))
        if model is not None:
            self.watch_offer = url
            self.session.publish(ErrorEvent(
                host=self.host_name, source="cockpit", severity="info",
                message=f"it answers /v1/models (model {model}), so it can be watched without being "
                        f"controlled: choose 'Watch {url}' in the command palette (ctrl+p), or run `{command}` "
                        "(metrics, health, sweeps; swaps refused). "
                        "kimitui does not adopt it: it cannot know how to restart a server it did not start."))
        return True

    def _ways_on(self, target: Any) -> tuple[str, str]:
        """The command that watches what holds ``target``'s port, and both ways on, in words."""
        from kimitui.launcher.swap import server_url

        on_host = "" if getattr(self._host, "address", None) is None else f" --host {self.host_name}"
        command = f"kimitui run{on_host} --url {server_url(self._host, target.host, target.port)}"
        ways = (f"start the simulated host on another port (`kimitui --sim-port N`, or `port = N` under [sim] "
                f"in {self.config.path or 'the config file'}), or watch that server without controlling it "
                f"(`{command}`: metrics, health and sweeps; never stopped or swapped)")
        return command, ways

    async def _held_port_hint(self, profile: str) -> str:
        """After a failed swap on the simulated host: the ways on, if a foreign process holds the target's port."""
        from kimitui.launcher import ports

        if not self.simulated:
            return ""
        try:
            target = self._target(profile)
            if self._record is not None and self._record.port == target.port:
                return ""  # ours serves there (the rollback)
            if await ports.holder(self._host, target.port, quick=True) is None:
                return ""
        except Exception as exc:  # the swap's own reason stands alone
            log.debug("port hint for %s: %s", profile, exc)
            return ""
        return f". Ways on: {self._ways_on(target)[1]}"

    async def watch(self, url: str | None = None) -> None:
        """Switch this session to watch mode: follow ``url`` (default: :attr:`watch_offer`) without controlling it.

        Only while kimitui runs nothing here itself, so no server of ours is left unfollowed."""
        url = url or self.watch_offer
        if not url:
            raise NotAvailable("there is no server to watch: pass its URL (`kimitui run --url URL`)")
        if self.watch_url is not None:
            raise NotAvailable(f"already watching {self.watch_url}")
        if self._busy is not None:
            raise NotAvailable(f"a {self._busy} is running")
        if self._record is not None:
            raise NotAvailable(f"kimitui runs {self._record.profile} on {self.host_name}: watching another "
                               "server would leave it unfollowed")
        if self._host is None or not self._connected:
            raise NotAvailable(f"host {self.host_name} is not connected")
        self.watch_url = url.rstrip("/")
        self.watch_offer = None
        await self._stop_following()
        await self._watch_server(self.watch_url)

    async def _watch_server(self, url: str) -> None:
        """A server kimitui did not start: poll it and sweep it, but never stop, start or swap it."""
        from kimitui.loadgen.sweep import base_url
        from kimitui.telemetry.metrics_poll import MetricsPoller

        self._server_url = base_url(url)
        self._serving = True
        self._open_recorder("watched")
        self.session.publish(ProfileState(host=self.host_name, profile=None, state="serving",
                                          detail=f"watching {self._server_url}: not started by kimitui"))
        self.session.publish(ErrorEvent(
            host=self.host_name, source="cockpit", severity="info",
            message=f"watching {self._server_url}, a server kimitui did not start: metrics, health and sweeps; "
                    "its log is not followed and swaps are refused"))
        self._metrics = MetricsPoller(self.session, self._server_url, host=self.host_name)
        await self._metrics.start()

    def _refuse_if_watched(self) -> None:
        if self.watch_url is not None:
            raise NotAvailable(f"{self.watch_url} is watched, not controlled: kimitui did not start it, so it "
                               "never stops or swaps it (open the cockpit on its host to control a server "
                               "kimitui starts)")

    def _open_recorder(self, profile: str | None) -> None:
        """Open the recording (named after ``profile``); events seen before it come first."""
        from kimitui.recording import RecordingWriter, default_recording_path

        early = self._early
        if self._recorder is not None or (not self._record_wanted and early is None):
            return
        if early is not None:
            self._remove_early_sink()
            self._early = None
        try:
            import time

            when = time.time()
            path = self._record_path or str(default_recording_path(self.host_name, profile, when=when))
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # a default name lists every profile the recording holds once it closes; a named path stays as named
            base = Path(path).parent.parent
            rename = None if self._record_path else (
                lambda profiles: default_recording_path(self.host_name, [profile or "", *profiles], base=base, when=when))
            self._recorder = RecordingWriter(path, hosts=[self.host_name], meta={"mode": "live"}, rename=rename)
        except Exception as exc:  # an unwritable place must not stop the cockpit
            self._error("recording", f"cannot record: {exc}")
            return
        for event in early or ():
            self._recorder(event)
        self._recorder.start()
        self._remove_recorder_sink = self.session.add_sink(self._recorder)

    def _close_recorder(self) -> None:
        if self._recorder is not None:
            self._remove_recorder_sink()
            try:
                self.last_recording_path = str(self._recorder.close())
                log.info("recording saved to %s", self.last_recording_path)
            except Exception as exc:
                self._error("recording", f"closing the recording failed: {exc}")
            self._record_path = None
            self._recorder = None

    # ------------------------------------------------------------------ following the server
    def _watch(self, event: Event) -> None:
        """Sink: when a swap starts a server, follow its log and metrics; a switch ends the swap."""
        if isinstance(event, ProfileSwitch) and event.host == self.host_name and self._busy == "swap":
            self._busy = None  # the outcome is decided; what follows is bookkeeping
        if isinstance(event, ProfileState) and event.host == self.host_name:
            if event.state in ("starting", "serving", "rolled_back") and event.profile:
                self._running_profile = event.profile
                self._serving = event.state != "starting"
                if event.detail != "found running":
                    self._spawn(self._refollow_and_poll() if self._serving else self._refollow())
            elif event.state in ("failed", "stopped", "stopping"):
                self._serving = False

    async def _refollow_and_poll(self) -> None:
        await self._refollow()
        await self._start_metrics()

    async def _refollow(self) -> None:
        """Follow whatever kimitui started on the host now (a swap's new server, or the rolled-back one)."""
        from kimitui.launcher.select import find_running

        async with self._retarget_lock:
            found = await find_running(self._host, simulated=self.simulated)
            if found is None:
                return
            self._launcher, self._record = found
            await self._follow(self._record, serving=self._serving)

    async def _follow(self, record: Any, serving: bool = False) -> None:
        from kimitui.launcher.drift import expected_args
        from kimitui.launcher.profiles import load
        from kimitui.launcher.swap import reach_server
        from kimitui.telemetry.logs import LogFollower

        if self._logs is not None and self._following == record.run_id:
            return  # already following this very start: restarting would duplicate lines
        await self._stop_following()
        self._following = record.run_id
        self._logs = LogFollower(
            self._host,
            self.session,
            unit=record.unit if record.launcher == "systemd" else None,
            path=record.log_path if record.launcher == "process" else None,
            from_cursor=record.journal_cursor,
        )
        await self._logs.start()
        expected: dict[str, Any] | None = None
        bind_host = None
        try:
            profile = load(record.profile_path or record.profile, self.profile_dirs)
            expected = expected_args(profile)
            bind_host = profile.host
        except Exception as exc:
            self._error("profile", f"cannot load profile {record.profile}: {exc}")
        self._server_url = await reach_server(self._host, bind_host, record.port)
        self._metrics_args = (record.run_id, self._server_url, expected)
        if serving:
            await self._start_metrics()

    async def _start_metrics(self) -> None:
        """Poll /metrics, /server_info and /health of the followed server.

        Started only once it serves: while it loads, /metrics is absent and the
        poller would rightly stop asking for it."""
        from kimitui.telemetry.metrics_poll import MetricsPoller

        if self._metrics is not None or self._metrics_args is None:
            return
        run_id, url, expected = self._metrics_args
        if run_id != self._following:
            return
        self._metrics = MetricsPoller(self.session, url, host=self.host_name, expected_args=expected)
        await self._metrics.start()

    async def _stop_following(self) -> None:
        for part in (self._logs, self._metrics):
            if part is not None:
                try:
                    await part.stop()
                except Exception as exc:
                    log.debug("stopping %r: %s", part, exc)
        self._logs = self._metrics = None
        self._following = None

    # ------------------------------------------------------------------ profiles
    def profile_names(self) -> list[str]:
        from kimitui.profiles import scan_profiles

        good, _errors = scan_profiles(self.profile_dirs)
        return [p.name for p in good]

    def plan_swap(self, profile: str) -> SwapPlan:
        from kimitui.launcher.guard import load_baseline
        from kimitui.launcher.plan import plan_swap
        from kimitui.profiles import load_profile

        self._refuse_if_watched()
        target = self._target(profile)
        running = None
        if self._running_profile:
            try:
                running = load_profile(self._running_profile, self.profile_dirs)
                if self._record is not None and self._record.port and self._record.port != running.port:
                    running = running.model_copy(update={"port": self._record.port})  # where it really serves
            except Exception as exc:  # a running profile whose file went away: plan without it
                log.debug("running profile %s: %s", self._running_profile, exc)
        baseline = load_baseline(self.host_name, self._running_profile, self.profile_dirs)
        return plan_swap(target, running=running, baseline=baseline)

    async def swap(self, profile: str) -> None:
        self._refuse_if_watched()
        if self._busy == "sweep":
            raise NotAvailable("a sweep is running: stop it before swapping profiles")
        if self._busy == "swap":
            raise NotAvailable("a swap is already running")
        if self._host is None or not self._connected:
            raise NotAvailable(f"host {self.host_name} is not connected")
        self._busy = "swap"
        self._spawn(self._swap(profile))

    async def _swap(self, profile: str) -> None:
        from kimitui.launcher.swap import SwapOptions, swap

        try:
            sim_args: tuple[str, ...] = ()
            if self.simulated and self.sim_time_scale is not None:
                sim_args = ("--time-scale", str(self.sim_time_scale))
            target: Any = profile
            if self.simulated and self.sim_port is not None:
                from kimitui.profiles import ProfileError

                try:
                    target = self._target(profile)
                except ProfileError:
                    target = profile  # the swap refuses it in its own words
            outcome = await swap(self._host, target, SwapOptions(extra_dirs=tuple(self.profile_dirs), sim_args=sim_args),
                                 session=self.session)
            self._started_here = self._started_here or outcome.ok
            self._busy = None
            if outcome.record is not None:
                self._running_profile = outcome.serving
                await self._refollow()
            if not outcome.ok:
                hint = await self._held_port_hint(profile)
                self._error("swap", f"swap to {profile}: {outcome.outcome}: {outcome.reason}{hint}")
        except Exception as exc:
            self._error("swap", f"swap to {profile} failed: {exc}")
        finally:
            if self._busy == "swap":
                self._busy = None

    def mark_baseline(self) -> str | None:
        from kimitui.launcher.guard import mark_baseline

        if not self._running_profile:
            raise NotAvailable("no profile is running to mark as baseline")
        event = mark_baseline(self.host_name, self._running_profile)
        self.session.publish(event)
        return self._running_profile

    # ------------------------------------------------------------------ sweeps
    def default_sweep_spec(self) -> SweepSpec:
        url, model = self._server_url_and_model()
        saved: dict[str, Any] = {}
        try:
            saved = json.loads(_state_file("sweep-defaults.json").read_text())
        except (OSError, ValueError):
            saved = {}
        base = {
            "levels": DEFAULT_LEVELS,
            "mode": "sustained",
            "max_tokens": 512,
            "ignore_eos": True,
            "prompts": "seed",
        }
        base.update({k: v for k, v in saved.items() if k in SweepSpec.model_fields and k not in ("url", "model")})
        try:
            return SweepSpec(url=url, model=model, **base)
        except Exception:
            return SweepSpec(url=url, model=model, levels=DEFAULT_LEVELS)

    def _server_url_and_model(self) -> tuple[str, str]:
        from kimitui.launcher.swap import server_url

        if self.watch_url is not None and self._server_url is not None:
            return self._server_url, "auto"  # the sweep asks the server's /v1/models

        bind_host, port, model = None, 30001, "default"
        if self._running_profile:
            try:
                from kimitui.profiles import load_profile

                p = load_profile(self._running_profile, self.profile_dirs)
                bind_host, port, model = p.host, p.port, p.effective_served_model_name()
            except Exception:
                pass
        if self._record is not None and self._record.port:
            port = self._record.port
        if self._server_url is not None:
            return self._server_url, model
        if self._host is None:
            return f"http://127.0.0.1:{port}", model
        return server_url(self._host, bind_host, port), model

    async def start_sweep(self, spec: SweepSpec) -> None:
        from kimitui.loadgen.runner import SweepRunner
        from kimitui.launcher.guard import sweep_notice

        if self._busy is not None:
            raise NotAvailable(f"a {self._busy} is running")
        try:
            path = _state_file("sweep-defaults.json")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(spec.model_dump(exclude={"url", "model"})))
        except OSError as exc:
            log.debug("cannot remember sweep defaults: %s", exc)
        if self._running_profile:
            try:
                from kimitui.profiles import load_profile

                report = sweep_notice(self.host_name, load_profile(self._running_profile, self.profile_dirs))
                if report is not None and report.changes:
                    self.session.publish(
                        ErrorEvent(host=self.host_name, source="guard", message=" ".join(report.lines()[:1]),
                                   detail="\n".join(report.lines()))
                    )
            except Exception as exc:
                log.debug("guard: %s", exc)
        self._sweep = SweepRunner(self.session, spec, profile=self._running_profile)
        self._busy = "sweep"
        await self._sweep.start()
        self._spawn(self._await_sweep())

    async def _await_sweep(self) -> None:
        try:
            await self._sweep.wait()
        except Exception as exc:
            self._error("sweep", f"sweep failed: {exc}")
        finally:
            self._busy = None

    async def stop_sweep(self) -> None:
        if self._sweep is None or not self._sweep.running:
            raise NotAvailable("no sweep is running")
        await self._sweep.abort()

    @property
    def busy(self) -> str | None:
        return self._busy

    # ------------------------------------------------------------------ the recording
    def add_note(self, text: str) -> None:
        self.session.publish(Note(host=self.host_name, text=text))

    def add_marker(self, label: str = "") -> None:
        self.session.publish(Marker(host=self.host_name, label=label))

    def toggle_recording(self) -> bool:
        if self._recorder is not None:
            self._close_recorder()
            self._record_wanted = False
            return False
        self._record_wanted = True
        self._open_recorder(self._running_profile)
        return self._recorder is not None

    @property
    def recording_path(self) -> str | None:
        return str(self._recorder.path) if self._recorder is not None else None

    # ------------------------------------------------------------------ shutdown
    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._error("cockpit", f"background task failed: {task.exception()}")

    def _error(self, source: str, message: str) -> None:
        log.warning("%s: %s", source, message)
        self.session.publish(ErrorEvent(host=self.host_name, source=source, message=message))

    def _stops_server_on_quit(self) -> bool:
        """The quit rule: only on the simulated host, and only when this kimitui brought it up from nothing."""
        return self.simulated and self._started_here and not getattr(self, "_found_at_start", False)

    def quit_rule(self) -> str:
        """What quitting does to this host's server, in words, for the quit confirmation."""
        parts = []
        if self._busy == "swap":
            parts.append("The swap under way is finished or rolled back first (its progress stays on screen), "
                         "then kimitui exits.")
        elif self._busy == "sweep":
            parts.append("The sweep is stopped; everything so far stays in the recording.")
        if not self.simulated:
            parts.append(f"The server on {self.host_name} keeps running: quitting never stops a real host's server.")
        elif getattr(self, "_found_at_start", False):
            parts.append("The simulated server was running before this kimitui started, so it keeps running.")
        else:
            parts.append("The simulated server this kimitui started is stopped (on a real host it would keep running).")
        return " ".join(parts)

    async def _finish_swap(self) -> None:
        """A swap under way ends on its own terms (served or rolled back) before kimitui exits.

        Bounded by the readiness and rollback timeouts; past them the task is cancelled and the
        host's swap supervisor finishes the host side alone.
        """
        from kimitui.launcher.swap import DEFAULT_TIMEOUT_S

        swaps = [t for t in self._tasks if getattr(t.get_coro(), "__name__", "") == "_swap" and not t.done()]
        if not swaps:
            return
        await asyncio.wait(swaps, timeout=2 * DEFAULT_TIMEOUT_S + 60)

    async def shutdown(self) -> None:
        """Finish a swap under way, stop sources, then close the recording.

        The server keeps serving, except on the simulated host when this kimitui started it from
        nothing (:meth:`quit_rule` says which, in words).
        """
        if self._closed:
            return
        self._closed = True
        await self._finish_swap()
        if self._sweep is not None and self._sweep.running:
            try:
                await self._sweep.abort()
            except Exception as exc:
                log.debug("abort sweep: %s", exc)
        for task in list(self._tasks):
            task.cancel()
        await self._stop_following()
        if self._stops_server_on_quit() and self._launcher is not None and self._record is not None:
            # The embedded simulated host this cockpit brought up: leave no server of its own behind.
            # On a real host, or a simulated one that had a server already, the server keeps serving.
            try:
                await self._launcher.stop(self._record, grace_s=5.0)
            except Exception as exc:
                log.debug("stopping the simulated server: %s", exc)
        if self._gpu is not None:
            try:
                await self._gpu.stop()
            except Exception as exc:
                log.debug("gpu stop: %s", exc)
        if self._host is not None:
            try:
                await self._host.close()
            except Exception as exc:
                log.debug("host close: %s", exc)
        self._close_recorder()
