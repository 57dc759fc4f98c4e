"""A chat server on 127.0.0.1 that counts prompt tokens with a real (tiny) tokenizer.

/work/shared/data/tok-tiny is a byte-level BPE of ~3.3k tokens with a chat
template; a vocabulary that small splits common words into ~3 tokens, the way
the field's small-tokenizer vLLM counted 522 tokens for ``random:128``.  The
``tokenizers`` package is not a dependency, so the BPE is applied here in
plain Python (GPT-2 byte mapping, pre-tokenizer and merge ranks, read from
``tokenizer.json``); it answers every streaming chat completion with the
asked number of tokens and usage carrying that prompt count.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from tests.support.loopback import LoopbackServer

TOKENIZER_DIR = Path("/work/shared/data/tok-tiny")
# GPT-2's pre-tokenizer; \p{L} and \p{N} written with what the re module has
_PRETOKEN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class TinyTokenizer:
    """Counts tokens as ``tokenizers`` would for this byte-level BPE (specials kept whole)."""

    def __init__(self, directory: Path = TOKENIZER_DIR) -> None:
        data = json.loads((directory / "tokenizer.json").read_text())
        self.ranks = {tuple(m if isinstance(m, list) else m.split(" ")): i for i, m in enumerate(data["model"]["merges"])}
        specials = [t["content"] for t in data["added_tokens"]]
        self._specials = re.compile("(" + "|".join(map(re.escape, specials)) + ")")
        self._byte = _bytes_to_unicode()
        self._cache: dict[str, int] = {}

    def _bpe(self, word: str) -> int:
        parts = list(word)
        while len(parts) > 1:
            rank, i = min((self.ranks.get(pair, 1 << 30), i) for i, pair in enumerate(zip(parts, parts[1:])))
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return len(parts)

    def count(self, text: str) -> int:
        n = 0
        for k, piece in enumerate(self._specials.split(text)):
            if k % 2:  # a special token
                n += 1
                continue
            for m in _PRETOKEN.finditer(piece):
                word = "".join(self._byte[b] for b in m.group().encode())
                got = self._cache.get(word)
                if got is None:
                    got = self._cache[word] = self._bpe(word)
                n += got
        return n

    def chat(self, messages: list[dict[str, str]]) -> int:
        """Tokens of the rendered chat template: ``<s>{role}: {content}</s>`` per message."""
        return self.count("".join(f"<s>{m['role']}: {m['content']}</s>" for m in messages))


class TokServer(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.tok = TinyTokenizer()

    def count(self, content: str) -> int:
        return self.tok.chat([{"role": "user", "content": content}])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                body = json.loads(await reader.readexactly(length))
                writer.write(self._respond(body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _respond(self, body: dict) -> bytes:
        prompt = self.tok.chat(body["messages"])
        n = int(body.get("max_tokens") or 16)
        events = ['{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}']
        for i in range(1, n + 1):
            fin = '"length"' if i == n else "null"
            events.append('{"choices":[{"index":0,"delta":{"content":" w"},"finish_reason":%s}],'
                          '"usage":{"prompt_tokens":%d,"completion_tokens":%d}}' % (fin, prompt, i))
        events.append('{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}' % (prompt, n))
        sse = "".join(f"data: {e}\n\n" for e in events).encode() + b"data: [DONE]\n\n"
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(sse)) + sse


def start_tok_server() -> TokServer:
    """Use with ``async with``; it runs on the test's own event loop."""
    return TokServer()
