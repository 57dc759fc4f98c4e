"""A speculative SGLang-shaped chat server on 127.0.0.1 with exactly known timing, that records what it was sent.

It answers as SGLang 0.5.23 does with ``return_spec_tokens_details`` (``entrypoints/openai/serving_chat.py``
``_generate_chat_stream``): content chunks carrying several tokens each (per-chunk usage when
``continuous_usage_stats``), then ``{"choices": [], "usage": null, "sglext": {"spec_tokens_details": ...}}``,
then the usage chunk and ``[DONE]``.  ``/server_info`` answers ``info`` (a 404, as vLLM, when None);
such a server also refuses, with a 400, a body that asks for SGLang's extension (a strict server).

Per-request knobs in the body (a sweep passes them with ``extra_body``): ``chunks`` (tokens per content
chunk, in order), ``ttft_ms``, ``tick_ms`` (between content chunks), ``sglext`` (the extension object to
send, replacing the well-formed one; ``null`` sends none), ``sglext_first`` (send it before the first
content chunk), ``sglext_delay_ms`` (a pause before it).  ``requests`` keeps each request's lower-cased
headers and body.

    async with SpecServer(info={"speculative_algorithm": "EAGLE3"}) as srv:
        await SweepEngine(SweepSpec(url=srv.url, ...), events.append).run()
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from tests.support.loopback import LoopbackServer

_UNSET = object()
_SGLANG_ONLY = ("return_spec_tokens_details",)


@dataclass
class Seen:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def details(tokens: int, verify_ct: int, draft_tokens: int = 4) -> dict[str, Any]:
    """``SpecTokensDetails`` as 0.5.23 fills it (``managers/tokenizer_manager.py`` ``_calculate_spec_decoding_metrics``)."""
    proposed = verify_ct * (draft_tokens - 1)
    correct = tokens - verify_ct  # every verify pass yields its accepted drafts plus the bonus token
    return {"spec_accept_rate": correct / proposed, "spec_accept_length": tokens / verify_ct, "spec_cap_length": 0.0,
            "spec_block_accept_length": 0.0, "spec_num_correct_drafts": correct, "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": verify_ct, "spec_correct_drafts_histogram": [], "spec_cap_lens_histogram": []}


def _response(status: int, body: bytes) -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}.get(status, b"Error")
    return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status, reason, len(body), body)


def _event(obj: dict[str, Any]) -> bytes:
    data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


class SpecServer(LoopbackServer):
    def __init__(self, info: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.info = info
        self.requests: list[Seen] = []

    @property
    def chats(self) -> list[Seen]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, path = head[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                seen = Seen(method, path.split("?")[0], headers, json.loads(raw) if raw else {})
                self.requests.append(seen)
                await self._answer(seen, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def _answer(self, seen: Seen, writer: asyncio.StreamWriter) -> None:
        if seen.path in ("/server_info", "/get_server_info") and self.info is not None:
            writer.write(_response(200, json.dumps(self.info).encode()))
        elif seen.path != "/v1/chat/completions":
            writer.write(_response(404, b'{"detail":"Not Found"}'))
        elif self.info is None and any(k in seen.body for k in _SGLANG_ONLY):
            writer.write(_response(400, b'{"object":"error","message":"extra fields not permitted","code":400}'))
        else:
            await self._stream(seen.body, writer)
        await writer.drain()

    async def _stream(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        chunks = [int(n) for n in body.get("chunks") or [1] * int(body.get("max_tokens") or 16)]
        total, each = sum(chunks), bool((body.get("stream_options") or {}).get("continuous_usage_stats"))
        base = {"id": "spec-1", "object": "chat.completion.chunk", "created": 1780000000, "model": body.get("model")}
        ext = body.get("sglext", _UNSET)
        if ext is _UNSET:
            ext = {"spec_tokens_details": details(total, max(1, len(chunks)))} if body.get("return_spec_tokens_details") else None
        tail = _event({**base, "choices": [], "usage": None, "sglext": ext}) if ext is not None else b""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                  "finish_reason": None}]}))
        if body.get("sglext_first") and tail:
            await asyncio.sleep(float(body.get("sglext_delay_ms", 0)) / 1000)
            writer.write(tail)
            tail = b""
        await asyncio.sleep(float(body.get("ttft_ms", 0)) / 1000)
        done = 0
        for i, n in enumerate(chunks):
            if i:
                await asyncio.sleep(float(body.get("tick_ms", 1)) / 1000)
            done += n
            chunk: dict[str, Any] = {**base, "choices": [{"index": 0, "delta": {"content": " tok" * n},
                                                          "finish_reason": "length" if i == len(chunks) - 1 else None}]}
            if each:
                chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": done, "total_tokens": 5 + done}
            writer.write(_event(chunk))
            await writer.drain()
        if tail:
            await asyncio.sleep(float(body.get("sglext_delay_ms", 0)) / 1000)
            writer.write(tail)
        writer.write(_event({**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": total,
                                                              "total_tokens": 5 + total}}))
        data = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
