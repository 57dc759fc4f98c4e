"""The last two readiness checks, over HTTP (httpx): ``/health`` 200, then one warm-up request."""

from __future__ import annotations

import asyncio
import time

import httpx


class NotHealthy(Exception):
    """The server did not answer as a ready server should; the message says what it answered."""


def client(base_url: str = "http://", timeout: float = 10.0) -> httpx.AsyncClient:
    """An httpx client for the server's control plane.

    ``trust_env=False``: a proxy from the environment must never sit between kimitui
    and the server.  Certificates are loaded only for ``https`` (loading the bundle
    costs ~150 ms, most of what a swap would otherwise add after "ready to roll").
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=2.0), trust_env=False, verify=base_url.startswith("https:")
    )


async def wait_healthy(http: httpx.AsyncClient, base_url: str, deadline: float, *, interval: float = 0.05) -> float:
    """Poll ``/health`` until 200 or ``deadline`` (monotonic); returns the seconds it took."""
    t0 = time.monotonic()
    last = "no answer"
    while True:
        try:
            resp = await http.get(f"{base_url}/health", timeout=max(1.0, min(25.0, deadline - time.monotonic())))
            if resp.status_code == 200:
                return time.monotonic() - t0
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() + interval > deadline:
            raise NotHealthy(f"{base_url}/health never answered 200 (last: {last})")
        await asyncio.sleep(interval)


async def served_model(http: httpx.AsyncClient, base_url: str) -> str:
    """The model id from ``/v1/models`` (used when no profile says it)."""
    try:
        data = (await http.get(f"{base_url}/v1/models")).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise NotHealthy(f"{base_url}/v1/models gave no model id ({type(exc).__name__})") from exc


async def warmup(http: httpx.AsyncClient, base_url: str, model: str, *, timeout: float = 60.0) -> float:
    """One short chat completion; returns its latency.  Any non-200 or empty answer fails."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK"}],
        "max_tokens": 4,
        "temperature": 0,
    }
    t0 = time.monotonic()
    try:
        resp = await http.post(f"{base_url}/v1/chat/completions", json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        raise NotHealthy(f"warm-up request to {base_url} failed: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise NotHealthy(f"warm-up request answered HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        data = resp.json()
        choice = data["choices"][0]
        choice["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise NotHealthy(f"warm-up answer is not a chat completion: {resp.text[:200]}") from exc
    # a dying SGLang answers open requests with finish_reason "abort" and no tokens
    tokens = (data.get("usage") or {}).get("completion_tokens")
    if choice.get("finish_reason") == "abort" or tokens == 0:
        raise NotHealthy(f"warm-up request was aborted by the server (finish_reason={choice.get('finish_reason')!r}, "
                         f"completion_tokens={tokens})")
    return time.monotonic() - t0
