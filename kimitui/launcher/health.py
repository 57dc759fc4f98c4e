"""The last two readiness checks, over HTTP (httpx): ``/health`` 200, then one warm-up request."""

from __future__ import annotations

import asyncio
import time

import httpx


class NotHealthy(Exception):
    """The server did not answer as a ready server should; the message says what it answered."""


def client(timeout: float = 10.0) -> httpx.AsyncClient:
    # trust_env=False: a proxy from the environment must never sit between kimitui and the server
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=2.0), trust_env=False)


async def wait_healthy(base_url: str, deadline: float, *, interval: float = 0.05) -> float:
    """Poll ``/health`` until 200 or ``deadline`` (monotonic); returns the seconds it took."""
    t0 = time.monotonic()
    last = "no answer"
    async with client(timeout=max(1.0, min(25.0, deadline - t0))) as http:
        while True:
            try:
                resp = await http.get(f"{base_url}/health")
                if resp.status_code == 200:
                    return time.monotonic() - t0
                last = f"HTTP {resp.status_code}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() + interval > deadline:
                raise NotHealthy(f"{base_url}/health never answered 200 (last: {last})")
            await asyncio.sleep(interval)


async def warmup(base_url: str, model: str, *, timeout: float = 60.0) -> float:
    """One short chat completion; returns its latency.  Any non-200 or empty answer fails."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK"}],
        "max_tokens": 4,
        "temperature": 0,
    }
    t0 = time.monotonic()
    async with client(timeout=timeout) as http:
        try:
            resp = await http.post(f"{base_url}/v1/chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise NotHealthy(f"warm-up request to {base_url} failed: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise NotHealthy(f"warm-up request answered HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        data = resp.json()
        data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise NotHealthy(f"warm-up answer is not a chat completion: {resp.text[:200]}") from exc
    return time.monotonic() - t0
