"""The server panel's prefill throughput, and how each server figure is labelled and scaled.

SGLang reports decode throughput itself (``gen throughput (token/s)`` on its Decode lines,
``sglang:gen_throughput`` on /metrics) but prefill only per batch, so the cockpit derives it:

* from /metrics: the rate of the ``sglang:prompt_tokens_total`` counter between two scrapes
  (vLLM: its ``prompt_tokens_total`` rate, which the poller already turns into ``prompt_throughput``);
* from the log: the ``#new-token`` of every ``Prefill batch`` line since the previous Decode
  line's stats, over the seconds between them (zero when nothing was prefilled; nothing at all
  until the first Prefill line, so a log without them shows ``-``, not a false zero).

Pure, no Textual: the fold (:class:`kimitui.tui.model.cockpit_state.CockpitModel`) feeds it events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kimitui.events import ServerStats
from kimitui.sglang.log import PrefillFields


class PrefillRate:
    """Prefill tokens per second, sampled when a ServerStats arrives (the server panel's clock)."""

    def __init__(self) -> None:
        self._log_tokens = 0.0
        self._seen_prefill = False
        self._log_t: float | None = None
        self._counter: tuple[float, float] | None = None
        """(t, sglang:prompt_tokens_total) of the previous /metrics scrape."""

    def on_log(self, fields: PrefillFields) -> None:
        """A Prefill batch line: count its new tokens."""
        new = fields.get("new_token")
        if type(new) is int and new >= 0:
            self._log_tokens += new
            self._seen_prefill = True

    def on_stats(self, ev: ServerStats) -> float | None:
        """The prefill tok/s as of this stats event; None when there is no basis for one yet."""
        vllm = ev.extra.get("prompt_throughput")
        if vllm is not None:
            return vllm
        total = ev.extra.get("prompt_tokens_total")
        if total is not None:
            prev, self._counter = self._counter, (ev.t, total)
            if prev is None or ev.t <= prev[0] or total < prev[1]:
                return None
            return (total - prev[1]) / (ev.t - prev[0])
        if ev.source != "log":
            return None
        prev_t, self._log_t = self._log_t, ev.t
        if not self._seen_prefill or prev_t is None or ev.t <= prev_t:
            return None
        tokens, self._log_tokens = self._log_tokens, 0.0
        return tokens / (ev.t - prev_t)


@dataclass(frozen=True)
class Figure:
    """One row of the server panel: what it is called, its unit, and how its history is scaled."""

    key: str
    label: str
    short: str
    """The compact form's label (80x24)."""
    unit: str
    top: float | None = None
    """The sparkline's full scale; None: the history's own maximum."""


FIGURES = (
    Figure("gen_throughput", "decode", "dec", "tok/s"),
    Figure("prefill_throughput", "prefill", "pre", "tok/s"),
    Figure("running_reqs", "running", "run", "req"),
    Figure("queued_reqs", "queued", "que", "req"),
    Figure("token_usage", "KV cache", "KV", "%", top=1.0),
)
"""The server panel's rows with a history, top to bottom."""

HISTORY_KEYS = tuple(f.key for f in FIGURES)


def figure_text(key: str, value: float | bool | None) -> str:
    """The value as the panel prints it: ``1538``, ``65.1``, ``9.0k``, ``22`` (for 22 %), ``-``."""
    if value is None or isinstance(value, bool):
        return "-"
    if key == "token_usage":
        return f"{value * 100:.0f}"
    if key in ("running_reqs", "queued_reqs") or value == 0:
        return f"{value:.0f}"
    if value >= 10_000:
        return f"{value / 1000:.1f}k" if value < 100_000 else f"{value / 1000:.0f}k"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


PD_FIGURES = (
    Figure("num_prefill_bootstrap_queue_reqs", "PD bootstrap", "boot", "req"),
    Figure("num_prefill_inflight_queue_reqs", "PD inflight", "infl", "req"),
    Figure("num_decode_prealloc_queue_reqs", "PD prealloc", "pre-a", "req"),
    Figure("num_decode_transfer_queue_reqs", "PD transfer", "xfer", "req"),
    Figure("kv_transfer_latency_ms", "KV xfer lat", "xlat", "ms"),
    Figure("kv_transfer_speed_gb_s", "KV xfer speed", "xGB/s", "GB/s"),
    Figure("num_transfer_failed_reqs_total", "KV xfer failed", "xfail", "req"),
)
"""A PD server's figures (0.5.23 ``observability/metrics_collector.py``, read by
:mod:`kimitui.telemetry.metrics_poll` into ``ServerStats.extra``; the Decode/Prefill lines' ``#transfer-req``,
``#prealloc-req``, ``#bootstrap-req``, ``#inflight-req`` stand in when /metrics is off).  Shown only for a
PD server: see :func:`pd_figures`."""

_PD_LOG_KEYS = {
    "num_prefill_bootstrap_queue_reqs": "bootstrap_reqs",
    "num_prefill_inflight_queue_reqs": "inflight_reqs",
    "num_decode_prealloc_queue_reqs": "prealloc_reqs",
    "num_decode_transfer_queue_reqs": "transfer_reqs",
}
"""The PD figures' names in a log line's fields (kimitui/sglang/log/)."""
PD_KEYS = frozenset({fig.key for fig in PD_FIGURES} | set(_PD_LOG_KEYS.values()))
"""Every ``ServerStats.extra`` name a PD figure is read from (the cockpit keeps their newest values)."""


def pd_figures(extra: Mapping[str, float], log_fields: Mapping[str, object] | None = None) -> list[tuple[Figure, float]]:
    """The PD rows to show, in :data:`PD_FIGURES` order, with their values; empty for a server that is not PD.

    SGLang 0.5.23 registers the PD gauges on every server (at 0), so a series being there is not enough: a
    server is PD when a PD queue is non-zero, a transfer was measured or failed, or its log lines carry the
    PD fields (only a PD server prints them).  Once PD, every figure it has is shown, zeros included."""
    log_fields = log_fields or {}
    values: dict[str, float] = {}
    for fig in PD_FIGURES:
        v = extra.get(fig.key)
        if v is None:
            raw = log_fields.get(_PD_LOG_KEYS.get(fig.key, ""))
            v = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        if v is not None:
            values[fig.key] = v
    is_pd = any(values.values()) or any(k in log_fields for k in _PD_LOG_KEYS.values())
    return [(fig, values[fig.key]) for fig in PD_FIGURES if fig.key in values] if is_pd else []


def pd_figure_text(fig: Figure, value: float) -> str:
    """``3``, ``41.2 ms``, ``27.9 GB/s``: a PD row's value with its unit."""
    if fig.unit == "req":
        return f"{value:.0f}"
    return f"{figure_text(fig.key, value)} {fig.unit}"


SCHED_FIGURES = (
    Figure("queue_time_s", "queue wait", "wait", "ms"),
    Figure("retracted_reqs", "retracted", "retr", "req"),
    Figure("fwd_occupancy", "fwd busy", "fwd", "%"),
)
"""The scheduler's own account of why requests wait (SGLang's ``/metrics``, read by
:mod:`kimitui.telemetry.metrics_poll`): the mean queue wait of the requests that left the queue since the
previous scrape (``queue_time_seconds``), the requests retracted for want of KV cache (``num_retracted_reqs``:
each prefills again, a straggler's cause), and how busy the forward passes kept the GPU (``fwd_occupancy``).
A queue wait with the GPU not busy points at admission (max running requests, the KV budget); with it busy,
at capacity.  Shown once the server reports any of them (SGLang 0.5.18 and later, with ``--enable-metrics``)."""
SCHED_KEYS = tuple(fig.key for fig in SCHED_FIGURES)
RETRACTION_RECENT_S = 60.0
"""A retraction this recent is shown (in red) though the gauge has since gone back to 0: the gauge counts one
stats-log interval only, so the panel keeps the last one seen with its age."""
QUEUE_WAIT_SLOW_S = 1.0
"""A mean queue wait above this is shown in yellow: requests wait longer for a slot than a decode takes."""


@dataclass(frozen=True)
class Retraction:
    """The newest non-zero ``num_retracted_reqs`` the cockpit saw, and when."""

    t: float
    count: float


def sched_figures(server: Mapping[str, float | bool | None]) -> list[tuple[Figure, float | None]]:
    """The scheduler row's figures with their newest values; empty for a server that reports none of them."""
    rows = [(fig, server.get(fig.key)) for fig in SCHED_FIGURES]
    values = [(fig, v if isinstance(v, (int, float)) and not isinstance(v, bool) else None) for fig, v in rows]
    return values if any(v is not None for _, v in values) else []


def sched_figure_text(fig: Figure, value: float | None, retraction: Retraction | None = None, now: float = 0.0) -> str:
    """``41 ms``, ``3 req 12s ago``, ``87 %``, ``-``: one scheduler figure with its unit."""
    if fig.key == "retracted_reqs" and retraction is not None and now - retraction.t <= RETRACTION_RECENT_S:
        return f"{retraction.count:.0f} req {max(0.0, now - retraction.t):.0f}s ago"
    if value is None:
        return "-"
    if fig.key == "queue_time_s":
        ms = value * 1000
        return f"{ms:.0f} ms" if ms < 10_000 else f"{value:.0f} s"
    if fig.key == "retracted_reqs":
        return f"{value:.0f}"
    return f"{value:.0f} %"


def sched_figure_alarm(fig: Figure, value: float | None, retraction: Retraction | None = None, now: float = 0.0) -> str:
    """The figure's style: red for a recent retraction, yellow for a slow queue wait, plain otherwise."""
    if fig.key == "retracted_reqs" and retraction is not None and now - retraction.t <= RETRACTION_RECENT_S:
        return "bold red"
    if fig.key == "queue_time_s" and value is not None and value > QUEUE_WAIT_SLOW_S:
        return "yellow"
    return ""
