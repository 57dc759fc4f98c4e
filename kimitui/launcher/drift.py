"""Drift: where the running server's effective args differ from the profile meant to run.

``/server_info`` returns SGLang's ``ServerArgs`` flattened; a knob the profile
leaves to SGLang (``None``) is not drift, nor is a knob the server does not
report (renamed or removed in that SGLang version).
"""

from __future__ import annotations

import math
from typing import Any

_SKIP = frozenset({"extra_args", "env"})


def _same(meant: Any, running: Any) -> bool:
    if isinstance(meant, bool) or isinstance(running, bool):
        return bool(meant) == bool(running) if isinstance(running, (bool, int)) else False
    if isinstance(meant, (int, float)) and isinstance(running, (int, float)):
        return math.isclose(float(meant), float(running), rel_tol=1e-9, abs_tol=1e-12)
    return str(meant) == str(running)


def drift(profile: Any, server_args: dict[str, Any]) -> dict[str, list[Any]]:
    """knob -> [meant, running] for every profile knob the server reports differently."""
    out: dict[str, list[Any]] = {}
    for knob, meant in profile.knobs().items():
        if knob in _SKIP or meant is None or knob not in server_args:
            continue
        running = server_args[knob]
        if not _same(meant, running):
            out[knob] = [meant, running]
    return out


async def fetch_server_info(base_url: str, timeout: float = 10.0) -> dict[str, Any]:
    """``/server_info`` (falling back to the deprecated ``/get_server_info``) as a dict."""
    from kimitui.launcher.health import client

    async with client(base_url, timeout) as http:
        resp = await http.get(f"{base_url}/server_info")
        if resp.status_code == 404:
            resp = await http.get(f"{base_url}/get_server_info")
        resp.raise_for_status()
        data = resp.json()
    if not isinstance(data, dict):
        raise ValueError(f"{base_url}/server_info is not a JSON object")
    return data
