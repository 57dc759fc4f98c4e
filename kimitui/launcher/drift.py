"""Drift: where the running server's effective args differ from the profile meant to run.

``/server_info`` returns SGLang's ``ServerArgs`` flattened; a knob the profile
leaves to SGLang (``None``) is not drift, nor is a knob the server does not
report (renamed or removed in that SGLang version).
"""

from __future__ import annotations

from typing import Any

from kimitui.launcher.http_ready import client
from kimitui.profiles import Profile
from kimitui.telemetry.metrics_poll import server_drift

_SKIP = frozenset({"extra_args", "env"})


def expected_args(profile: Profile) -> dict[str, Any]:
    """The knobs a profile sets explicitly (``None`` = left to SGLang, so never drift)."""
    return {k: v for k, v in profile.knobs().items() if v is not None and k not in _SKIP}


def drift(profile: Profile, server_args: dict[str, Any]) -> dict[str, list[Any]]:
    """knob -> [meant, running] for every knob the profile sets that the server reports differently.

    The comparison itself is the metrics poller's (:func:`kimitui.telemetry.metrics_poll.server_drift`),
    so ``status`` and the cockpit judge drift the same way.
    """
    return server_drift(server_args, expected_args(profile))


async def fetch_server_info(base_url: str, timeout: float = 10.0) -> dict[str, Any]:
    """``/server_info`` (falling back to the deprecated ``/get_server_info``) as a dict."""
    async with client(base_url, timeout) as http:
        resp = await http.get(f"{base_url}/server_info")
        if resp.status_code == 404:
            resp = await http.get(f"{base_url}/get_server_info")
        resp.raise_for_status()
        data = resp.json()
    if not isinstance(data, dict):
        raise ValueError(f"{base_url}/server_info is not a JSON object")
    return data
