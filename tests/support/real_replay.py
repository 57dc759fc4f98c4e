"""A 127.0.0.1 server that answers with what the real SGLang 0.5.18 server answered (its captured files).

    async with replay({"/metrics": REAL / "tiny-llama" / "metrics_after.txt", ...}) as url:
        ...

Each route answers the captured status line, headers and body (``tests/support/real_sglang.py``
``read_http``), re-framed with a ``content-length`` where curl had undone the server's chunking; a
route to ``None`` answers 404 (an endpoint that server version lacks); a raw SSE capture (no HTTP head)
is sent as the real server streams it: ``text/event-stream``, chunked, one SSE event per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from tests.support.real_sglang import read_http

_REASONS = {200: b"OK", 404: b"Not Found"}


def _response(path: Path | None) -> bytes:
    if path is None:
        body = b'{"detail":"Not Found"}'
        return (b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
                + body)
    status, headers, text = read_http(path)
    body = text.encode()
    if status == 0:  # the raw SSE bytes of a streamed chat completion
        events = [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
        return (b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                b"transfer-encoding: chunked\r\n\r\n" + chunks)
    head = [b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"X"))]
    head += [f"{k}: {v}".encode() for k, v in headers.items() if k not in ("content-length", "transfer-encoding")]
    head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


@contextlib.asynccontextmanager
async def replay(routes: dict[str, Path | None], hits: list[str] | None = None) -> AsyncIterator[str]:
    """Serve the captured answers by path (the query string ignored); yields the base URL.  ``hits``, if
    given, gets every request's method and path (``POST /flush_cache``), in order."""
    answers = {route: _response(path) for route, path in routes.items()}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                method, target = head.split(b" ")[0].decode(), head.split(b" ")[1].decode().split("?")[0]
                if hits is not None:
                    hits.append(f"{method} {target}")
                writer.write(answers.get(target) or _response(None))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
