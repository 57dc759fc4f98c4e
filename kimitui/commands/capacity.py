"""``kimitui capacity``: the highest concurrency (or request rate) at which an SLO holds.

The search (:func:`kimitui.capacity.search.find_capacity`) measures one-level sweeps through the
load process, as ``kimitui sweep`` does: start at ``--start``, double until the SLO fails, then
bisect to the resolution; a point too close to call is measured again and judged on the pooled
requests.  Each probe is shown as it finishes (stderr), then the table of probes and the answer
in one sentence (stdout), or one JSON object with ``--json``.  With neither ``--url`` nor ``--host``
the server is the one kimitui runs on the configured host (``sim`` by default), as in the cockpit.
A simulator's SLO is scaled to its time scale (and said); a plan that asks more chunks per second than
this client can drive (:mod:`kimitui.loadgen.drive_budget`) is refused unless ``--allow-client-limit``.  ``--out`` records every event,
with a ``Marker`` per probe; ``--reuse RECORDING`` takes points already measured with the same
workload from a recording instead of measuring them again.

Exit codes: 0 answered (also "holds at every C tried"), 1 the SLO fails already at the start,
2 bad arguments, an unreachable server or a plan beyond the client, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from kimitui.commands.sweep import positive, add_workload_args, build_spec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from kimitui.analysis.knee import Knee
    from kimitui.capacity.efficiency import Efficiency
    from kimitui.session import Session

    from kimitui.capacity import CapacityAnswer, CurvePoint, SearchParams, Slo
    from kimitui.capacity.answer import Probe
    from kimitui.events import Event, SweepSpec
    from kimitui.host.base import Host
    from kimitui.loadgen.drive_budget import DriveCheck

EXIT_FAILS_AT_START = 1
EXIT_BAD_ARGS = 2
DEFAULT_MAX_C = 512
DEFAULT_MAX_RATE = 100.0
PROG = "kimitui capacity"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # "resolve": this command's --rate (a flag with an optional first rate) replaces the workload's --rate RPS
    p = subparsers.add_parser("capacity", conflict_handler="resolve",
                              help="the highest concurrency (or request rate) at which an SLO holds")
    add_workload_args(p)
    p.add_argument("--host", metavar="NAME",
                   help="measure the server kimitui runs on this configured host ('sim': the simulated host); "
                        "with neither --url nor --host: the configured default host, else 'sim', as the cockpit")
    p.add_argument("--slo", required=True, metavar="TERMS",
                   help="e.g. 'ttft_p99<=2s,decode_p50>=20' (ttft/tpot/itl/e2e in s or ms, decode tok/s per user, "
                        "error_rate<=1%%; stats p50, p90, p99, mean)")
    p.add_argument("--rate", dest="search_rate", nargs="?", const=0.0, type=positive(float), metavar="RPS",
                   help="search over the request rate (req/s) instead of the concurrency; RPS: the first rate tried")
    p.add_argument("--start", type=positive(float), metavar="N", help="first point tried (default 1)")
    p.add_argument("--max", dest="maximum", type=positive(float), metavar="N",
                   help=f"highest point tried (default C={DEFAULT_MAX_C}, or {DEFAULT_MAX_RATE:g} req/s)")
    p.add_argument("--resolution", type=positive(float), metavar="N",
                   help="stop when the bracket is this narrow (default 12.5 %% of the answer, at least 1; rates 10 %%)")
    p.add_argument("--repeats", type=positive(int), default=2, metavar="N",
                   help="measurements of a point too close to call, in all (default 2)")
    p.add_argument("--allow-client-limit", action="store_true",
                   help="measure even when the plan asks more chunks/s than this client can drive (the answer "
                        "then measures the client too; default: refuse, saying the highest --max and time scale "
                        "it can drive)")
    p.add_argument("--reuse", action="append", default=[], metavar="RECORDING",
                   help="take points from this recording where its workload matches (repeatable)")
    p.add_argument("--objective", choices=("capacity", "tokens_per_kj", "cost_per_mtok"), default="capacity",
                   help="besides the capacity: the point within the SLO with the most tokens per kJ of GPU energy, "
                        "or the lowest cost per million tokens ([cost] in the config); GPU power is streamed with "
                        "--host (default: the capacity alone)")
    p.add_argument("--profile", help="label the sweeps with the profile they ran against")
    p.add_argument("--out", metavar="FILE.jsonl", help="record every event to this file (gzip if it ends in .gz)")
    p.add_argument("--json", action="store_true", help="print one machine-readable object instead of tables")
    p.add_argument("--no-progress", action="store_true", help="no live progress on stderr")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_BAD_ARGS


def search_params(args: argparse.Namespace) -> tuple[SearchParams, bool]:
    """(the search's parameters, whether it is over the rate); ValueError naming the bad option."""
    from kimitui.capacity import SearchParams

    rate = args.search_rate is not None or args.mode == "rate"
    start = args.start or args.search_rate or 1.0
    maximum = args.maximum or (DEFAULT_MAX_RATE if rate else float(DEFAULT_MAX_C))
    if not rate:
        for name, value in (("--start", start), ("--max", maximum), ("--resolution", args.resolution)):
            if value is not None and not float(value).is_integer():
                raise ValueError(f"{name} {value:g}: a concurrency is a whole number")
    if maximum < start:
        raise ValueError(f"--max {maximum:g} is below --start {start:g}")
    return SearchParams(start=start, maximum=maximum, resolution=args.resolution, repeats=args.repeats,
                        rate=rate), rate


def run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from kimitui.capacity import SloError, parse_slo
    from kimitui.recording import RecordingError

    try:
        slo = parse_slo(args.slo)
        params, rate = search_params(args)
        if args.host and args.url:
            raise ValueError("--url and --host: give one (--host finds the URL of the server it runs)")
        if rate:
            args.mode = None  # the probes set the rate mode themselves
        spec = build_spec(args, require_url=False)
    except (SloError, ValueError, RecordingError, ValidationError) as exc:
        return _fail(str(exc))
    if spec.url and not args.host:  # --url (or --like a recording that names one)
        return asyncio.run(_measure(spec, slo, params, args))

    from kimitui.commands.common import on_host

    return asyncio.run(on_host(args, lambda host: _on_host(host, spec, slo, params, args),
                               lambda exc: print(f"{PROG}: {exc}", file=sys.stderr)))


async def _on_host(host: Host, spec: SweepSpec, slo: Slo, params: SearchParams, args: argparse.Namespace) -> int:
    """The search against the server kimitui runs on ``host`` (reached through the link over SSH), with the
    host's GPUs streamed into the search's session: each probe gets its power and energy (issue 34)."""
    from kimitui.launcher.reach import reach_server
    from kimitui.launcher.select import find_running
    from kimitui.live.headless_host import HeadlessHost
    from kimitui.live.profiles import ProfileBook
    from kimitui.session import Session

    found = await find_running(host)
    if found is None:
        return _fail(f"no server kimitui started runs on host {host.name!r} (start one with `kimitui swap PROFILE"
                     f"{'' if host.name == 'sim' else ' --host ' + host.name}` or the cockpit, or pass --url)")
    _, record = found
    url = await reach_server(host, record.extra.get("bind_host"), record.port)
    if args.profile is None:
        args.profile = record.profile
    session = Session(host=host.name)
    session.bind_loop(asyncio.get_running_loop())
    host.set_event_callback(session.publish)
    telemetry = HeadlessHost(host, session, profiles=ProfileBook(list(getattr(args, "profiles", None) or [])))
    try:
        await telemetry.start_gpus()
        return await _measure(spec.model_copy(update={"url": url}), slo, params, args, session=session)
    finally:
        await telemetry.close()


async def _measure(spec: SweepSpec, slo: Slo, params: SearchParams, args: argparse.Namespace, *,
                   session: Session | None = None) -> int:
    """Resolve the model, scale the SLO to a simulator's clock, check what the client can drive, take what
    recordings have, run the search; print and return the exit code."""
    from kimitui.capacity.probe import recorded_probes
    from kimitui.loadgen.drive_calibrate import server_time_scale
    from kimitui.loadgen.sweep import resolve_model
    from kimitui.recording import RecordingError

    if not spec.model:
        try:
            spec = spec.model_copy(update={"model": await resolve_model(spec.url)})
        except Exception as exc:  # ModelLookupError says what happened; anything else at least its type
            return _fail(f"cannot ask {spec.url} for the model: {str(exc) or type(exc).__name__}; pass --model")
    time_scale = await server_time_scale(spec.url)
    if time_scale is not None and time_scale != 1.0:
        slo = slo.scaled(time_scale)
        print(f"{PROG}: {slo.scale_note()}: {slo.describe()}", file=sys.stderr)
    drive = await drive_check(spec, params, time_scale)
    line = drive.line()
    if line and not args.allow_client_limit:
        return _fail(refusal(line, drive, params))
    if line:
        print(f"{PROG}: {line}; measuring anyway (--allow-client-limit)", file=sys.stderr)
    args.drive = drive.to_json()
    try:
        recorded = recorded_probes(args.reuse, spec, slo, rate=params.rate)
    except (RecordingError, OSError, ValueError) as exc:
        return _fail(f"--reuse: {exc}")
    return await _search(spec, slo, params, args, recorded, session=session)


def search_levels(params: SearchParams) -> list[int]:
    """The concurrencies a search may visit, as far as the plan says: doubling from the start to the max."""
    levels, x = [], int(params.start)
    while x < params.maximum:
        levels.append(x)
        x *= 2
    return [*levels, int(params.maximum)]


async def drive_check(spec: SweepSpec, params: SearchParams, time_scale: float | None) -> DriveCheck:
    """What this client can drive against the search's plan (its highest point decides)."""
    from kimitui.capacity.probe import RATE_CAP
    from kimitui.loadgen.drive_calibrate import preflight

    if params.rate:
        rated = spec.model_copy(update={"mode": "rate", "rate_rps": params.maximum})
        return await preflight(rated, levels=[RATE_CAP], time_scale=time_scale or 0.0)
    return await preflight(spec, levels=search_levels(params), time_scale=time_scale or 0.0)


def refusal(line: str, drive: DriveCheck, params: SearchParams) -> str:
    """The drive line with what to do: a lower --max, a lower time scale, or --allow-client-limit."""
    fix = []
    if not params.rate and 1 <= drive.max_concurrency < params.maximum:
        fix.append(f"--max {drive.max_concurrency}")
    if drive.max_time_scale is not None:
        fix.append("a simulator started at a lower --time-scale")
    fix.append("--allow-client-limit to measure anyway")
    return f"refusing the plan: {line}. Pass {', or '.join(fix)}"


async def _search(spec: SweepSpec, slo: Slo, params: SearchParams, args: argparse.Namespace,
                  recorded: dict[float, Probe], *, session: Session | None = None) -> int:
    from kimitui.capacity import find_capacity
    from kimitui.capacity.probe import LiveProbe, ProbeAborted, ReusingProbe
    from kimitui.commands.sweep import publish_server_info
    from kimitui.live.sweeps import with_server_caps
    from kimitui.recording import RecordingError, RecordingWriter
    from kimitui.session import Session

    session = session if session is not None else Session(host=urlparse(spec.url).hostname or "capacity")
    host = session.host
    energy = _Energy()
    session.add_sink(energy)
    writer = None
    if args.out:
        try:
            writer = RecordingWriter(args.out, hosts=[host], meta={"command": "capacity", "slo": slo.text}).start()
        except (RecordingError, OSError) as exc:
            return _fail(f"--out: {exc}")
        session.add_sink(writer)
    view = _View(slo, params.rate, live=not args.no_progress and not (args.json and not sys.stderr.isatty()))
    session.add_sink(view.on_event)
    await publish_server_info(session, spec.url, host)
    spec = await with_server_caps(spec)
    live = LiveProbe(session, spec, slo, rate=params.rate, profile=args.profile)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    def on_sigint() -> None:
        if not stopping:
            stopping.append(loop.create_task(live.abort()))

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    view.start()
    try:
        answer = await find_capacity(slo, ReusingProbe(live, recorded), params, on_point=view.point)
        answer = replace(answer, drive=getattr(args, "drive", None))
    except ProbeAborted:
        answer = None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        view.stop()
        path = await writer.aclose() if writer is not None else None
    recording = str(path) if path else None
    if answer is None:
        print(f"{PROG}: interrupted" + (f"; recorded to {recording}" if recording else ""), file=sys.stderr)
        return 130
    beside = energy.beside(answer, args)
    if args.json:
        print(json.dumps({**answer.to_json(), **beside.to_json(), "recording": recording,
                          "spec": spec.model_dump(mode="json")}))
    else:
        print_answer(answer, recording, beside.lines(answer))
    return 0 if answer.answer is not None else EXIT_FAILS_AT_START


class _Energy:
    """A session sink: each probe's level and its energy from the GPU samples, for what is said beside the answer."""

    def __init__(self) -> None:
        from kimitui.analysis.energy import EnergyFolder

        self.folder = EnergyFolder()
        self.levels: dict[float, list[tuple[str, int, int]]] = {}
        """x (C) -> each measured level's (sweep, C, repeat)."""

    def __call__(self, ev: Event) -> None:
        from kimitui.events import LevelResult

        self.folder.add(ev)
        if isinstance(ev, LevelResult):
            self.levels.setdefault(float(ev.concurrency), []).append((ev.sweep_id, ev.concurrency, ev.repeat))

    def beside(self, answer: CapacityAnswer, args: argparse.Namespace) -> Beside:
        from kimitui.capacity.efficiency import knee_of, most_efficient, point_energy
        from kimitui.config import ConfigError, load_config

        self.folder.finish()
        rates = None
        if args.objective == "cost_per_mtok":
            try:
                rates = load_config(getattr(args, "config", None)).cost.rates()
            except ConfigError as exc:
                print(f"{PROG}: no cost: {exc}", file=sys.stderr)
        points = {}
        for p in answer.curve:
            got = [e for key in self.levels.get(p.x, []) if (e := self.folder.level(*key)) is not None]
            points[p.x] = point_energy(p.x, got, rates)
        best = most_efficient(answer, points, args.objective) if args.objective != "capacity" else None
        return Beside(knee_of(answer), best, rates.currency if rates is not None else "")


class Beside:
    """The knee and, with an efficiency objective, the most efficient point within the SLO (issue 34)."""

    def __init__(self, knee: Knee | None, best: Efficiency | None, currency: str) -> None:
        self.knee, self.best, self.currency = knee, best, currency

    def lines(self, answer: CapacityAnswer) -> list[str]:
        out = [self.knee.line()] if self.knee is not None else []
        return out + ([self.best.line(answer, self.currency)] if self.best is not None else [])

    def to_json(self) -> dict[str, Any]:
        from kimitui.report.energy_render import knee_dict

        return {"knee": knee_dict(self.knee) if self.knee is not None else None,
                "efficiency": self.best.to_json() if self.best is not None else None}


# --------------------------------------------------------------------------- output


def _x_text(x: float, rate: bool) -> str:
    return f"{x:g}" if rate else str(int(x))


def _cells(point: CurvePoint, slo: Slo, rate: bool) -> list[str]:
    """One probe's row: x, measurements, ok/requests, agg, goodput, each term's value, holds, confidence, note."""
    from kimitui.capacity.slo import fmt_figure

    values = [("-" if tc.value is None else tc.term.bare(tc.value)) for tc in point.check.terms]
    note = "" if point.holds else point.check.reason
    if point.source:
        note = f"reused ({Path(point.source.split('#')[0]).name})" + (f"; {note}" if note else "")
    return [_x_text(point.x, rate), str(point.measurements), f"{point.check.ok}/{point.check.requests}",
            "-" if point.agg_tok_s is None else fmt_figure(point.agg_tok_s),
            "-" if point.goodput is None else fmt_figure(point.goodput),
            *values, "yes" if point.holds else "NO", f"{point.confidence:.2f}", note]


def _columns(slo: Slo, rate: bool) -> list[str]:
    terms = [f"{t.key} {t.unit_label.removesuffix('/user')}" for t in slo.terms]
    return ["req/s" if rate else "C", "runs", "ok", "agg tok/s", "goodput", *terms, "holds", "conf", "note"]


def probe_table(answer: CapacityAnswer) -> list[str]:
    """Every probe of the search ordered by x, as aligned plain lines (a header first)."""
    rows = [_columns(answer.slo, answer.rate), *(_cells(p, answer.slo, answer.rate) for p in answer.curve)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)] + [0]
    return [_row(r, widths) for r in rows]


def print_answer(answer: CapacityAnswer, recording: str | None, beside: Sequence[str] = ()) -> None:
    """The SLO, the probes' table, the answer's sentence and beside it the knee (and the most efficient point)."""
    note = answer.slo.scale_note()
    print(f"SLO: {answer.slo.describe()}" + (f" ({note})" if note else ""))
    for line in probe_table(answer):
        print(line)
    reused = sum(1 for p in answer.curve if p.source)
    print(answer.sentence())
    for line in beside:
        print(line)
    print(f"{answer.measured} level(s) measured" + (f", {reused} point(s) taken from recordings" if reused else ""))
    if recording:
        print(f"recorded to {recording}")


class _View:
    """Progress on stderr: a live line while a probe runs, a row per probe as it finishes."""

    def __init__(self, slo: Slo, rate: bool, *, live: bool) -> None:
        from rich.console import Console

        self.slo, self.rate = slo, rate
        self.console: Console = Console(stderr=True, highlight=False)
        self.status = self.console.status("starting") if live else None
        self.header_shown = False
        self.said: set[str] = set()

    def start(self) -> None:
        if self.status is not None:
            self.status.start()

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()

    def on_event(self, ev: Event) -> None:
        from kimitui.events import ErrorEvent, SweepProgress

        if isinstance(ev, SweepProgress) and self.status is not None:
            rate = ev.level_tokens / ev.level_elapsed_s if ev.level_elapsed_s > 0 else 0.0
            self.status.update(f"C={ev.concurrency} measuring: done {ev.done}  failed {ev.failed}  "
                               f"in flight {ev.n_in_flight}  {rate:.0f} tok/s")
        elif isinstance(ev, ErrorEvent) and ev.source == "sweep" and ev.message not in self.said:
            self.said.add(ev.message)
            self.console.print(f"{PROG}: {ev.message}", markup=False)

    def point(self, point: CurvePoint) -> None:
        if self.status is None:  # not live: stdout's table says it all at the end
            return
        widths = [6, 4, 9, 9, 9, *(len(c) for c in _columns(self.slo, self.rate)[5:-3]), 5, 4, 0]
        if not self.header_shown:
            self.header_shown = True
            self.console.print(_row(_columns(self.slo, self.rate), widths), markup=False, soft_wrap=True)
        self.console.print(_row(_cells(point, self.slo, self.rate), widths), markup=False, soft_wrap=True)


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if w else c for c, w in zip(cells, widths, strict=True)).rstrip()

