"""SGLang's generation endpoints, as a mixin of :class:`kimitui.sim.server.SimServer`.

POST /v1/chat/completions, /v1/completions (OpenAI, stream and not) and
/generate (native, cumulative text when streaming).  Each request becomes a
:class:`~kimitui.sim.scheduler.Req`; the handler only waits on its buffer and
turns new tokens into SSE events, so chunk timing is the scheduler's.  Faults
``http_500`` and ``drop`` are acted out here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from kimitui.sim import api
from kimitui.sim.faults import RequestFault, internal_error_body
from kimitui.sim.pd import TransferFailed
from kimitui.sim.scheduler import Req
from kimitui.sim.server_state import SimServerState
from kimitui.sim.textgen import TokenStream, natural_length, stable_hash


def bootstrap_info(body: object) -> tuple[str, int, int] | None:
    """The PD fields the router adds (``bootstrap_host``, ``bootstrap_port``, ``bootstrap_room``), if any."""
    if not isinstance(body, dict) or body.get("bootstrap_room") is None:
        return None
    try:
        room = int(body["bootstrap_room"])
        port = int(body.get("bootstrap_port") or 8998)
    except (TypeError, ValueError) as exc:
        raise api.BadRequest(f"invalid bootstrap info: {exc}") from exc
    return str(body.get("bootstrap_host") or "127.0.0.1"), port, room


class SimulatedDrop(Exception):
    """Raised inside a response body to cut the connection (fault ``drop``)."""


def _sse(obj: dict[str, Any]) -> bytes:
    """One event as SGLang writes it: ``model_dump_json()``, so non-ASCII text goes out as raw UTF-8."""
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def _text_json(text: str) -> bytes:
    return json.dumps(text, ensure_ascii=False).encode()


def split_in_a_character(data: bytes) -> tuple[bytes, bytes] | None:
    """``data`` cut inside its first multi-byte UTF-8 character, or None if it is all ASCII.

    A real server's event can reach the client in two reads with a character
    split between them (TCP segmenting it); the simulator writes every
    non-ASCII event that way so clients meet it in every test.
    """
    for i, b in enumerate(data):
        if b >= 0xC0:  # a lead byte: cut after it
            return data[:i + 1], data[i + 1:]
    return None


_DONE = b"data: [DONE]\n\n"
_MARK = "\x00sim-text\x00"


def content_chunk_template(p: api.GenParams, model: str, created: int, chat: bool) -> tuple[bytes, bytes]:
    """The SSE bytes of a content chunk before and after its text (same JSON as the dict form)."""
    chunk = api.chat_chunk(p, model, created, {"reasoning_content": None, "content": _MARK}) if chat else api.completion_chunk(p, model, created, _MARK)
    head, tail = _sse(chunk).split(_text_json(_MARK))
    return head, tail


class GenerationRoutes(SimServerState):
    """Endpoints that generate tokens through the scheduler."""

    async def chat(self, request: Request) -> Response:
        return await self._openai(request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._openai(request, "completion")

    async def _read(self, request: Request) -> Any:
        try:
            return await request.json()
        except ValueError as exc:
            raise api.BadRequest(f"invalid JSON body: {exc}") from exc

    def _not_accepting(self) -> Response | None:
        if self.accepting and self.sched is not None:
            return None
        return JSONResponse(api.error_body("The server is not ready yet (starting up).", 503, "ServiceUnavailableError"), status_code=503)

    def _make_req(self, p: api.GenParams) -> tuple[Req | None, Response | None]:
        ctx = self.s.context_length
        if p.prompt_tokens >= ctx:  # SGLang 0.5.23 tokenizer_manager.py::_validate_one_request, first check
            msg = f"The input ({p.prompt_tokens} tokens) is longer than the model's context length ({ctx} tokens)."
            return None, JSONResponse(api.error_body(msg), status_code=400)
        max_new = p.max_new_tokens if p.max_new_tokens is not None else max(0, ctx - p.prompt_tokens)
        if p.prompt_tokens + max_new > ctx:
            msg = (
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. "
                f"You requested a total of {p.prompt_tokens + max_new} tokens: {p.prompt_tokens} tokens from the input messages "
                f"and {max_new} tokens for the completion. Please reduce the number of tokens in the input messages "
                "or the completion to fit within the limit."
            )
            return None, JSONResponse(api.error_body(msg), status_code=400)
        target = max_new if p.ignore_eos else min(max_new, natural_length(p.prompt_text, self.s.seed))
        fault = self.faults.for_request(target) if self.ready else None  # never the warm-up
        if fault is None:
            fault = RequestFault()
        if fault.kind == "http_500":
            return None, JSONResponse(internal_error_body(), status_code=500)
        req = Req(
            rid=p.rid,
            prompt_text=p.prompt_text,
            prompt_tokens=p.prompt_tokens,
            max_new_tokens=max_new,
            target=target,
            tokens=TokenStream(p.prompt_text, self.s.seed),
            stop=p.stop,
            drop_at=fault.at_token if fault.kind == "drop" else None,
            stall_at=fault.at_token if fault.kind == "stall" else None,
            stall_s=fault.stall_s,
        )
        return req, None

    async def _admit(self, request: Request, parse: Callable[[Any], api.GenParams]) -> tuple[api.GenParams, Req] | Response:
        """Parse the body and hand the request to the scheduler, or the response that refuses it."""
        refused = self._not_accepting()
        if refused:
            return refused
        try:
            body = await self._read(request)
            p = parse(body)
            boot = bootstrap_info(body) if self.pd is not None else None
        except api.BadRequest as exc:
            return JSONResponse(api.error_body(str(exc)), status_code=400)
        p.labels = self._custom_labels(request)
        req, err = self._make_req(p)
        if req is not None:
            req.client_id = request.headers.get("x-request-id")
        if err is not None:
            return err
        assert req is not None and self.sched is not None
        if boot is not None:
            return await self._admit_pd(p, req, boot)
        self.sched.submit(req)
        return p, req

    async def _admit_pd(self, p: api.GenParams, req: Req, boot: tuple[str, int, int]) -> tuple[api.GenParams, Req] | Response:
        """PD: a prefill server waits for the decode side to bootstrap, then prefills one token; a decode
        server first pulls the KV (its wait is part of the request's time, so TTFT includes it)."""
        assert self.pd is not None and self.sched is not None
        host, port, room = boot
        req.bootstrap_room = room
        try:
            if self.pd.mode == "prefill":
                req.target = min(req.target, 1)
                await self.pd.await_bootstrap(room)
                self.sched.submit(req)
            else:
                await self.pd.receive(req, host, port, room)
                self.sched.submit_prefilled(req)
        except TransferFailed as exc:
            if self.metrics is not None:
                self._record(req, [], p.labels)
            return JSONResponse(internal_error_body(str(exc)), status_code=500)
        return p, req

    async def _prefill_only(self, p: api.GenParams, req: Req, kind: str) -> Response:
        """A PD prefill server's answer: once its one token is made and the KV has left for the decode server
        (the router reads the decode server's answer; this one only says the prefill half went well)."""
        assert self.pd is not None and req.bootstrap_room is not None
        text, _ = await self._collect(req, p.labels)
        try:
            await self.pd.after_prefill(req.bootstrap_room, req)
        except TransferFailed as exc:
            return JSONResponse(internal_error_body(str(exc)), status_code=500)
        finish, matched = self._finish(req)
        if kind == "generate":
            return JSONResponse(api.generate_body(p, text, self._ids(req, req.generated), self._native_finish(req), time.monotonic() - req.t_arrival))
        build = api.chat_response if kind == "chat" else api.completion_response
        return JSONResponse(build(p, self.s.served_model_name, text, finish, matched, req.generated))

    async def _openai(self, request: Request, kind: str) -> Response:
        admitted = await self._admit(request, lambda body: api.parse_openai(body, kind))
        if isinstance(admitted, Response):
            return admitted
        p, req = admitted
        if req.bootstrap_room is not None and self.pd is not None and self.pd.mode == "prefill":
            return await self._prefill_only(p, req, kind)
        if p.stream:
            return StreamingResponse(self._openai_stream(p, req), media_type="text/event-stream")
        if req.drop_at is not None:
            return StreamingResponse(self._dropped_body(req), media_type="application/json")
        text, _gaps = await self._collect(req, p.labels)
        finish, matched = self._finish(req)
        build = api.chat_response if kind == "chat" else api.completion_response
        body = build(p, self.s.served_model_name, text, finish, matched, req.generated)
        if kind == "chat" and p.spec_details and self.s.speculative and req.spec.verify_ct:
            body["sglext"] = api.sglext(api.spec_tokens_details(req.spec, req.generated))
        return JSONResponse(body)

    def _finish(self, req: Req) -> tuple[str, api.MatchedStop]:
        if req.finish_reason == "stop":
            return "stop", req.matched_stop if req.matched_stop is not None else api.EOS_TOKEN_ID
        return req.finish_reason or "length", None

    async def _collect(self, req: Req, labels: dict[str, str] | None = None) -> tuple[str, list[tuple[float, int]]]:
        parts: list[str] = []
        gaps: list[tuple[float, int]] = []
        last = None
        try:
            while True:
                pieces, n, done = await req.next_chunk()
                now = time.monotonic()
                if pieces:
                    parts.extend(pieces)
                    if last is not None:
                        gaps.append((now - last, n))
                    last = now
                if done or req.dropped:
                    break
        finally:
            if not req.finished:
                req.abort()
            self._record(req, gaps, labels)
        return "".join(parts), gaps

    async def _dropped_body(self, req: Req) -> AsyncIterator[bytes]:
        await self._collect(req)
        raise SimulatedDrop(req.rid)
        yield b""  # pragma: no cover - makes this an async generator

    def _custom_labels(self, request: Request) -> dict[str, str] | None:
        """0.5.23 ``entrypoints/openai/serving_base.py`` ``extract_custom_labels``: the header's JSON dict,
        only the allowed labels; a bad header is no labels (SGLang logs it and goes on)."""
        allowed = self.s.tokenizer_metrics_allowed_custom_labels
        header = self.s.tokenizer_metrics_custom_labels_header
        raw = request.headers.get(header) if allowed and header else None
        if not raw:
            return None
        try:
            labels = json.loads(raw)
        except ValueError:
            self.log.line(f"Error in request: invalid custom labels header {header}: {raw[:80]!r}")
            return None
        if not isinstance(labels, dict):
            return None
        return {k: str(v) for k, v in labels.items() if k in allowed}

    def _record(self, req: Req, gaps: list[tuple[float, int]], labels: dict[str, str] | None = None,
                streaming: bool = False) -> None:
        if self.metrics is None:
            return
        now = time.monotonic()
        ttft = req.t_first - req.t_arrival if req.t_first is not None else None
        self.metrics.request_done(req.prompt_tokens, req.generated, ttft, now - req.t_arrival, gaps,
                                  req.aborted or req.dropped, labels, req.spec.verify_ct, streaming=streaming)

    async def _openai_stream(self, p: api.GenParams, req: Req) -> AsyncIterator[bytes]:
        model = self.s.served_model_name
        created = int(time.time())
        chat = p.kind == "chat"
        gaps: list[tuple[float, int]] = []
        last = None
        first = True
        template = content_chunk_template(p, model, created, chat)
        try:
            while True:
                pieces, n, done = await req.next_chunk()
                now = time.monotonic()
                if pieces:
                    if last is not None:
                        gaps.append((now - last, n))
                    last = now
                    text = "".join(pieces)
                    if chat and first:
                        yield _sse(api.chat_chunk(p, model, created, {"role": "assistant", "content": "", "reasoning_content": None}))
                        first = False
                    if p.continuous_usage:
                        chunk = api.chat_chunk(p, model, created, {"reasoning_content": None, "content": text}) if chat else api.completion_chunk(p, model, created, text)
                        chunk["usage"] = api.usage(p.prompt_tokens, req.generated)
                        data = _sse(chunk)
                    else:  # the hot path: only the text is serialised per chunk
                        data = template[0] + _text_json(text) + template[1]
                    halves = None if text.isascii() else split_in_a_character(data)
                    if halves is None:
                        yield data
                    else:  # two writes, the loop run in between: a character split across reads
                        yield halves[0]
                        await asyncio.sleep(0)
                        yield halves[1]
                if req.dropped:
                    raise SimulatedDrop(req.rid)
                if done:
                    break
            finish, matched = self._finish(req)
            if chat:
                yield _sse(api.chat_chunk(p, model, created, {"reasoning_content": None, "content": None}, finish, matched))
            else:
                yield _sse(api.completion_chunk(p, model, created, "", finish, matched))
            if chat and p.spec_details and self.s.speculative and req.spec.verify_ct:
                yield _sse(api.sglext_chunk(p, model, created, api.spec_tokens_details(req.spec, req.generated)))
            if p.include_usage:
                yield _sse(api.usage_chunk(p, model, created, req.generated, "chat.completion.chunk" if chat else "text_completion"))
            yield _DONE
        finally:
            if not req.finished:
                req.abort()
            self._record(req, gaps, p.labels, streaming=True)

    async def generate(self, request: Request) -> Response:
        admitted = await self._admit(request, api.parse_generate)
        if isinstance(admitted, Response):
            return admitted
        p, req = admitted
        if req.bootstrap_room is not None and self.pd is not None and self.pd.mode == "prefill":
            return await self._prefill_only(p, req, "generate")
        if p.stream:
            return StreamingResponse(self._generate_stream(p, req), media_type="text/event-stream")
        if req.drop_at is not None:
            return StreamingResponse(self._dropped_body(req), media_type="application/json")
        text, _ = await self._collect(req)
        return JSONResponse(api.generate_body(p, text, self._ids(req, req.generated), self._native_finish(req), time.monotonic() - req.t_arrival))

    def _ids(self, req: Req, n: int) -> list[int]:
        base = stable_hash("ids", req.prompt_text) % 150000
        return [(base + i * 7919) % 160000 for i in range(n)]

    def _native_finish(self, req: Req) -> dict[str, Any] | None:
        if not req.finished:
            return None
        if req.finish_reason == "length":
            return {"type": "length", "length": req.generated}
        if req.finish_reason == "abort":
            return {"type": "abort", "message": "connection dropped"}
        return {"type": "stop", "matched": req.matched_stop if req.matched_stop is not None else api.EOS_TOKEN_ID}

    async def _generate_stream(self, p: api.GenParams, req: Req) -> AsyncIterator[bytes]:
        parts: list[str] = []
        gaps: list[tuple[float, int]] = []
        last = None
        try:
            while True:
                pieces, n, done = await req.next_chunk()
                now = time.monotonic()
                if pieces:
                    if last is not None:
                        gaps.append((now - last, n))
                    last = now
                    parts.extend(pieces)
                    finish = self._native_finish(req) if done else None
                    yield _sse(api.generate_body(p, "".join(parts), self._ids(req, req.generated), finish, now - req.t_arrival))
                if req.dropped:
                    raise SimulatedDrop(req.rid)
                if done:
                    break
            yield _DONE
        finally:
            if not req.finished:
                req.abort()
            self._record(req, gaps, streaming=True)
