"""A port held by a process kimitui did not start, on the simulated host: who holds it, and the ways on.

Before the first start the cockpit says which process holds the port and offers to watch it
when it answers ``/v1/models``; after a failed swap it adds the ways on to the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from kimitui.events import ErrorEvent, ProfileState
from kimitui.host.base import Host
from kimitui.launcher import ports
from kimitui.launcher.http_ready import client, served_model
from kimitui.launcher.reach import reach_server, server_url
from kimitui.profiles import Profile
from kimitui.session import Session

log = logging.getLogger(__name__)


async def openai_model(url: str) -> str | None:
    """The first model id ``url`` serves at ``/v1/models``, or None when it is no OpenAI-compatible server."""
    try:
        async with client(url, timeout=3.0) as http:
            return await served_model(http, url)
    except Exception as exc:  # NotHealthy, or anything else on that port: not a server to watch
        log.debug("%s/v1/models: %s", url, exc)
        return None


class ForeignPort:
    """Checks the simulated host's port against processes kimitui did not start, and says the ways on."""

    def __init__(self, session: Session, host: Host, *, config_path: Path | None,
                 target: Callable[[str], Profile]) -> None:
        self._session = session
        self._host = host
        self._config_path = config_path
        self._target = target
        """The profile as it will run here (on the sim port)."""

    def ways_on(self, target: Profile) -> tuple[str, str]:
        """The command that watches what holds ``target``'s port, and both ways on, in words."""
        on_host = "" if self._host.address is None else f" --host {self._host.name}"
        command = f"kimitui run{on_host} --url {server_url(self._host, target.host, target.port)}"
        ways = (f"start the simulated host on another port (`kimitui --sim-port N`, or `port = N` under [sim] "
                f"in {self._config_path or 'the config file'}), or watch that server without controlling it "
                f"(`{command}`: metrics, health and sweeps; never stopped or swapped)")
        return command, ways

    async def held_at_start(self, profile: str) -> tuple[bool, str | None]:
        """Before the first start: (is the port held by a stranger, the URL to offer watching or None).

        When held, say who holds it and the ways on; the swap would only fail on the same port."""
        try:
            target = self._target(profile)
            holder = await ports.holder(self._host, target.port)
            if holder is None:
                return False, None
            url = await reach_server(self._host, target.host, target.port)
        except Exception as exc:  # a broken profile or host: the swap itself will say it
            log.debug("port check for %s: %s", profile, exc)
            return False, None
        model = await openai_model(url)
        command, ways = self.ways_on(target)
        name = self._host.name
        self._session.publish(ProfileState(host=name, profile=None, state="stopped",
                                           detail=f"port {target.port} held by a process kimitui did not start"))
        self._session.publish(ErrorEvent(
            host=name, source="launcher", detail=f"{holder.socket}; uid {holder.uid}",
            message=f"port {target.port} on {name} is in use by a process kimitui did not start: "
                    f"{holder.describe()}; {profile} was not started. Ways on: {ways}"))
        if model is None:
            return True, None
        self._session.publish(ErrorEvent(
            host=name, source="cockpit", severity="info",
            message=f"it answers /v1/models (model {model}), so it can be watched without being "
                    f"controlled: choose 'Watch {url}' in the command palette (ctrl+p), or run `{command}` "
                    "(metrics, health, sweeps; swaps refused). "
                    "kimitui does not adopt it: it cannot know how to restart a server it did not start."))
        return True, url

    async def hint_after_failure(self, profile: str, our_port: int | None) -> str:
        """After a failed swap: the ways on, if a stranger holds the target's port (``our_port``: ours serves there)."""
        try:
            target = self._target(profile)
            if our_port is not None and our_port == target.port:
                return ""  # ours serves there (the rollback)
            if await ports.holder(self._host, target.port, quick=True) is None:
                return ""
        except Exception as exc:  # the swap's own reason stands alone
            log.debug("port hint for %s: %s", profile, exc)
            return ""
        return f". Ways on: {self.ways_on(target)[1]}"
