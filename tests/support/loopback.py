"""A tiny asyncio server on 127.0.0.1 for tests that need a server shaped a certain way.

Subclasses write ``_handle(reader, writer)``; ``async with`` starts it on a free port (``url``) and
closes it.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self


class LoopbackServer:
    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> Self:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        assert self.server is not None
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError
