"""Drift: where the running server's effective args differ from the profile meant to run.

Which knobs a profile asks for is SGLang knowledge (:mod:`kimitui.sglang.expected_args`); here the
server's ``/server_info`` is fetched and the two compared.  A knob the server does not report
(renamed or removed in that SGLang version) is not drift.
"""

from __future__ import annotations

from typing import Any

from kimitui.launcher.http_ready import client
from kimitui.profiles import Profile
from kimitui.sglang.expected_args import expected_args
from kimitui.sglang.server_info import server_drift


def drift(profile: Profile, server_args: dict[str, Any]) -> dict[str, list[Any]]:
    """knob -> [meant, running] for every knob the profile sets that the server reports differently.

    The comparison itself is SGLang knowledge (:func:`kimitui.sglang.server_info.server_drift`),
    so ``status`` and the cockpit judge drift the same way.
    """
    return server_drift(server_args, expected_args(profile.knobs()))


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
