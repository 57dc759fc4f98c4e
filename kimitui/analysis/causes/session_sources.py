"""What the session itself saw: the server's health and state, the load client's health, the SSH link.

* the server: a failing ``/health`` poll (from the last poll that passed to the next that does), a
  profile that is starting, stopping or failed (a swap in progress), a swap's progress events;
* the client: a :class:`~kimitui.events.ClientHealth` tick whose event-loop lag is 50 ms or more
  means every chunk in that stretch was stamped late: the gap is partly or wholly the client's;
* the link: from ``lost``/``reconnecting`` until ``connected`` again.
"""

from __future__ import annotations

from kimitui.analysis.causes.episodes import Episode
from kimitui.events import ClientHealth, ConnectionState, ProfileState, ServerHealth, SwapProgress

CLIENT_LAG_MS = 50.0
SLOW_HEALTH_S = 1.5
"""SGLang's ``/health`` answers about a second after it asks the scheduler for one token (it checks once a
second); an answer this slow or slower means the scheduler stood still that long."""
POLL_LOOKBACK_S = 3.0
"""A stall began at most about one poll interval before the slow poll was sent."""
DOWN_STATES = frozenset({"starting", "stopping", "failed", "rolled_back", "stopped"})
LINK_DOWN = frozenset({"lost", "reconnecting", "failed", "connecting"})


class SessionSources:
    """Folds health, profile, client and link events into episodes (appended to ``lists``)."""

    def __init__(self, lists: dict[str, list[Episode]]) -> None:
        self.lists = lists
        self._last_ok: float | None = None
        self._unhealthy: Episode | None = None
        self._down: Episode | None = None
        self._link: Episode | None = None

    def add(self, event: object) -> None:
        if isinstance(event, ServerHealth):
            self._health(event)
        elif isinstance(event, ProfileState):
            self._profile(event)
        elif isinstance(event, SwapProgress):
            self._swap(event)
        elif isinstance(event, ClientHealth):
            self._client(event)
        elif isinstance(event, ConnectionState):
            self._connection(event)

    def _open(self, cause: str, start: float, said: str) -> Episode:
        ep = Episode(cause, start, start, said, key=f"{cause}@{start:.3f}", open=True)
        self.lists[cause].append(ep)
        return ep

    def _health(self, ev: ServerHealth) -> None:
        if ev.ok and ev.latency_s is not None and ev.latency_s >= SLOW_HEALTH_S:
            sent = ev.t - ev.latency_s
            start = max(self._last_ok, sent - POLL_LOOKBACK_S) if self._last_ok is not None else sent
            self.lists["server_unhealthy"].append(Episode(
                "server_unhealthy", min(start, sent), ev.t,
                f"/health took {ev.latency_s:.1f} s to answer: the scheduler did not respond",
                key=f"server_unhealthy@{sent:.3f}"))
        if ev.ok:
            self._last_ok = ev.t
            if self._unhealthy is not None:
                self._unhealthy.end, self._unhealthy.open = ev.t, False
                self._unhealthy = None
            return
        if self._unhealthy is None:
            status = f"HTTP {ev.status}" if ev.status is not None else (ev.detail or "no answer")[:60]
            start = self._last_ok if self._last_ok is not None and ev.t - self._last_ok <= 60 else ev.t
            self._unhealthy = self._open("server_unhealthy", start, f"/health failed ({status})")
        self._unhealthy.end = ev.t

    def _profile(self, ev: ProfileState) -> None:
        if ev.state in DOWN_STATES and self._down is None:
            self._down = self._open("server_unhealthy", ev.t, f"{ev.profile or 'the server'} {ev.state}")
        elif ev.state == "serving" and self._down is not None:
            self._down.end, self._down.open = ev.t, False
            self._down = None

    def _swap(self, ev: SwapProgress) -> None:
        if self._down is None:
            self._down = self._open("server_unhealthy", ev.t, f"swap to {ev.profile} in progress ({ev.phase})")
        self._down.end = ev.t

    def _client(self, ev: ClientHealth) -> None:
        lag = ev.loop_lag_ms
        if lag is None or lag < CLIENT_LAG_MS:
            return
        said = f"the load process's event loop ran {lag / 1000:.2f} s late"
        if ev.cpu_pct is not None:
            said += f" (CPU {ev.cpu_pct:.0f} % of a core)"
        self.lists["client_lag"].append(Episode("client_lag", ev.t - lag / 1000.0, ev.t, said,
                                                key=f"client_lag@{ev.t:.3f}", figures={"lag_s": lag / 1000.0}))

    def _connection(self, ev: ConnectionState) -> None:
        if ev.state in LINK_DOWN:
            if self._link is None:
                said = f"SSH link {ev.state}" + (f": {ev.detail[:60]}" if ev.detail else "")
                self._link = self._open("link_lost", ev.t, said)
            self._link.end = ev.t
        elif ev.state == "connected" and self._link is not None:
            self._link.end, self._link.open = ev.t, False
            self._link = None

    def finish(self, now: float) -> None:
        for ep in (self._unhealthy, self._down, self._link):
            if ep is not None:
                ep.end = max(ep.end, now)
