"""The hub: sources publish events, subscribers receive them.

Two ways to listen, because two kinds of consumer exist:

* **Sinks** (``add_sink``) are plain callables run inline by ``publish``.  They
  must be cheap and never block (the recorder appends to a buffer and flushes
  on its own timer).  They never drop anything: the recording is complete.
* **Subscriptions** (``subscribe``) are bounded queues read asynchronously
  (the UI, analyzers).  A slow subscriber never stalls a producer or another
  subscriber: when its queue is full the *oldest* queued event is dropped (the
  newest state is what a live view needs), the drop is counted on the
  subscription, and the reader receives one :class:`~kimitui.events.Dropped`
  event with the count before the next real event.

``publish`` is synchronous and must be called on the session's event loop;
other threads use ``publish_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from kimitui.events import Dropped, Event

log = logging.getLogger(__name__)

Sink = Callable[[Event], Any]


class Subscription:
    """A bounded, drop-oldest queue of events for one consumer."""

    def __init__(self, session: "Session", name: str, maxsize: int, kinds: frozenset[str] | None):
        self.name = name
        self.maxsize = maxsize
        self.kinds = kinds
        self.dropped_total = 0
        self._pending_drops = 0
        self._buf: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._session = session
        self._closed = False

    def wants(self, event: Event) -> bool:
        return self.kinds is None or event.kind in self.kinds

    def _offer(self, event: Event) -> None:
        if self._closed:
            return
        if len(self._buf) >= self.maxsize:
            self._buf.popleft()
            self.dropped_total += 1
            self._pending_drops += 1
        self._buf.append(event)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def get_nowait(self) -> Event | None:
        """The next event, or None if nothing is queued."""
        if self._pending_drops:
            count, self._pending_drops = self._pending_drops, 0
            return Dropped(subscriber=self.name, count=count, host=self._session.host)
        if self._buf:
            return self._buf.popleft()
        return None

    def drain(self, limit: int | None = None) -> list[Event]:
        """Everything queued now (up to ``limit``), without waiting; for batched UI updates."""
        out: list[Event] = []
        while limit is None or len(out) < limit:
            ev = self.get_nowait()
            if ev is None:
                break
            out.append(ev)
        return out

    async def get(self) -> Event:
        """Wait for the next event; raises ``asyncio.CancelledError`` if cancelled."""
        while True:
            ev = self.get_nowait()
            if ev is not None:
                return ev
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        return await self.get()

    def close(self) -> None:
        """Stop receiving; a pending ``get`` ends the iteration."""
        self._closed = True
        self._session._subs.discard(self)
        self._wake()

    def __len__(self) -> int:
        return len(self._buf)


class Session:
    """Fans events out to sinks and subscriptions; knows nothing about their sources."""

    def __init__(self, host: str = "sim") -> None:
        self.host = host
        self._sinks: list[Sink] = []
        self._subs: set[Subscription] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.published = 0

    # -- listening ---------------------------------------------------------------
    def add_sink(self, sink: Sink) -> Callable[[], None]:
        """Call ``sink(event)`` for every event, inline; returns a remover."""
        self._sinks.append(sink)

        def remove() -> None:
            if sink in self._sinks:
                self._sinks.remove(sink)

        return remove

    def subscribe(
        self, name: str, maxsize: int = 10_000, kinds: Iterable[str] | None = None
    ) -> Subscription:
        """A new bounded subscription, optionally only to some event kinds."""
        sub = Subscription(self, name, maxsize, frozenset(kinds) if kinds is not None else None)
        self._subs.add(sub)
        return sub

    # -- publishing --------------------------------------------------------------
    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every sink and subscription; never blocks, never raises."""
        self.published += 1
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception:  # a broken consumer must not break the producer
                log.exception("event sink %r failed on %s", sink, event.kind)
        for sub in list(self._subs):
            if sub.wants(event):
                sub._offer(event)

    def publish_many(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.publish(ev)

    def bind_loop(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Remember the loop ``publish_threadsafe`` should hand events to."""
        self._loop = loop or asyncio.get_running_loop()

    def publish_threadsafe(self, event: Event) -> None:
        """Publish from another thread (e.g. a blocking reader)."""
        if self._loop is None:
            raise RuntimeError("Session.bind_loop() was not called")
        self._loop.call_soon_threadsafe(self.publish, event)
