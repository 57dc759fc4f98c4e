"""One streaming chat completion, timed as its bytes arrive: traces, SSE parsing, results.

The sweep engine sends through :mod:`kimitui.loadgen.h1client` (pre-built
request bytes on a warm pool: ~6-7x less CPU per send than aiohttp, measured
by ``bench/bench_client.py``; a C=256 burst start needs it).  :func:`run_request` here is the same request over
aiohttp, kept as the reference the hand-written client is measured and tested
against (``bench/bench_client.py``, ``tests/test_client_timing.py``); both
share the trace, the SSE splitter and :func:`to_result`.

This is the load generator's hot path, so the per-chunk work is small: one
``perf_counter_ns`` per socket read (events that arrived in the same read did
arrive together), a ``json.loads`` per SSE event, and list appends.  All
figures are derived afterwards in :func:`to_result`.

Timing rules (see ``reference/bench-anchors.md`` §9):

- TTFB = response headers received; TTFT = first chunk carrying ``content`` or
  reasoning text (never the role-only chunk or the usage chunk).
- Tokens per chunk come from per-chunk ``usage`` (``continuous_usage_stats``)
  when the server sends it, otherwise each content chunk counts as one token.
- Completion tokens come from the final ``usage``; without it the count above
  is used and ``tokens_from_usage`` is False.
- Deadlines: the stall deadline (off by default: a long silence is a
  straggler, not a failure) is aiohttp's ``sock_read`` timeout (re-armed
  on every read without a task per chunk); the total deadline is one timer
  that cancels the request's task (:class:`TotalDeadline`, which the
  HTTP/1.1 client uses too).  A request that misses either ends
  incomplete with everything measured so far kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import operator
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import yarl

from kimitui.events import InFlight, RequestResult, SpecTokens

_perf_ns = time.perf_counter_ns
DRAIN_S = 1.0
"""How long to wait for the HTTP end of a response after its ``[DONE]``."""
_raw_decode = json.JSONDecoder().raw_decode  # the C scanner, without json.loads' encoding sniffing per call


class Clock:
    """Maps ``perf_counter_ns`` stamps to wall-clock seconds through one fixed offset."""

    def __init__(self) -> None:
        self.offset_s = time.time() - _perf_ns() / 1e9

    def wall(self, ns: int) -> float:
        return self.offset_s + ns / 1e9

    def now_ns(self) -> int:
        return _perf_ns()


@dataclass(frozen=True)
class Deadlines:
    """Connect, stall (None: no limit but the total) and total deadlines; defaults as SweepSpec's."""

    connect_s: float = 30.0
    stall_s: float | None = None
    total_s: float = 900.0

    @property
    def aiohttp_timeout(self) -> aiohttp.ClientTimeout:
        """Per phase: connect and stall (``sock_read``); no total (our own timer), never a 5 s default."""
        return _timeout(self.connect_s, self.stall_s)


@functools.lru_cache(maxsize=16)
def _timeout(connect_s: float, stall_s: float | None) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect_s, sock_read=stall_s)


class RequestTrace:
    """What one request has measured so far; read live by the progress sampler."""

    __slots__ = (
        "request_id", "concurrency", "warmup", "intended_ns", "sent_ns", "headers_ns", "first_ns",
        "last_ns", "end_ns", "tokens", "chunk_ns", "chunk_tok", "multi_token", "usage_tokens",
        "cum_usage", "last_usage", "prompt_tokens", "status", "error_class", "error", "finish_reason", "saw_done",
        "cancel_reason", "spec",
    )

    def __init__(self, request_id: str, concurrency: int, warmup: bool, intended_ns: int) -> None:
        self.request_id = request_id
        self.concurrency = concurrency
        self.warmup = warmup
        self.intended_ns = intended_ns
        self.sent_ns = intended_ns
        self.headers_ns: int | None = None
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.end_ns: int | None = None
        self.tokens = 0
        self.chunk_ns: list[int] = []
        self.chunk_tok: list[int] = []
        self.multi_token = False
        self.usage_tokens: int | None = None
        self.cum_usage: int | None = None
        """The server's completion count at the last chunk that carried text."""
        self.last_usage: int | None = None
        """The highest completion count any chunk reported (an early-ended stream's best count)."""
        self.prompt_tokens: int | None = None
        self.spec: SpecTokens | None = None
        """The server's per-request speculative figures (``sglext.spec_tokens_details``), when it sent them."""
        self.status: int | None = None
        self.error_class: str | None = None
        self.error = ""
        self.finish_reason: str | None = None
        self.saw_done = False
        self.cancel_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None and self.end_ns is not None

    def fail(self, error_class: str, message: str) -> None:
        """Record the first failure only: later ones are consequences."""
        if self.error_class is None:
            self.error_class = error_class
            self.error = message[:500]

    def in_flight(self, now_ns: int) -> InFlight:
        tok_s = None
        if self.tokens > 1 and self.first_ns is not None and self.last_ns is not None and self.last_ns > self.first_ns:
            tok_s = round((self.tokens - 1) * 1e9 / (self.last_ns - self.first_ns), 2)
        return InFlight(
            request_id=self.request_id,
            elapsed_s=round((now_ns - self.sent_ns) / 1e9, 3),
            tokens=self.tokens,
            tok_s=tok_s,
        )


def build_body(model: str, prompt: str, max_tokens: int, *, temperature: float = 0.0,
               ignore_eos: bool = True, extra: dict[str, Any] | None = None, spec_details: bool = False) -> bytes:
    """The JSON body of one streaming chat completion (built before dispatch, off the hot path).

    ``spec_details`` asks SGLang for the request's speculative figures (``return_spec_tokens_details``,
    0.5.23 ``entrypoints/openai/protocol.py`` ``ChatCompletionRequest``); only for a server that says
    it speculates, since a strict server may refuse an unknown field.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True
    if spec_details:
        body["return_spec_tokens_details"] = True
    if extra:
        body.update(extra)
    return json.dumps(body, separators=(",", ":")).encode()


def make_connector(concurrency: int) -> aiohttp.TCPConnector:
    """A connector sized to the level: never aiohttp's silent default of 100."""
    return aiohttp.TCPConnector(limit=max(1, concurrency), limit_per_host=0, keepalive_timeout=75)


def make_session(concurrency: int) -> aiohttp.ClientSession:
    """The load session: sized connector, no cookie jar, no decompression (less work per request)."""
    return aiohttp.ClientSession(connector=make_connector(concurrency), cookie_jar=aiohttp.DummyCookieJar(),
                                 auto_decompress=False, requote_redirect_url=False)


async def run_request(http: aiohttp.ClientSession, url: str | yarl.URL, body: bytes, trace: RequestTrace,
                      deadlines: Deadlines) -> RequestTrace:
    """Send one request and fill ``trace``; never raises except on outside cancellation.

    ``trace.cancel_reason`` set before cancelling the task (``aborted``,
    ``cancelled``) makes the request end incomplete instead of raising.
    """
    timeout = deadlines.aiohttp_timeout
    headers = {"Content-Type": "application/json", "X-Request-ID": trace.request_id}
    trace.sent_ns = _perf_ns()
    try:
        with TotalDeadline(trace, deadlines):
            async with http.post(url, data=body, headers=headers, timeout=timeout) as resp:
                trace.headers_ns = _perf_ns()
                trace.status = resp.status
                if resp.status != 200:
                    text = (await resp.content.read(2048)).decode("utf-8", "replace")
                    trace.fail("http_status", f"HTTP {resp.status}: {text.strip()}")
                else:
                    await _read_stream(resp.content, trace)
                    if trace.saw_done and not resp.content.at_eof():
                        # Read the end of the HTTP response too, or aiohttp closes the connection instead
                        # of keeping it for the slot's next request (a reconnect would land in its TTFT).
                        with contextlib.suppress(asyncio.TimeoutError, aiohttp.ClientError):
                            await asyncio.wait_for(resp.content.read(), DRAIN_S)
    except aiohttp.SocketTimeoutError:
        trace.fail("stall", f"no data for {deadlines.stall_s:g} s (stall deadline)")
    except aiohttp.ConnectionTimeoutError as exc:
        trace.fail("connect", f"connect timeout: {exc}")
    except aiohttp.ClientConnectorError as exc:
        trace.fail("connect", str(exc))
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
            ConnectionError) as exc:
        trace.fail("reset" if trace.headers_ns is not None else "connect",
                   f"{type(exc).__name__}: {exc}")
    except aiohttp.ClientResponseError as exc:  # aiohttp could not parse the response (a bad Content-Length...)
        trace.fail("malformed", "cannot parse the response: " + " ".join(exc.message.split()).rstrip(" ^"))
    except aiohttp.ClientError as exc:
        trace.fail("reset" if trace.headers_ns is not None else "connect", f"{type(exc).__name__}: {exc}")
    finally:
        if trace.end_ns is None:
            trace.end_ns = _perf_ns()
    if trace.error_class is None and trace.status == 200 and not trace.saw_done and trace.finish_reason is None:
        trace.fail("reset", "stream ended before [DONE]")
    return trace


class TotalDeadline:
    """A request's total deadline, for both clients: one timer that cancels the request's task.

    ``with TotalDeadline(trace, deadlines):`` around the request: when the timer fires first,
    ``trace.cancel_reason`` becomes ``timeout`` and the task is cancelled; on the way out a
    cancellation that has a reason (the timer's, or ``aborted``/``cancelled`` set by whoever
    cancelled) is taken back and recorded as the request's failure, so the request ends
    incomplete with what it measured.  A cancellation without a reason (from outside) goes on.
    """

    __slots__ = ("trace", "deadlines", "_in_s", "_task", "_timer")

    def __init__(self, trace: RequestTrace, deadlines: Deadlines, in_s: float | None = None) -> None:
        """``in_s``: seconds left until the deadline (default: the whole ``deadlines.total_s``)."""
        self.trace = trace
        self.deadlines = deadlines
        self._in_s = deadlines.total_s if in_s is None else in_s
        self._task: asyncio.Task[object] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def __enter__(self) -> TotalDeadline:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        assert self._task is not None
        self._timer = loop.call_at(loop.time() + self._in_s, self._expire)
        return self

    def _expire(self) -> None:
        trace = self.trace
        if trace.end_ns is None and trace.cancel_reason is None and self._task is not None:
            trace.cancel_reason = "timeout"
            self._task.cancel()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if self._timer is not None:
            self._timer.cancel()
        trace = self.trace
        if exc_type is None or not issubclass(exc_type, asyncio.CancelledError) or trace.cancel_reason is None:
            return False
        assert self._task is not None
        self._task.uncancel()
        if trace.cancel_reason == "timeout":
            trace.fail("timeout", timeout_message(trace, self.deadlines))
        else:
            trace.fail(trace.cancel_reason, f"cancelled: {trace.cancel_reason}")
        return True


def timeout_message(trace: RequestTrace, deadlines: Deadlines) -> str:
    """The total deadline's error, saying how long the stream had been silent (a stall shows as one)."""
    last = trace.last_ns or trace.headers_ns or trace.sent_ns
    return (f"no end after the {deadlines.total_s:g} s request deadline "
            f"(silent for the last {(_perf_ns() - last) / 1e9:.1f} s)")


async def _read_stream(content: aiohttp.StreamReader, trace: RequestTrace) -> None:
    """Split the SSE byte stream into ``data:`` payloads, stamping each read once."""
    sse = SseSplitter(trace)
    async for data in content.iter_any():
        if not sse.feed(data, _perf_ns()):
            return
    sse.end(_perf_ns())


MAX_LINE = 1 << 20
"""The longest SSE line accepted (1 MiB; a chat chunk is well under 1 KiB): a longer one ends the request ``malformed``."""
_MAX_COUNT = 1 << 31
"""Token counts at or above this are not counts (and would overflow the float figures)."""


class SseSplitter:
    """Splits SSE bytes, read by read, into ``data:`` payloads for :func:`_on_payload` (both clients use it).

    Linear in the bytes: an unfinished line is kept in a ``bytearray`` and
    extended, only each read's new bytes are searched for a newline, and a
    line beyond :data:`MAX_LINE` ends the request at once, so one endless line
    costs no more than its bytes and never starves the other streams of the
    load process.
    """

    __slots__ = ("trace", "pending")

    def __init__(self, trace: RequestTrace) -> None:
        self.trace = trace
        self.pending: bytes | bytearray = b""
        """The unfinished line: one read's tail as is (the common case), a bytearray once it spans reads."""

    def feed(self, data: bytes, now: int) -> bool:
        """One read's bytes, all stamped ``now``; False once the stream is over or broken."""
        pending = self.pending
        if pending:
            if data.rfind(b"\n") < 0:  # the line goes on: keep the bytes, search only the new ones
                if type(pending) is bytes:
                    pending = self.pending = bytearray(pending)
                pending += data
                if len(pending) > MAX_LINE:
                    return self._too_long()
                return True
            joined = pending + data
            data = joined if type(joined) is bytes else bytes(joined)
            self.pending = b""
        lines = data.split(b"\n")
        tail = lines.pop()
        if len(data) > MAX_LINE and (len(tail) > MAX_LINE or any(len(line) > MAX_LINE for line in lines)):
            self.pending = data
            return self._too_long()
        trace = self.trace
        for line in lines:
            if line[:5] == b"data:":
                if not _on_payload(line[5:].strip(), now, trace):
                    return False
            elif line and line[:1] != b":" and line.strip() and not line.startswith((b"event:", b"id:", b"retry:")):
                trace.fail("malformed", f"not an SSE line: {line[:120]!r}")
                return False
        if tail:
            self.pending = tail
        return True

    def _too_long(self) -> bool:
        self.trace.fail("malformed", f"SSE line longer than {MAX_LINE >> 20} MiB: {bytes(self.pending[:80])!r}...")
        self.pending = b""
        return False

    def end(self, now: int) -> bool:
        """The body ended: a last line without its newline still counts.  True once ``[DONE]`` was seen."""
        pending, self.pending = bytes(self.pending), b""
        if pending.strip():
            if pending[:5] == b"data:":
                _on_payload(pending[5:].strip(), now, self.trace)
            else:
                self.trace.fail("malformed", f"truncated SSE line: {pending[:120]!r}")
        return self.trace.saw_done


def _kind(value: object) -> str:
    """``value``'s JSON type in words, for an error a person reads."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def _brief(value: object) -> str:
    """A short printable form of a parsed value (never raises: deep nesting has no repr)."""
    if type(value) is str:
        return value[:300]
    try:
        return repr(value)[:300]
    except RecursionError:
        return f"<{_kind(value)}>"


def _bad(trace: RequestTrace, field: str, value: object, expected: str, payload: bytes) -> bool:
    """A chunk of the wrong shape: the request ends ``malformed`` with what was wrong, where."""
    what = f"{_kind(value)} {_brief(value)[:40]}" if type(value) in (int, float, str, bool) else _kind(value)
    trace.fail("malformed", f"stream chunk's {field} is {what}, not {expected}: {payload[:120]!r}")
    return False


def _stream_error(trace: RequestTrace, obj: dict[str, Any], err: object) -> bool:
    """An error event in the stream (rare, so off :func:`_on_payload`'s path): the request fails."""
    msg = err.get("message", err) if type(err) is dict else (err or obj.get("message", ""))
    trace.fail("stream_error", f"error in stream: {_brief(msg)}")
    return True  # SGLang still sends [DONE]


def _on_payload(payload: bytes, now: int, trace: RequestTrace) -> bool:
    """Handle one SSE event; returns False when the stream is over or broken.

    Every field read is type-checked (``type(x) is dict``: cheap on the hot
    path): a chunk of the wrong shape ends the request ``malformed`` with a
    reason, never an exception that would pass for a reset connection.
    """
    if payload == b"[DONE]":
        trace.saw_done = True
        trace.end_ns = now  # the request is over; draining the HTTP framing after it is not its time
        return False
    try:
        # raw_decode's end is a position in the text, not in the bytes: compare and slice the text
        # (SGLang writes raw UTF-8, so the two differ as soon as one multi-byte character appears).
        text = payload.decode()
        obj, end = _raw_decode(text)
        if end != len(text) and text[end:].strip():
            raise ValueError("trailing data")
    except (ValueError, RecursionError):  # UnicodeDecodeError included; RecursionError: nesting too deep
        trace.fail("malformed", f"bad JSON in stream: {payload[:120]!r}")
        return False
    if type(obj) is not dict:
        trace.fail("malformed", f"stream event is not an object: {payload[:120]!r}")
        return False
    err = obj.get("error")
    if err is not None or obj.get("object") == "error":
        return _stream_error(trace, obj, err)
    usage = obj.get("usage")
    ct = None
    if usage is not None:
        if type(usage) is not dict:
            return _bad(trace, "usage", usage, "an object", payload)
        ct = usage.get("completion_tokens")
        if ct is not None and (type(ct) is not int or not 0 <= ct < _MAX_COUNT):
            return _bad(trace, "usage.completion_tokens", ct, "a token count", payload)
        pt = usage.get("prompt_tokens")
        if pt is not None:
            if type(pt) is not int or not 0 <= pt < _MAX_COUNT:
                return _bad(trace, "usage.prompt_tokens", pt, "a token count", payload)
            trace.prompt_tokens = pt
    choices = obj.get("choices")
    if choices:
        if type(choices) is not list:
            return _bad(trace, "choices", choices, "a list", payload)
        choice = choices[0]
        if type(choice) is not dict:
            return _bad(trace, "choices[0]", choice, "an object", payload)
        delta = choice.get("delta")
        if delta and type(delta) is not dict:
            return _bad(trace, "choices[0].delta", delta, "an object", payload)
        said = delta and (delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"))
        if said:
            if type(said) is not str:
                return _bad(trace, "choices[0].delta text", said, "a string", payload)
            n = 1 if ct is None else max(1, ct - (trace.cum_usage or 0))  # the tokens since the last text chunk
            if n != 1:
                trace.multi_token = True
            if trace.first_ns is None:
                trace.first_ns = now
            trace.last_ns = now
            trace.tokens += n
            trace.chunk_ns.append(now)
            trace.chunk_tok.append(n)
            if ct is not None:
                # Only a chunk that carries text advances the count: vLLM sends a token that makes no
                # text yet (half a UTF-8 character) as an empty chunk, and the next text chunk carries it.
                trace.cum_usage = ct
        fr = choice.get("finish_reason")
        if fr:
            if type(fr) is not str:
                return _bad(trace, "choices[0].finish_reason", fr, "a string", payload)
            trace.finish_reason = fr[:100]
        if ct is not None and (trace.last_usage is None or ct > trace.last_usage):
            trace.last_usage = ct
    elif ct is not None:
        trace.usage_tokens = ct  # the final usage chunk (choices == [])
    if "sglext" in obj:
        trace.spec = spec_tokens(obj["sglext"])  # SGLang's extension chunk: per-request speculative figures
    return True


_SPEC_FIELDS = (("accept_length", "spec_accept_length", float), ("accept_rate", "spec_accept_rate", float),
                ("verify_ct", "spec_verify_ct", int), ("correct_drafts", "spec_num_correct_drafts", int),
                ("proposed_drafts", "spec_num_proposed_drafts", int), ("cap_length", "spec_cap_length", float))


def spec_tokens(ext: object) -> SpecTokens | None:
    """SGLang's ``sglext`` -> :class:`SpecTokens`, or None when it carries none or is malformed.

    0.5.23 ``entrypoints/openai/protocol.py`` ``SglExt.spec_tokens_details``: one ``SpecTokensDetails``,
    or a list of them when ``n > 1`` (choice 0 is the one measured).  A field of the wrong type is left
    out, never a failed request: the figures are a bonus to the timing, which stands on its own.
    """
    if type(ext) is not dict:
        return None
    details = ext.get("spec_tokens_details")
    if type(details) is list:
        details = details[0] if details else None
    if type(details) is not dict:
        return None
    values: dict[str, Any] = {}
    for name, key, kind in _SPEC_FIELDS:
        v = details.get(key)
        if type(v) is int and kind is float:
            v = float(v)
        if type(v) is kind and math.isfinite(v) and v >= 0:
            values[name] = v
    if values.get("verify_ct", 0) == 0:
        return None  # 0.5.23 sends zeros when nothing was verified: no figures, not a 0.0 accept length
    if values.get("cap_length") == 0.0:
        values.pop("cap_length")
    return SpecTokens(**values)


# --------------------------------------------------------------------------- results


def _quantile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted, non-empty list."""
    pos = (len(sorted_vals) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def chunk_gaps(trace: RequestTrace) -> list[int]:
    """Nanoseconds between consecutive content chunks (computed once: the ITLs and the largest gap share them)."""
    ns = trace.chunk_ns
    return list(map(operator.sub, ns[1:], ns))


def itl_quantiles(trace: RequestTrace, gaps: list[int]) -> tuple[float | None, float | None]:
    """p50 and p99 of the inter-token latencies: each gap over the tokens its later chunk carried (seconds per token).

    With one token a chunk (or the tokens spread evenly over the chunks) the latency grows with the gap, so
    the gaps are sorted as integers and only the two or four needed are turned into seconds: the same
    figures as sorting every latency, bit for bit, in a third of the time.
    """
    if not gaps:
        return None, None
    if trace.multi_token:
        itls = sorted([g / 1e9 / n for g, n in zip(gaps, trace.chunk_tok[1:])])
        return _quantile(itls, 0.5), _quantile(itls, 0.99)
    order = sorted(gaps)
    usage = trace.usage_tokens
    if usage is not None and usage > len(trace.chunk_ns):
        # No per-chunk usage but the final count shows chunks carried several tokens: spread evenly.
        each = (usage - 1) / (len(trace.chunk_ns) - 1)
        return _quantile_of(order, 0.5, each), _quantile_of(order, 0.99, each)
    return _quantile_of(order, 0.5, None), _quantile_of(order, 0.99, None)


def _quantile_of(sorted_gaps: list[int], q: float, each: float | None) -> float:
    """:func:`_quantile` of ``gap / 1e9 [/ each]`` over already sorted gaps, converting only the two it reads."""
    pos = (len(sorted_gaps) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_gaps) - 1)
    a, b = sorted_gaps[lo] / 1e9, sorted_gaps[hi] / 1e9
    if each is not None:
        a, b = a / each, b / each
    return a + (b - a) * (pos - lo)


def max_gap(trace: RequestTrace, gaps: list[int]) -> tuple[float | None, int | None]:
    """The largest gap between content chunks (an incomplete request's trailing silence counts too)."""
    stamps = trace.chunk_ns
    if not trace.ok and stamps and trace.end_ns is not None:
        gaps = [*gaps, trace.end_ns - stamps[-1]]
    if not gaps:
        return None, None
    best = max(gaps)
    return best / 1e9, stamps[gaps.index(best)]  # the first of equal gaps, as ever


def to_result(trace: RequestTrace, sweep_id: str, clock: Clock, keep_chunks: bool = True,
              host: str = "sim") -> RequestResult:
    """Derive every per-request figure from what the stream recorded."""
    if trace.usage_tokens is not None:  # the final usage chunk: the server's own count
        tokens, from_usage = trace.usage_tokens, True
    elif trace.last_usage is not None:  # per-chunk usage, but the stream ended early
        tokens, from_usage = max(trace.last_usage, trace.tokens), True
    else:
        tokens, from_usage = trace.tokens, False
    sent, end = trace.sent_ns, trace.end_ns or trace.sent_ns
    e2e = (end - sent) / 1e9
    ttft = (trace.first_ns - sent) / 1e9 if trace.first_ns is not None else None
    decode = None
    first_tok = trace.chunk_tok[0] if trace.multi_token and trace.chunk_tok else 1
    if (tokens > first_tok and trace.first_ns is not None and trace.last_ns is not None
            and trace.last_ns > trace.first_ns):
        # (tokens - 1)/(t_last - t_first), not crediting a multi-token first chunk to the decode interval.
        decode = (tokens - first_tok) * 1e9 / (trace.last_ns - trace.first_ns)
    tpot = (e2e - ttft) / (tokens - 1) if ttft is not None and tokens > 1 else None
    gaps = chunk_gaps(trace)
    itl_p50, itl_p99 = itl_quantiles(trace, gaps)
    gap, gap_at = max_gap(trace, gaps)
    chunk_tok: list[int] | None = list(trace.chunk_tok) if trace.multi_token else None
    if trace.cum_usage is not None and trace.chunk_tok and from_usage and tokens > trace.tokens:
        # Per-chunk usage, yet the server counted more: the last tokens made no text (vLLM's trailing
        # empty chunks).  They arrived with or after the last text chunk; credit them there.
        chunk_tok = list(trace.chunk_tok)
        chunk_tok[-1] += tokens - trace.tokens
    return RequestResult(
        t=clock.wall(end),
        host=host,
        sweep_id=sweep_id,
        request_id=trace.request_id,
        concurrency=trace.concurrency,
        warmup=trace.warmup,
        ok=trace.ok,
        error_class=trace.error_class,
        error=trace.error,
        status=trace.status,
        intended_send=clock.wall(trace.intended_ns),
        sent=clock.wall(sent),
        ttfb_s=(trace.headers_ns - sent) / 1e9 if trace.headers_ns is not None else None,
        ttft_s=ttft,
        e2e_s=e2e,
        prompt_tokens=trace.prompt_tokens,
        completion_tokens=tokens,
        tokens_from_usage=from_usage,
        chunks=len(trace.chunk_ns),
        decode_tok_s=decode,
        e2e_tok_s=tokens / e2e if e2e > 0 and tokens else None,
        tpot_s=tpot,
        itl_p50_s=itl_p50,
        itl_p99_s=itl_p99,
        max_gap_s=gap,
        max_gap_at=clock.wall(gap_at) if gap_at is not None else None,
        # Floored to the microsecond, never rounded up: a chunk that came in the same read as [DONE]
        # must not land after the request's end (sent + e2e_s) and drop out of the steady window.
        chunk_offsets_ms=[(n - sent) // 1000 / 1000 for n in trace.chunk_ns] if keep_chunks else None,
        chunk_tokens=chunk_tok,
        finish_reason=trace.finish_reason,
        spec=trace.spec,
    )
