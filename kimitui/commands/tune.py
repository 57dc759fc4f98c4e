"""``kimitui tune``: the autopilot, headless — one change per step, swap, sweep, verdict, keep or revert.

It drives the host through the same live controller as the cockpit (swaps with rollback, the
recording, the server's log and GPUs for the causes), keeps its plan and progress in a state file
(``--resume`` carries on after kimitui, the link or the host died) and ends with the best profile
serving and a report.  Ctrl-C stops the step under way, swaps back to the best and leaves the tune
resumable; a second Ctrl-C leaves at once (``--resume`` then redoes the step).

One autopilot per tune: the tune's folder holds a lock (:mod:`kimitui.tune.lock`) while this process
drives it; ``--resume`` on a tune another live process drives refuses, naming that pid.

Exit codes: 0 finished (or stopped at a limit), 1 the tune failed (the best would not serve again),
2 bad arguments or no host, 3 another live process runs that tune, 130 interrupted (resumable).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kimitui.commands.sweep import levels_arg, positive, add_workload_args, build_spec

if TYPE_CHECKING:
    from kimitui.events import Event, SweepSpec
    from kimitui.host.base import Host
    from kimitui.live import LiveController
    from kimitui.tune.state import TunePlan, TuneState

EXIT_FAILED = 1
EXIT_BAD_ARGS = 2
EXIT_LOCKED = 3
TUNE_LEVELS = [1, 16, 64, 256]
"""The default sweep of a tune: C=1 (one user's speed), the seeds' C=16 and C=256 (the peak), C=64 between."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("tune", help="the autopilot: one knob per step, swap, sweep, verdict, keep or revert")
    p.add_argument("--host", metavar="NAME", help="configured host (default: the first one, else the simulated host 'sim')")
    p.add_argument("--from", dest="start", metavar="PROFILE", help="starting profile (default: the host's baseline, else what runs there, else ep8-tuned)")
    p.add_argument("--change", action="append", metavar="KNOB=VALUE", help="a change to try (repeatable; replaces the defaults)")
    p.add_argument("--variant", action="append", metavar="PROFILE",
                   help="a profile whose one knob family change to try (repeatable; replaces the defaults)")
    p.add_argument("--draft-model", metavar="PATH", help="a DFlash draft model on the host: try the drafter too")
    p.add_argument("--objective", default="peak", metavar="peak|level:C|capacity|tokens_per_kj|cost_per_mtok",
                   help="what 'better' means: peak aggregate tok/s (default), aggregate at level C, capacity at --slo, "
                        "the most tokens per kJ of GPU energy, or the lowest cost per million tokens ([cost] in the "
                        "config)")
    p.add_argument("--slo", metavar="TERMS", help="the SLO of --objective capacity, e.g. 'ttft_p99<=2s,decode_p50>=20'")
    add_workload_args(p)
    p.add_argument("--levels", type=levels_arg, help=f"concurrency levels (default {','.join(map(str, TUNE_LEVELS))})")
    p.add_argument("--repeat-limit", type=positive(int), default=3, metavar="N",
                   help="sweeps per step at most while its verdict is within noise (3)")
    p.add_argument("--max-steps", type=positive(int), metavar="N", help="decide at most N steps")
    p.add_argument("--time-budget", type=positive(float), metavar="S", help="start no step that would end past S seconds")
    p.add_argument("--time-scale", type=positive(float), metavar="S", help="on the simulated host: run its clock S x faster")
    p.add_argument("--dry-run", action="store_true", help="print the plan, what it skips and why, and its estimated time")
    p.add_argument("--allow-client-limit", action="store_true",
                   help="tune even when the plan asks more chunks/s than this client can drive (those levels' figures "
                        "are then unsure and decide nothing)")
    p.add_argument("--resume", nargs="?", const="", metavar="ID", help="carry on the newest unfinished tune (or tune ID)")
    p.add_argument("--json", action="store_true", help="print the final report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kimitui.config import ConfigError, load_config
    from kimitui.tune import state as store

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"kimitui tune: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    host = args.host or config.default_host or (next(iter(config.hosts)) if len(config.hosts) == 1 else "sim")
    if args.resume is not None:
        where = store.resumable(host, args.resume or None)
        if where is None:
            print(f"kimitui tune: no unfinished tune on {host} to resume"
                  + (f" with id {args.resume}" if args.resume else "") + f" (in {store.tunes_dir(host)})", file=sys.stderr)
            return EXIT_BAD_ARGS
        return _locked_run(args, where, "kimitui tune --resume", None)
    try:
        plan = build_plan(args, host)
    except ValueError as exc:
        print(f"kimitui tune: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    from kimitui.tune.plan import plan_lines

    simulated = host == "sim" or (host in config.hosts and config.hosts[host].sim)
    for line in plan_lines(plan, host, simulated):
        print(line)
    drive = drive_line(plan, simulated)
    if drive and (args.dry_run or args.allow_client_limit):
        print(f"kimitui tune: {drive}" + ("" if args.dry_run else "; tuning anyway (--allow-client-limit): those "
                                         "levels' figures are unsure and decide nothing"), file=sys.stderr)
    elif drive:
        print(f"kimitui tune: refused: {drive}; a tune on figures the client distorted would decide on the client, "
              "not the server (--allow-client-limit tunes anyway)", file=sys.stderr)
        return EXIT_BAD_ARGS
    if args.dry_run:
        return 0
    from kimitui.tune.tuner import new_state

    tune_id, where = store.new_tune_dir(host)
    return _locked_run(args, where, "kimitui tune", new_state(tune_id, host, plan))


def _locked_run(args: argparse.Namespace, where: Path, by: str, state: "TuneState | None") -> int:
    """Drive the tune in ``where`` while holding its lock (released however the tune ends); a resumed
    tune's state is read once the lock is ours, so it is the last one its previous driver saved."""
    from kimitui.tune import state as store
    from kimitui.tune.lock import TuneLocked, held

    try:
        with held(where, by) as lock:
            if lock.took_over:
                print(f"kimitui tune: {lock.took_over}", file=sys.stderr)
            if state is None:
                state = store.load(where)
            else:
                store.save(state, where)
            return asyncio.run(_tune(args, state, where))
    except TuneLocked as exc:
        print(f"kimitui tune: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except store.TuneStateError as exc:
        print(f"kimitui tune: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS


def build_plan(args: argparse.Namespace, host: str) -> "TunePlan":
    """The plan from the flags: start, candidates (defaults or given), workload, objective, limits."""
    from kimitui.launcher import guard
    from kimitui.live.controller import DEFAULT_PROFILE
    from kimitui.profiles import ProfileError, load_profile, scan_profiles
    from kimitui.tune import candidates as cands
    from kimitui.tune.state import TunePlan

    dirs = list(getattr(args, "profiles", None) or [])
    start_name = args.start or guard.baseline_name(host) or _running(args) or DEFAULT_PROFILE
    try:
        start = load_profile(start_name, dirs)
        given = [cands.parse_change(c) for c in args.change or []]
        for name in args.variant or []:
            cand, why = cands.from_profile(start, load_profile(name, dirs))
            if cand is None:
                raise ValueError(f"--variant {name}: {why or 'changes nothing a sweep measures'}")
            given.append(cand)
    except ProfileError as exc:
        raise ValueError(str(exc)) from exc
    if given:
        found, skipped = cands.drop_no_effect(start, given)
    else:
        good, _broken = scan_profiles(dirs)
        found, skipped = cands.default_candidates(start, good, draft_model=args.draft_model)
    _check_objective(args.objective, args.slo)
    return TunePlan(start=start.name, candidates=found, skipped=skipped, workload=_workload(args),
                    objective=args.objective, slo=args.slo, cost=_cost(args), repeat_limit=args.repeat_limit,
                    max_steps=args.max_steps, time_budget_s=args.time_budget, sim_time_scale=args.time_scale)


def drive_line(plan: "TunePlan", simulated: bool) -> str | None:
    """What this client can drive against the tune's workload at the host's clock (a simulator's time scale:
    ``--time-scale``, else the start profile's): the one line said when the plan exceeds it, else None."""
    from kimitui.loadgen.drive_calibrate import calibrate, spec_drive

    scale: float | None = None
    if simulated:
        scale = plan.sim_time_scale
        if scale is None:
            from kimitui.sim.settings import SimConfigError, load_settings

            try:
                scale = load_settings(plan.start).time_scale
            except SimConfigError:
                scale = 1.0
    try:
        cost = calibrate()
    except RuntimeError:  # no loopback socket pair here: nothing measured, nothing claimed
        return None
    return spec_drive(plan.workload, cost, scale).line()


def _running(args: argparse.Namespace) -> str | None:
    """The profile kimitui runs on the host (the start when no baseline is marked); None if nothing or unreachable."""
    from kimitui.commands.common import on_host
    from kimitui.launcher.select import find_running

    found: list[str] = []

    async def look(host: "Host") -> int:
        hit = await find_running(host)
        if hit is not None:
            found.append(hit[1].profile)
        return 0

    asyncio.run(on_host(args, look, lambda exc: None))
    return found[0] if found else None


def _cost(args: argparse.Namespace) -> dict[str, float | str] | None:
    """The config's ``[cost]`` for the plan; ``--objective cost_per_mtok`` without one is an error naming the file."""
    from kimitui.config import ConfigError, config_path, load_config

    try:
        config = load_config(getattr(args, "config", None))
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    rates = config.cost.rates()
    if rates is None:
        if args.objective == "cost_per_mtok":
            where = config.path or config_path(getattr(args, "config", None))[0]
            raise ValueError(f"--objective cost_per_mtok needs prices: add [cost] gpu_hour = ... and/or kwh = ... "
                             f"to {where}")
        return None
    cost: dict[str, float | str] = {"currency": rates.currency}
    if rates.gpu_hour is not None:
        cost["gpu_hour"] = rates.gpu_hour
    if rates.kwh is not None:
        cost["kwh"] = rates.kwh
    return cost


def _check_objective(objective: str, slo: str | None) -> None:
    if objective in ("peak", "tokens_per_kj", "cost_per_mtok"):
        return
    if objective.startswith("level:") and objective[6:].isdigit() and int(objective[6:]) > 0:
        return
    if objective == "capacity":
        if not slo:
            raise ValueError("--objective capacity needs --slo, e.g. --slo 'ttft_p99<=2s,decode_p50>=20'")
        from kimitui.capacity.slo import parse_slo

        parse_slo(slo)
        return
    raise ValueError(f"--objective {objective!r}: peak, level:C (e.g. level:1), capacity, tokens_per_kj or "
                     "cost_per_mtok")


def _workload(args: argparse.Namespace) -> "SweepSpec":
    spec = build_spec(args, require_url=False)
    update: dict[str, Any] = {}
    if args.levels is None and not args.like:
        update["levels"] = TUNE_LEVELS
    if args.warmup is None and not args.like:
        update["warmup_requests"] = 2
    if args.objective.startswith("level:") and int(args.objective[6:]) not in (update.get("levels") or spec.levels):
        raise ValueError(f"--objective {args.objective}: C={args.objective[6:]} is not one of the levels")
    return spec.model_copy(update=update)


async def _tune(args: argparse.Namespace, state: "TuneState", where: Path) -> int:
    from kimitui.live import LiveController
    from kimitui.live.tunes import ControllerHost
    from kimitui.tune.tuner import Tuner

    ctl = LiveController(config_path=args.config, host=state.host, profile_dirs=list(getattr(args, "profiles", None) or []),
                         autostart=False, sim_time_scale=state.plan.sim_time_scale, sim_port=args.sim_port)
    ctl.keep_serving = True
    ctl.session.add_sink(_Printer(args.json))
    await ctl.start()
    code = EXIT_BAD_ARGS
    try:
        if not await _wait_connected(ctl):
            print(f"kimitui tune: cannot use host {state.host}", file=sys.stderr)
            return EXIT_BAD_ARGS
        tuner = Tuner(ControllerHost(ctl), state, where)
        code = await _run_with_signals(tuner)
    finally:
        await ctl.shutdown()
    _print_end(state, args.json, ctl.last_recording_path)
    return code


async def _wait_connected(ctl: "LiveController", timeout: float = 120.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not ctl.connected and loop.time() < end:
        await asyncio.sleep(0.1)
    return ctl.connected


async def _run_with_signals(tuner: Any) -> int:
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(tuner.run())
    hits: list[int] = []

    def on_signal() -> None:
        hits.append(1)
        if len(hits) == 1:
            print("\nkimitui tune: stopping the step under way and swapping back to the best "
                  "(Ctrl-C again to leave at once; --resume carries on)", file=sys.stderr)
            tuner.stop("interrupted")
        else:
            task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        state = await task
    except asyncio.CancelledError:
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return {"finished": 0, "stopped": 0, "interrupted": 130}.get(state.status, EXIT_FAILED)


class _Printer:
    """One line per step decision and per phase, on stderr (stdout keeps the report)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.last: str = ""

    def __call__(self, ev: "Event") -> None:
        from kimitui.events import Marker

        if isinstance(ev, Marker) and ev.label.startswith("tune") and ev.label != self.last:
            self.last = ev.label
            print(ev.label, file=sys.stderr)


def _print_end(state: "TuneState", as_json: bool, recording: str | None) -> None:
    from kimitui.tune.report import to_json

    if as_json:
        print(json.dumps({**to_json(state), "recording": recording}))
        return
    print(f"\n{state.status}: best {state.best} (started from {state.plan.start})"
          + (f"; {state.note}" if state.note else ""))
    for s in state.steps:
        print(f"  {s.index}. {s.candidate.label} ({s.profile or '-'}): {s.status}"
              + (f", {s.objective_change}" if s.objective_change else "") + (f": {s.reason}" if s.reason else ""))
        if s.cause:
            print(f"     root cause: {s.cause}")
    if state.report_path:
        print(f"report: {state.report_path}")
    if state.winner_path:
        print(f"winner: {state.winner_path}")
    if recording:
        print(f"recorded to {recording}")
    if state.status in ("interrupted", "running"):
        print(f"resume with: kimitui tune --resume {state.tune_id}")
