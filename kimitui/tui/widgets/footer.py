"""The key footer, without Textual's leak of every key it ever showed (issue 30).

Textual's ``Footer`` rebuilds its keys whenever the bindings change, and binds each new ``FooterKey``'s
``compact`` to its own (``data_bind``), which adds a watcher on the footer.  A removed key's watcher is
only dropped when ``compact`` next changes, which in the cockpit is never; the cockpit refreshes its
bindings at every sweep's start and end (the footer dims what cannot run), so back-to-back sweeps
kept ~40 dead keys (~0.5 MB) a sweep, about 7 MB a minute.  After each rebuild this footer drops the
watchers of keys no longer mounted: it holds one watcher per key on screen.
"""

from __future__ import annotations

from textual.dom import DOMNode
from textual.widgets import Footer

_WATCHERS = "__watchers"
"""Where Textual keeps the watchers of an object's reactives (``textual.reactive._watch``)."""


def drop_dead_watchers(obj: DOMNode) -> int:
    """Forget the watchers of ``obj``'s reactives whose node is no longer mounted; returns how many."""
    watchers: dict[str, list[tuple[DOMNode, object]]] = getattr(obj, _WATCHERS, {})
    dropped = 0
    for entries in watchers.values():
        alive = [(node, callback) for node, callback in entries if node.is_attached and not node._closing]
        dropped += len(entries) - len(alive)
        entries[:] = alive
    return dropped


class CockpitFooter(Footer):
    """``Footer`` holding only the keys it shows (see the module doc)."""

    async def recompose(self) -> None:
        await super().recompose()
        drop_dead_watchers(self)
