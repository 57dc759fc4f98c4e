"""Finished sweeps to an OpenTelemetry collector, as traces (OTLP over HTTP), with the OpenTelemetry SDK.

A sweep is a trace: its root span lasts from the sweep's start to its result (host, profile, mode,
levels, outcome, peak, idle power) and each level is a child span over the level's own time (C, aggregate
and steady tok/s, requests, failures, TTFT/TPOT/ITL/decode percentiles, its GPUs' energy: power, J per
token, tokens per kJ, and the cost per million tokens where ``[cost]`` is given), each straggler an event
on its level's span.  Where the team's other services report traces (Tempo, Jaeger, any OTLP
backend), a sweep lands on the same timeline as the deploys and incidents around it.

A session sink like the recorder: it keeps the started sweeps' spec and level starts (bounded), and
builds the spans only when a sweep's result comes; the SDK's batch processor exports them on its own
thread, so the event loop never waits on the collector.  A collector that is down loses those traces
and nothing else: the recording still holds every sweep.  kimitui says so in one line (once, until
a send succeeds again), in place of the SDK's own lines (``Transient error ... retrying`` per retry).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.types import AttributeValue

from kimitui.analysis.cost import CostRates, level_cost
from kimitui.analysis.energy import EnergyFolder, LevelEnergy
from kimitui.events import Event, LevelResult, LevelStarted, Percentiles, SweepResult, SweepStarted
from kimitui.session import Session

log = logging.getLogger(__name__)

NS = "kimitui"
"""The attributes' namespace (every attribute is prefixed ``kimitui.``: ``host``, ``level.agg_tok_s``...)."""
KEEP_OPEN_SWEEPS = 16
"""Sweeps started but not finished that are remembered (an aborted run's start never gets a result)."""
PERCENTILE_FIGURES = ("ttft", "tpot", "itl", "decode_tok_s")


@dataclass
class _OpenSweep:
    started: SweepStarted
    level_starts: dict[tuple[int, int], float] = field(default_factory=dict)
    levels: list[LevelResult] = field(default_factory=list)


def _ns(t: float) -> int:
    return int(t * 1e9)


def _percentiles(prefix: str, p: Percentiles) -> dict[str, AttributeValue]:
    return {f"{prefix}.{q}": v for q, v in (("p50", p.p50), ("p90", p.p90), ("p99", p.p99)) if v is not None}


def level_attributes(lv: LevelResult) -> dict[str, AttributeValue]:
    """A level's figures as span attributes (``level.*`` in the namespace :data:`NS`); None figures are left out."""
    out: dict[str, AttributeValue] = {
        f"{NS}.level.concurrency": lv.concurrency, f"{NS}.level.repeat": lv.repeat,
        f"{NS}.level.status": lv.status, f"{NS}.level.requests": lv.requests, f"{NS}.level.ok": lv.ok,
        f"{NS}.level.failed": lv.failed, f"{NS}.level.output_tokens": lv.output_tokens,
        f"{NS}.level.stragglers": len(lv.stragglers),
    }
    for name in ("agg_tok_s", "steady_tok_s", "wall_s"):
        value = getattr(lv, name)
        if value is not None:
            out[f"{NS}.level.{name}"] = float(value)
    for name in PERCENTILE_FIGURES:
        out.update(_percentiles(f"{NS}.level.{name}", getattr(lv, name)))
    if lv.status_reason:
        out[f"{NS}.level.status_reason"] = lv.status_reason
    return out


ENERGY_ATTRIBUTES = ("mean_w", "peak_w", "energy_j", "j_per_token", "j_per_token_steady", "tokens_per_kj",
                     "marginal_j_per_token")
"""A level's energy figures as ``level.energy.*`` attributes (docs/sweeps.md); one not measured is left out."""


def energy_attributes(e: LevelEnergy | None, lv: LevelResult, rates: CostRates | None = None
                      ) -> dict[str, AttributeValue]:
    """A level's energy (and, with ``rates``, cost) attributes; without GPU samples, only why."""
    if e is None:
        return {}
    out: dict[str, AttributeValue] = {f"{NS}.level.energy.{name}": float(v) for name in ENERGY_ATTRIBUTES
                                      if (v := getattr(e, name)) is not None}
    if e.gpus:
        out[f"{NS}.level.energy.gpus"] = e.gpus
    if e.reason:
        out[f"{NS}.level.energy.reason"] = e.reason
    cost = level_cost(rates, tok_s=lv.agg_tok_s, gpus=e.gpus or None, j_per_token=e.j_per_token)
    if cost is not None and cost.per_mtok is not None:
        out[f"{NS}.level.cost_per_mtok"] = cost.per_mtok
        if cost.currency:
            out[f"{NS}.level.cost_currency"] = cost.currency
    return out


class SweepTraces:
    """The session sink: remembers sweeps as they run, hands each finished one to the tracer as one trace."""

    def __init__(self, provider: TracerProvider, rates: CostRates | None = None) -> None:
        self.provider = provider
        self.rates = rates
        self.energy = EnergyFolder()
        """Each level's energy from the GPU samples the session carries (settled at the sweep's result)."""
        self.tracer = provider.get_tracer(f"{NS}.sweeps")
        self.exported = 0
        """Sweeps turned into traces so far."""
        self._open: OrderedDict[str, _OpenSweep] = OrderedDict()

    def __call__(self, event: Event) -> None:
        try:
            self._fold(event)
        except Exception as exc:  # a sink must never raise into the session
            log.warning("otlp: %s", exc)

    def _fold(self, event: Event) -> None:
        self.energy.add(event)
        if isinstance(event, SweepStarted):
            self._open[event.sweep_id] = _OpenSweep(event)
            while len(self._open) > KEEP_OPEN_SWEEPS:
                self._open.popitem(last=False)
        elif isinstance(event, LevelStarted):
            sweep = self._open.get(event.sweep_id)
            if sweep is not None:
                sweep.level_starts[(event.concurrency, event.repeat)] = event.t
        elif isinstance(event, LevelResult):
            sweep = self._open.get(event.sweep_id)
            if sweep is not None:
                sweep.levels.append(event)
        elif isinstance(event, SweepResult):
            sweep = self._open.pop(event.sweep_id, None)
            self.energy.finish(event.sweep_id)  # a late sample is not waited for: the trace goes now
            if sweep is not None:
                self._export(sweep, event)

    def _export(self, sweep: _OpenSweep, result: SweepResult) -> None:
        spec = sweep.started.spec
        root = self.tracer.start_span(
            f"sweep {sweep.started.profile}" if sweep.started.profile else "sweep", start_time=_ns(sweep.started.t),
            attributes={f"{NS}.host": result.host, f"{NS}.profile": sweep.started.profile or "",
                        f"{NS}.sweep_id": result.sweep_id, f"{NS}.sweep.mode": spec.mode,
                        f"{NS}.sweep.levels": list(spec.levels), f"{NS}.sweep.max_tokens": spec.max_tokens,
                        f"{NS}.sweep.url": spec.url, f"{NS}.sweep.outcome": result.outcome,
                        **({f"{NS}.sweep.peak_tok_s": result.peak_tok_s} if result.peak_tok_s is not None else {}),
                        **({f"{NS}.sweep.reason": result.reason} if result.reason else {}),
                        **({f"{NS}.sweep.idle_power_w": idle.mean_w}
                           if (idle := self.energy.idle_of(result.sweep_id)) is not None and idle.mean_w is not None
                           else {})})
        if result.outcome != "completed":
            root.set_status(trace.Status(trace.StatusCode.ERROR, result.reason or result.outcome))
        parent = trace.set_span_in_context(root)
        for lv in sweep.levels:
            start = sweep.level_starts.get((lv.concurrency, lv.repeat), lv.t - lv.wall_s)
            energy = self.energy.level(lv.sweep_id, lv.concurrency, lv.repeat)
            span = self.tracer.start_span(f"level C={lv.concurrency}", context=parent, start_time=_ns(start),
                                          attributes={**level_attributes(lv),
                                                      **energy_attributes(energy, lv, self.rates)})
            for s in lv.stragglers:
                at = s.gap_start if s.gap_start is not None else lv.t
                span.add_event("straggler", timestamp=_ns(at), attributes={
                    f"{NS}.request_id": s.request_id, f"{NS}.reason": s.reason,
                    **({f"{NS}.decode_tok_s": s.decode_tok_s} if s.decode_tok_s is not None else {}),
                    **({f"{NS}.max_gap_s": s.max_gap_s} if s.max_gap_s is not None else {})})
            if not lv.valid:
                span.set_status(trace.Status(trace.StatusCode.ERROR, lv.status_reason or lv.status))
            span.end(end_time=_ns(lv.t))
        root.end(end_time=_ns(result.t))
        self.exported += 1


@dataclass
class OtlpExport:
    """A running export: the sink on the session and the SDK's provider (flushed and shut down on close)."""

    traces: SweepTraces
    endpoint: str
    _remove: Callable[[], None]

    def flush(self, timeout_s: float = 10.0) -> bool:
        return bool(self.traces.provider.force_flush(int(timeout_s * 1000)))

    def close(self) -> None:
        """Stop sinking, export what is pending (bounded), shut the SDK's thread down."""
        self._remove()
        self.traces.provider.shutdown()


def traces_url(endpoint: str) -> str:
    """``http://collector:4318`` -> ``http://collector:4318/v1/traces`` (an URL already naming the path stays)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


SDK_LOGGER = "opentelemetry.exporter.otlp"
"""Where the OTLP exporter logs its retries and failures (its HTTP client's and its own module's loggers)."""


class _Heard(logging.Handler):
    """The OTLP exporter's complaints, kept (per exporting thread) for kimitui's line instead of printed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: dict[int, list[logging.LogRecord]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        kept = self.records.setdefault(threading.get_ident(), [])
        if len(kept) < 16:  # one export's retries: a handful
            kept.append(record)

    def forget(self) -> None:
        self.records.pop(threading.get_ident(), None)

    def reason(self) -> str:
        """Why the export just done on this thread failed, briefly (``Connection refused``, ``HTTP 404 Not Found``)."""
        records = self.records.pop(threading.get_ident(), [])
        for record in reversed(records):
            args = record.args if isinstance(record.args, tuple) else ()
            if "code: %s" in str(record.msg) and len(args) == 3 and args[1] is not None:
                return f"HTTP {args[1]} {args[2] or ''}".strip()
            errors = [a for a in args if isinstance(a, BaseException)]
            if errors:
                text = str(errors[0])
                errno = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", text)  # requests' long chain ends in the socket's words
                return errno.group(1).strip() if errno else f"{type(errors[0]).__name__}: {text}"[:200]
        return records[-1].getMessage()[:200] if records else "no answer"


_heard: _Heard | None = None


def _hear_the_sdk() -> _Heard:
    """Route the exporter's log records to one kept handler, not to stderr (only that logger, only once)."""
    global _heard
    if _heard is None:
        _heard = _Heard()
        sdk = logging.getLogger(SDK_LOGGER)
        sdk.addHandler(_heard)
        sdk.propagate = False
    return _heard


class OneLineExporter(SpanExporter):
    """The SDK's exporter, whose failures kimitui says in one line: once, until a send succeeds again."""

    def __init__(self, inner: SpanExporter, url: str, say: Callable[[str], None]) -> None:
        self.inner = inner
        self.url = url
        self.say = say
        self.failing = False
        self.lost = 0
        """Sweeps whose trace the collector never got."""
        self._heard = _hear_the_sdk()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._heard.forget()
        try:
            result = self.inner.export(spans)
            why = "" if result is SpanExportResult.SUCCESS else self._heard.reason()
        except Exception as exc:  # noqa: BLE001 - an exporter bug is one more reason, never a traceback
            result, why = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        if result is SpanExportResult.SUCCESS:
            self.failing = False
            return result
        sweeps = sum(1 for span in spans if span.parent is None)
        self.lost += sweeps
        if not self.failing:
            self.failing = True
            self.say(f"kimitui: otlp: the collector at {self.url} did not take {sweeps} sweep trace"
                     f"{'' if sweeps == 1 else 's'} ({why}); recordings keep every sweep (said once until a send "
                     f"succeeds)")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def start_otlp(session: Session, endpoint: str, *, headers: dict[str, str] | None = None,
               exporter: SpanExporter | None = None, say: Callable[[str], None] | None = None,
               rates: CostRates | None = None) -> OtlpExport:
    """Export ``session``'s finished sweeps to the collector at ``endpoint`` (OTLP/HTTP, protobuf).

    ``say`` gets kimitui's one line when sends fail (default: a warning on this module's logger,
    which a command without logging set up prints on stderr as the bare line)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "kimitui", "service.namespace": "sglang"}))
    url = traces_url(endpoint)
    span_exporter = OneLineExporter(
        exporter or OTLPSpanExporter(endpoint=url, headers=headers or None, timeout=10), url, say or log.warning)
    provider.add_span_processor(BatchSpanProcessor(span_exporter, schedule_delay_millis=1000))
    traces = SweepTraces(provider, rates)
    return OtlpExport(traces, traces_url(endpoint), session.add_sink(traces))
