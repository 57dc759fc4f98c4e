"""``kimitui sweep``: a headless concurrency sweep with a progress bar and per-level tables.

The sweep runs in the load process (:class:`kimitui.loadgen.runner.SweepRunner`);
this command only draws progress on stderr, prints tables (or one JSON summary
with ``--json``) on stdout and, with ``--out``, records every event.
``--like RECORDING`` repeats the workload of a recorded sweep; options given
explicitly override it.  Ctrl-C aborts: finished requests are kept and reported.

Problems the sweep survives (no ``/flush_cache``, no ``/server_info``) are said
once on stderr.  Under each table: the level's status when it is not ``ok``
(such a level is never the peak), the first message of each error class and
the load process's own health (marked when it distorted the figures).

Exit codes: 0 completed or stopped by a stop rule, 1 failed or a level in which
every request failed (a wrong ``--model``), 2 bad arguments or unreachable
server, 130 aborted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from pydantic import ValidationError

from kimitui.loadgen.prompts import prompt_source
from kimitui.recording import RecordingError, RecordingWriter, spec_from_recording
from kimitui.commands.common import start_otlp_if_asked
from kimitui.session import Session
from kimitui.analysis.level_stats import effective_status, peak_level, seed_comparable
from kimitui.events import (
    ErrorEvent,
    Event,
    LevelResult,
    LevelStarted,
    Percentiles,
    SweepProgress,
    SWEEP_MODES,
    SweepResult,
    SweepSpec,
)

if TYPE_CHECKING:
    from kimitui.analysis.cost import CostRates
    from kimitui.analysis.energy import EnergyFolder
    from rich.table import Table

EXIT_BAD_ARGS = 2
_SPEC_OPTIONS = ("url", "model", "levels", "mode", "max_tokens", "prompts", "duration", "requests", "warmup", "rate",
                 "repeats", "flush_cache", "stall_timeout", "request_timeout", "level_time_limit", "max_error_rate",
                 "extra_body", "no_ignore_eos", "like", "workers")


def levels_arg(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels {text!r}: a comma-separated list of integers, e.g. 1,8,32") from None
    if not levels or any(c < 1 or c > 100_000 for c in levels):
        raise argparse.ArgumentTypeError(f"levels {text!r}: each level must be between 1 and 100000")
    return levels


Number = TypeVar("Number", int, float)


def positive(kind: Callable[[str], Number]) -> Callable[[str], Number]:
    """An argparse type: a number of ``kind`` above zero, refused in words otherwise."""

    def parse(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
        return value

    return parse


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"extra-body {text!r}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"extra-body {text!r}: must be a JSON object")
    return value


def add_workload_args(p: argparse.ArgumentParser) -> None:
    """What a level's requests are and where they go: shared by ``sweep``, ``capacity`` and ``tune``
    (:func:`build_spec` reads them; options a command does not register read as not given)."""
    p.add_argument("--url", help="server base URL, e.g. http://gpu-host.example:30000")
    p.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    p.add_argument("--mode", choices=SWEEP_MODES, help="load mode (default sustained)")
    p.add_argument("--max-tokens", type=positive(int), help="output tokens per request (default 512)")
    p.add_argument("--prompts", help="'seed' (the field notes' five prompts) or 'random:N' (N-token prompts)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--duration", type=positive(float), metavar="S", help="measure each level for S seconds")
    g.add_argument("--requests", type=positive(int), metavar="N", help="measure N requests per level")
    p.add_argument("--warmup", type=int, metavar="N", help="warm-up requests per level (not measured)")
    p.add_argument("--rate", type=positive(float), metavar="RPS", help="arrival rate for --mode rate")
    p.add_argument("--workers", type=positive(int), metavar="N",
                   help="load processes sharing each level (default 1; docs/load-worker.md)")
    p.add_argument("--flush-cache", action="store_true", default=None, help="POST /flush_cache before each level")
    p.add_argument("--no-ignore-eos", action="store_true", help="let requests stop at EOS (lengths then vary)")
    p.add_argument("--stall-timeout", type=positive(float), metavar="S",
                   help="give up on a stream silent for S s (default off: a silence is a straggler, "
                        "measured, until the request deadline)")
    p.add_argument("--request-timeout", type=positive(float), metavar="S", help="per-request deadline (900)")
    p.add_argument("--extra-body", type=_json_object, metavar="JSON",
                   help="extra JSON fields for every request body, e.g. '{\"top_p\": 0.9}'")
    p.add_argument("--like", metavar="RECORDING", help="repeat the workload of the sweep in this recording")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("sweep", help="run a concurrency sweep headless (progress bar, tables, --json)")
    add_workload_args(p)
    p.add_argument("--levels", type=levels_arg, help="concurrency levels, e.g. 1,8,32,64 (default 1,8,32)")
    p.add_argument("--repeats", type=positive(int), help="run the levels this many times")
    p.add_argument("--level-time-limit", type=positive(float), metavar="S", help="stop the sweep when a level runs longer")
    p.add_argument("--max-error-rate", type=float, metavar="F", help="stop after a level failing more than F (0.5)")
    p.add_argument("--profile", help="label the sweep with the profile it ran against")
    p.add_argument("--host", metavar="NAME",
                   help="stream this configured host's GPUs and follow its server's log beside the sweep, as the "
                        "cockpit does ('sim': the simulated host); the URL is its server's unless --url is given")
    p.add_argument("--idle-s", type=float, metavar="S", default=None,
                   help="with --host: stream the GPUs S seconds before the first level to measure idle power (10; 0: no)")
    p.add_argument("--out", metavar="FILE.jsonl", help="record every event to this file (gzip while recording if it ends in .gz)")
    p.add_argument("--otlp-endpoint", metavar="URL", default=None,
                   help="send the finished sweep as a trace to this OpenTelemetry collector (OTLP/HTTP; overrides "
                        "[otlp] endpoint)")
    p.add_argument("--json", action="store_true", help="print one machine-readable summary instead of tables")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")
    p.set_defaults(func=run)


def build_spec(args: argparse.Namespace, *, require_url: bool = True) -> SweepSpec:
    """The spec from ``--like`` (if any) with every explicitly given option applied on top.

    ``require_url=False``: a command that finds the URL itself (``tune``, on a host) leaves it empty."""
    base: dict[str, Any] = {}
    args = argparse.Namespace(**{**{k: None for k in _SPEC_OPTIONS}, **vars(args)})
    if args.like:
        base = spec_from_recording(args.like).model_dump()
    given = {
        "url": args.url, "model": args.model, "levels": args.levels, "mode": args.mode,
        "max_tokens": args.max_tokens, "prompts": args.prompts, "duration_s": args.duration,
        "requests_per_level": args.requests, "warmup_requests": args.warmup, "rate_rps": args.rate,
        "repeats": args.repeats, "flush_cache": args.flush_cache,
        "stall_timeout_s": args.stall_timeout, "request_timeout_s": args.request_timeout,
        "level_time_limit_s": args.level_time_limit, "max_error_rate": args.max_error_rate,
        "extra_body": args.extra_body, "workers": args.workers,
    }
    if args.no_ignore_eos:
        given["ignore_eos"] = False
    if args.duration is not None:
        base.pop("requests_per_level", None)
    if args.requests is not None:
        base.pop("duration_s", None)
    base.update({k: v for k, v in given.items() if v is not None})
    base.setdefault("levels", [1, 8, 32])
    base.setdefault("model", "")
    if not base.get("url"):
        if require_url:
            raise ValueError("--url is required (or --like a recording that has one)")
        base["url"] = ""
    spec = SweepSpec.model_validate(base)
    prompt_source(spec.prompts)  # raises PromptError (a ValueError) naming the bad value
    if spec.mode == "rate" and not spec.rate_rps:
        raise ValueError("--mode rate needs --rate RPS")
    return spec


def run(args: argparse.Namespace) -> int:
    try:
        spec = build_spec(args, require_url=not getattr(args, "host", None))
    except (ValueError, RecordingError, ValidationError) as exc:
        print(f"kimitui sweep: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if getattr(args, "host", None):
        from kimitui.commands.sweep_host import run_on_host  # the host's GPUs and log beside the sweep

        return run_on_host(spec, args)
    if not spec.model:
        from kimitui.loadgen.sweep import resolve_model  # lazily: the load generator costs ~0.13 s, and every command module is imported to build the parser

        try:
            spec = spec.model_copy(update={"model": asyncio.run(resolve_model(spec.url))})
        except Exception as exc:  # ModelLookupError says what happened; anything else at least its type
            print(f"kimitui sweep: cannot ask for the model: {str(exc) or type(exc).__name__}; pass --model",
                  file=sys.stderr)
            return EXIT_BAD_ARGS
    return asyncio.run(_run(spec, args))


async def publish_server_info(session: Session, url: str, host: str) -> None:
    """One ``ServerInfo`` before the sweep, so a recording names the server's effective
    args and ``kimitui report --vs`` can tell which knobs differ.  A server without
    ``/server_info`` is reported and the sweep goes on."""
    from kimitui.launcher.http_ready import client  # lazily, as in run (httpx, the poller)
    from kimitui.telemetry.metrics_poll import MetricsPoller, ServerInfoMissing

    async with client(url) as http:
        try:
            await MetricsPoller(session, url, host=host, client=http).poll_server_info()
        except ServerInfoMissing:
            session.publish(ErrorEvent(host=host, source="sweep", message=(
                f"{url}/server_info unavailable: this server has no /server_info (nor /get_server_info); "
                "the recording will not name its args")))
        except Exception as exc:
            session.publish(ErrorEvent(host=host, source="sweep", message=f"{url}/server_info unavailable: {exc}"))


async def say_drive_limit(session: Session, spec: SweepSpec, host: str) -> None:
    """One line before the sweep when its plan exceeds what this client can drive
    (:mod:`kimitui.loadgen.drive_budget`); the sweep goes on (``kimitui capacity`` refuses instead)."""
    from kimitui.loadgen.drive_calibrate import preflight  # lazily, as in run

    line = (await preflight(spec)).line()
    if line:
        session.publish(ErrorEvent(host=host, source="sweep", severity="warning", message=line))


async def _run(spec: SweepSpec, args: argparse.Namespace, *, session: Session | None = None,
               host_name: str | None = None, before: Callable[[], Awaitable[None]] | None = None) -> int:
    """The sweep; ``session`` and ``host_name``: a ``--host`` sweep's, whose GPU and log events share it;
    ``before``: run once the recording is open, before anything is sent (the idle power is measured there)."""
    from kimitui.loadgen.runner import SweepRunner  # lazily, as in run

    host = host_name or urlparse(spec.url).hostname or "sweep"
    session = session if session is not None else Session(host=host)
    writer = None
    if args.out:
        try:
            writer = RecordingWriter(args.out, hosts=[host], meta={"command": "sweep"}).start()
        except (RecordingError, OSError) as exc:
            print(f"kimitui sweep: --out: {exc}", file=sys.stderr)
            return EXIT_BAD_ARGS
        session.add_sink(writer)
    from kimitui.analysis.energy import EnergyFolder  # lazily, as the load generator

    energy = EnergyFolder()  # each level's energy from the GPU samples a --host sweep streams (issue 34)
    session.add_sink(energy.add)
    progress = None if (args.no_progress or args.json and not sys.stderr.isatty()) else _Progress(spec)
    if progress is not None:
        session.add_sink(progress.on_event)
        progress.start()
    session.add_sink(_Problems(progress).on_event)
    otlp = start_otlp_if_asked(args, session)
    if before is not None:
        await before()
    await publish_server_info(session, spec.url, host)
    from kimitui.live.sweeps import with_server_caps  # the cockpit's rule: ask only what /server_info allows

    spec = await with_server_caps(spec)
    await say_drive_limit(session, spec, host)
    runner = SweepRunner(session, spec, profile=args.profile)
    loop = asyncio.get_running_loop()
    await runner.start()
    aborting: list[asyncio.Task[SweepResult]] = []

    def on_sigint() -> None:
        if not aborting:
            aborting.append(loop.create_task(runner.abort()))

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        result = await runner.wait()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if progress is not None:
            progress.stop()
        path = await writer.aclose() if writer is not None else None
        if otlp is not None:
            await asyncio.to_thread(otlp.close)  # the sweep's trace goes out before the command returns
    energy.finish()
    rates = cost_rates(args)
    if args.json:
        print(json.dumps(summary(spec, result, runner.levels, str(path) if path else None, energy, rates)))
    else:
        print_tables(runner.levels, result, str(path) if path else None, energy, rates)
    code = {"completed": 0, "stopped": 0, "aborted": 130}.get(result.outcome, 1)
    dead = all_failed(runner.levels)
    for lv in dead:
        first = next(iter(lv.errors.values()), "") if lv.errors else ""
        hint = " (is --model right?)" if "model" in first.lower() else ""
        print(f"kimitui sweep: every request at C={lv.concurrency} failed"
              + (f": {first}" if first else "") + hint, file=sys.stderr)
    return 1 if dead and code == 0 else code


def all_failed(levels: list[LevelResult]) -> list[LevelResult]:
    """Levels that sent requests and got not one completed: a sweep with one did not measure, it failed."""
    return [lv for lv in levels if lv.requests and lv.ok == 0 and effective_status(lv)[0] == "failed"]


class _Problems:
    """Says each problem the sweep survived once, plainly, on stderr (they are recorded as events too)."""

    def __init__(self, progress: "_Progress | None") -> None:
        self.progress = progress
        self.said: set[str] = set()

    def on_event(self, ev: Event) -> None:
        if not isinstance(ev, ErrorEvent) or ev.source not in ("sweep", "telemetry") or ev.message in self.said:
            return
        self.said.add(ev.message)
        text = f"kimitui sweep: {ev.message}" + (f" ({ev.detail})" if ev.detail else "")
        if self.progress is not None:
            self.progress.progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr)


def cost_rates(args: argparse.Namespace) -> CostRates | None:
    """The config's ``[cost]`` prices for the tables (None: none, or a config that cannot be read: said once)."""
    from kimitui.config import ConfigError, load_config

    try:
        return load_config(getattr(args, "config", None)).cost.rates()
    except ConfigError as exc:
        print(f"kimitui sweep: no cost per million tokens: {exc}", file=sys.stderr)
        return None


def summary(spec: SweepSpec, result: SweepResult, levels: list[LevelResult], recording: str | None,
            energy: EnergyFolder | None = None, rates: CostRates | None = None) -> dict[str, Any]:
    """The ``--json`` output: one object (each level's ``energy`` and ``cost`` as in ``kimitui report``'s JSON)."""
    from kimitui.analysis.knee import knee_of_levels
    from kimitui.report.energy_render import idle_dict, knee_dict

    idle = energy.idle_of(result.sweep_id) if energy is not None else None
    return {
        "sweep_id": result.sweep_id,
        "outcome": result.outcome,
        "reason": result.reason,
        "peak_tok_s": result.peak_tok_s,
        "recording": recording,
        "spec": spec.model_dump(mode="json"),
        "idle_power": idle_dict(idle),
        "knee": knee_dict(knee_of_levels(levels)),
        "levels": [_level_json(lv, energy, rates) for lv in levels],
    }


def _level_json(lv: LevelResult, energy: EnergyFolder | None = None, rates: CostRates | None = None) -> dict[str, Any]:
    out = lv.model_dump(mode="json", exclude={"kind", "host", "sweep_id"})
    out["valid"] = lv.valid
    from kimitui.report.energy_render import cost_dict, energy_dict, one_level

    row = one_level(lv, energy.level(lv.sweep_id, lv.concurrency, lv.repeat) if energy is not None else None, rates)
    out["energy"] = energy_dict(row)
    out["cost"] = cost_dict(row)
    return out


# --------------------------------------------------------------------------- output


class _Progress:
    """A rich progress bar on stderr: one bar over the sweep's levels, live figures in its text."""

    def __init__(self, spec: SweepSpec) -> None:
        # rich is imported where it draws: every command module is imported to build the parser.
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self.task = self.progress.add_task("starting", total=len(spec.levels) * spec.repeats)

    def start(self) -> None:
        self.progress.start()

    def stop(self) -> None:
        self.progress.stop()

    def on_event(self, ev: Event) -> None:
        if isinstance(ev, LevelStarted):
            self.progress.update(self.task, description=f"C={ev.concurrency:<4} starting")
        elif isinstance(ev, SweepProgress):
            rate = ev.level_tokens / ev.level_elapsed_s if ev.level_elapsed_s > 0 else 0.0
            self.progress.update(self.task, description=(
                f"C={ev.concurrency:<4} done {ev.done:>4}  failed {ev.failed:>3}  "
                f"in flight {ev.n_in_flight:>4}  {rate:8.1f} tok/s"))
        elif isinstance(ev, LevelResult):
            self.progress.advance(self.task)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


def _num(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def level_table(lv: LevelResult) -> Table:
    """One level: headline figures in the title, percentiles as rows; a level that is not ``ok`` says so first."""
    from rich.table import Table  # where it draws, as in _Progress

    status = effective_status(lv)[0]
    mark = "" if status == "ok" else f"  {status.upper()}"
    title = (f"C={lv.concurrency}" + (f" (repeat {lv.repeat})" if lv.repeat else "") + mark
             + f"  ok {lv.ok}/{lv.requests}  agg {_num(lv.agg_tok_s)} tok/s  "
             + f"steady {_num(lv.steady_tok_s)} tok/s over {_num(lv.steady_window_s)} s  wall {lv.wall_s:.1f} s")
    table = Table(title=title, title_justify="left", min_width=min(len(title), 120))
    for col in ("metric", "p50", "p90", "p99", "mean"):
        table.add_column(col, justify="left" if col == "metric" else "right")

    def row(name: str, p: Percentiles, ms: bool) -> None:
        f = _ms if ms else _num
        table.add_row(name, f(p.p50), f(p.p90), f(p.p99), f(p.mean))

    row("TTFT ms", lv.ttft, True)
    row("TPOT ms", lv.tpot, True)
    row("ITL ms", lv.itl, True)
    row("decode tok/s", lv.decode_tok_s, False)
    row("e2e tok/s", lv.e2e_tok_s, False)
    return table


def client_line(lv: LevelResult) -> str | None:
    """The load process's health over the level, in one line."""
    c = lv.client
    if c is None:
        return None
    parts = [f"loop lag max {_num(c.loop_lag_max_ms)} ms (p50 {_num(c.loop_lag_p50_ms)})",
             f"CPU max {_num(c.cpu_max_pct, '{:.0f}')} %",
             f"dispatch p99 max {_num(c.dispatch_delay_max_p99_ms)} ms"]
    return "client: " + ", ".join(parts)


def peak_text(levels: list[LevelResult]) -> str:
    """``peak 1,566 tok/s at C=256 (seed-comparable aggregate; steady 1,570)``: the peak every view names (the
    cockpit's curve, the report) is the aggregate; the steady rate is said beside it, labelled (issue 29)."""
    peak = peak_level(levels, seed_comparable)
    if peak is None or peak.agg_tok_s is None:
        return "no valid level, no peak"
    steady = f"; steady {peak.steady_tok_s:,.0f}" if peak.steady_tok_s is not None else ""
    return f"peak {peak.agg_tok_s:,.0f} tok/s at C={peak.concurrency} (seed-comparable aggregate{steady})"


def print_tables(levels: list[LevelResult], result: SweepResult, recording: str | None,
                 energy: EnergyFolder | None = None, rates: CostRates | None = None) -> None:
    from rich.console import Console  # where it draws, as in _Progress
    from rich.markup import escape

    from kimitui.analysis.knee import knee_of_levels
    from kimitui.report.energy_render import level_energy_line

    console = Console()
    for lv in levels:
        console.print(level_table(lv))
        figures = energy.level(lv.sweep_id, lv.concurrency, lv.repeat) if energy is not None else None
        console.print(f"  {escape(level_energy_line(lv, figures, rates))}", highlight=False)
        status, reason = effective_status(lv)
        if status != "ok":
            console.print(f"  [bold]{status}:[/bold] {escape(reason)}; not a peak")
        if lv.failures:
            console.print("  failures: " + ", ".join(f"{k} {v}" for k, v in sorted(lv.failures.items())))
        for cls, msg in sorted(lv.errors.items()):
            console.print(f"  first {cls}: {escape(msg)}", highlight=False)
        for s in lv.stragglers:
            when = datetime.fromtimestamp(s.gap_start).strftime("%H:%M:%S") if s.gap_start else "?"
            console.print(f"  straggler {s.request_id}: {s.reason}; longest gap at {when}")
        line = client_line(lv)
        if line:
            console.print(f"  {line}", highlight=False)
        if lv.client_distorted:
            console.print(f"  [bold]client distorted:[/bold] {escape(lv.client_distorted)}", highlight=False)
        if lv.stopped:
            console.print(f"  [bold]stopped:[/bold] {escape(lv.stopped)}")
        console.print()
    console.print(f"sweep {result.sweep_id}: {escape(result.outcome)}"
                  + (f" ({escape(result.reason)})" if result.reason else "") + f"; {peak_text(levels)}",
                  highlight=False)
    idle = energy.idle_of(result.sweep_id) if energy is not None else None
    if idle is not None:
        console.print(f"idle power before the sweep: {idle.mean_w:,.0f} W over {idle.gpus} GPUs ({idle.seconds:.0f} s)"
                      if idle.mean_w is not None else f"idle power not measured: {escape(idle.reason)}",
                      highlight=False)
    console.print(escape(knee_of_levels(levels).line()), highlight=False)
    if recording:
        console.print(f"recorded to {recording}")
