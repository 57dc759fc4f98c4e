"""What SGLang's log says about a stall: EPLB rebalances, KV retractions, prefill batches, eager decode, errors.

Each reader takes a log line already placed on the client's clock (:mod:`.event_clock`) and adds to
the cause lists of a :class:`~.timeline.CauseTimeline`.  Formats, from SGLang 0.5.23:

* ``[EPLBManager] rebalance start`` … ``rebalance end time=35.612s`` on every rank
  (``eplb/eplb_manager.py`` ``rebalance``); ``Skipped ep rebalancing`` is a moment, no stall;
* ``KV cache pool is full. Retract requests. #retracted_reqs: 3, …`` (``managers/scheduler.py``
  ``update_running_batch``): the retracted requests wait in the queue until the prefill run that takes them again ends;
* ``Prefill batch. #new-seq: 1, #new-token: 8192, …, input throughput (token/s): …`` printed after the
  batch's forward pass (``report_prefill_stats`` from ``process_batch_result_prefill``), its input
  throughput the new tokens over the time since the previous Prefill line: prefill runs ahead of decode
  (``get_next_batch_to_run``), so a run of large prefill batches starves every decoding stream;
* ``Decode batch. …, cuda graph: False, …``: the last ``decode_log_interval`` steps ran eager.
"""

from __future__ import annotations

from kimitui.analysis.causes.episodes import Episode, EpisodeRun
from kimitui.analysis.eplb import RebalanceTracker
from kimitui.events import LogLine
from kimitui.sglang.log import DecodeFields, LineKind, PrefillFields, ProblemFields, fields_if, problem_fields
from kimitui.sglang.log.kinds import ProblemName

LOG_KINDS: tuple[LineKind, ...] = ("eplb", "prefill", "decode", "warning", "error")
"""The log lines that may say why a stream stalled: what a cause timeline reads."""

DEFAULT_PREFILL_TOK_S = 8000.0
"""Prefill speed assumed until a line shows a faster one."""
RATE_MIN_TOKENS = 512
"""Only a batch this large tells the prefill speed (a small one's line-to-line time is mostly overhead)."""
PLACE_TOLERANCE_S = 1.0
"""How far a Prefill line may move to where the previous one plus SGLang's own gap puts it: the stamp's second."""
PREFILL_JOIN_S = 0.1
"""Prefill batches closer than this are one run (the scheduler went straight from one to the next)."""
KV_WAIT_CAP_S = 300.0
"""A retraction's wait ends at the next prefill that admits requests, or this long after at most."""
DECODE_GAP_S = 30.0
"""Two decode lines further apart than this do not bound one span of steps."""
SERVER_ERRORS: frozenset[ProblemName] = frozenset({"watchdog", "nccl", "scheduler_exception", "sigquit", "subprocess_crash", "health_check", "oom"})
ERROR_SPAN_S = 0.5


def _num(v: object) -> float | None:
    """A figure from a line's fields (a recording may hold anything): a number, not a flag."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class LogSources:
    """Folds one host's placed log lines into cause episodes (appended to ``lists``)."""

    def __init__(self, lists: dict[str, list[Episode]]) -> None:
        self.lists = lists
        self.rebalances = RebalanceTracker()
        self._eplb_open: Episode | None = None
        self._kv_open: list[Episode] = []
        self._kv_refill: list[Episode] = []
        """Retractions whose requests are being prefilled again: their wait lasts to the end of that prefill run."""
        self._kv_refill_end = 0.0
        self._prefill = EpisodeRun("prefill_surge", PREFILL_JOIN_S, lists["prefill_surge"])
        self._graph = EpisodeRun("graph_off", 0.0, lists["graph_off"])
        self._last_decode: float | None = None
        self._prefill_speed = 0.0
        self._last_prefill_at: float | None = None
        """The fastest input throughput seen: a lower bound of the real prefill speed (the line's gap holds the pass)."""
        self.skips: list[float] = []
        """When a rebalance was skipped: evidence that a stretch was *not* EPLB's."""

    def add(self, line: LogLine, at: float) -> None:
        if (prefill := fields_if(line, "prefill")) is not None:
            self._prefill_line(prefill, at)
        elif (decode := fields_if(line, "decode")) is not None:
            self._decode_line(decode, at)
        elif (problem := problem_fields(line)) is not None:
            self._problem(line, problem, at)
        elif fields_if(line, "eplb") is not None:
            self._eplb(line, at)

    # -- EPLB -------------------------------------------------------------------------------
    def _eplb(self, line: LogLine, at: float) -> None:
        rec = self.rebalances.feed(line.model_copy(update={"t": at}))
        if rec is None:
            return
        if rec.skipped:
            self.skips.append(rec.start)
            del self.skips[:-512]
            if self._eplb_open is not None and self._eplb_open.open:
                self.lists["eplb"].remove(self._eplb_open)
                self._eplb_open = None
            return
        if rec.end is None:  # a start: open until its end arrives
            self._eplb_open = Episode("eplb", rec.start, rec.start, "rebalance start (no end yet)",
                                      key=f"eplb@{rec.start:.3f}", open=True)
            self.lists["eplb"].append(self._eplb_open)
            return
        took = rec.duration_s
        start = rec.end - took if took is not None else rec.start
        said = f"rebalance end time={took:.1f}s" if took is not None else "rebalance start … rebalance end"
        ep = self._eplb_open if self._eplb_open is not None else Episode("eplb", start, rec.end, said)
        if self._eplb_open is None:
            self.lists["eplb"].append(ep)
        ep.start, ep.end, ep.evidence, ep.open = start, rec.end, said, False
        ep.key = f"eplb@{start:.3f}"
        if took is not None:
            ep.figures["duration_s"] = took
        self._eplb_open = None

    # -- KV retraction ------------------------------------------------------------------------
    def _problem(self, line: LogLine, fields: ProblemFields, at: float) -> None:
        error = fields.get("error")
        if error == "kv_retract":
            n = _num(fields.get("retracted_reqs"))
            said = (f"KV cache pool is full: {int(n)} request{'s' if n != 1 else ''} retracted" if n is not None
                    else "KV cache pool is full: requests retracted")
            ep = Episode("kv_retract", at, at, said, key=f"kv_retract@{at:.3f}", open=True,
                         figures={"retracted": n if n is not None else 0.0})
            self.lists["kv_retract"].append(ep)
            self._kv_open.append(ep)
        elif error in SERVER_ERRORS or line.severity == "critical":
            text = line.raw.split("] ", 1)[-1].strip()
            said = text if len(text) <= 80 else text[:79] + "…"
            self.lists["server_unhealthy"].append(Episode("server_unhealthy", at - ERROR_SPAN_S, at + ERROR_SPAN_S,
                                                          f"the log says: {said}", key=f"log@{at:.3f}"))

    def _close_kv(self, at: float) -> None:
        for ep in self._kv_open:
            ep.end, ep.open = max(ep.start, min(at, ep.start + KV_WAIT_CAP_S)), False
        self._kv_open = []

    # -- prefill and decode --------------------------------------------------------------------
    def _prefill_line(self, fields: PrefillFields, at: float) -> None:
        """The line ends a pass.  Its rate is tokens over the time since the previous Prefill line, which
        holds the pass and whatever ran between (decode steps, idle): the pass took at most that, and at
        most the tokens at the fastest speed seen, which back-to-back chunks show."""
        tokens = _num(fields.get("new_token")) or 0.0
        rate = _num(fields.get("input_throughput"))
        since = tokens / rate if rate and rate > 100 else None
        chained = self._last_prefill_at + since if since is not None and self._last_prefill_at is not None else None
        if chained is not None and abs(chained - at) <= PLACE_TOLERANCE_S:
            at = chained  # SGLang's own line-to-line time beats a placement good to the stamp's second
        self._last_prefill_at = at
        if since is not None and tokens >= RATE_MIN_TOKENS:
            self._prefill_speed = max(self._prefill_speed, rate or 0.0)
        took = tokens / (self._prefill_speed or DEFAULT_PREFILL_TOK_S)
        if since is not None:
            took = min(took, since)
        if self._kv_refill and at - took - self._kv_refill_end <= PREFILL_JOIN_S:
            for kv in self._kv_refill:  # the retracted requests' chunks go on: still the retraction's wait
                kv.end = at
            self._kv_refill_end = at
            return
        self._kv_refill = []
        if self._kv_open and (_num(fields.get("new_seq")) or 0) >= 1:
            self._kv_refill, self._kv_refill_end = list(self._kv_open), at
            self._close_kv(at)  # their re-prefill: the retraction's, not a surge of new prompts
            return
        ep = self._prefill.observe(at - took, at, "", queue_max=_num(fields.get("queued_reqs")) or 0.0,
                                   pending_max=_num(fields.get("pending_token")) or 0.0)
        ep.figures["batches"] = float(ep.figures.get("batches", 0.0)) + 1
        ep.figures["tokens"] = float(ep.figures.get("tokens", 0.0)) + tokens
        ep.evidence = _prefill_evidence(ep)

    def _decode_line(self, fields: DecodeFields, at: float) -> None:
        prev, self._last_decode = self._last_decode, at
        self._kv_refill = []  # decode ran again: the re-prefill is over
        graph = fields.get("cuda_graph")
        # a CPU server has no graphs to fall back from: every line says "cpu graph: False", its norm, no cause
        if graph is not False or fields.get("graph_backend") == "cpu":
            self._graph.idle()
            return
        start = prev if prev is not None and at - prev <= DECODE_GAP_S else at - 1.0
        ep = self._graph.observe(start, at, "")
        ep.figures["lines"] = float(ep.figures.get("lines", 0.0)) + 1
        running = _num(fields.get("running_reqs"))
        if running is not None:
            ep.figures["batch"] = running
        n = int(ep.figures["lines"])
        ep.evidence = f"decode ran eager: cuda graph: False on {n} decode line{'s' if n != 1 else ''}" + (
            f" (batch {int(running)})" if running is not None else "")

    def finish(self, now: float) -> None:
        """Close what is still open at ``now`` (a recording that ends mid-rebalance)."""
        for ep in self._kv_open:
            ep.end = max(ep.start, now)
        if self._eplb_open is not None:
            self._eplb_open.end = max(self._eplb_open.start, now)


def _prefill_evidence(ep: Episode) -> str:
    f = ep.figures
    batches, tokens = int(f.get("batches", 1)), int(f.get("tokens", 0))
    out = f"{batches} prefill batch{'es' if batches != 1 else ''}, {tokens:,} new tokens"
    queue, pending = int(f.get("queue_max", 0)), int(f.get("pending_max", 0))
    if queue or pending:
        out += f" (queue up to {queue}" + (f", {pending:,} tokens pending" if pending else "") + ")"
    return out
