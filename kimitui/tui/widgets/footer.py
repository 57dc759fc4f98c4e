"""The key footer, without Textual's leak of every key it ever showed (issue 30).

Textual's ``Footer`` rebuilds its keys whenever the bindings change, and binds each new ``FooterKey``'s
``compact`` to its own (``data_bind``), which adds a watcher on the footer.  A removed key's watcher is
only dropped when ``compact`` next changes, which in the cockpit is never; the cockpit refreshes its
bindings at every sweep's start and end (the footer dims what cannot run), so back-to-back sweeps
kept ~40 dead keys (~0.5 MB) a sweep, about 7 MB a minute.  After each rebuild this footer drops the
watchers of keys no longer mounted: it holds one watcher per key on screen.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.dom import DOMNode
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

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


def _cells(key: FooterKey) -> int:
    """The cells ``key`` takes in the footer's row, from its text and styles (laid out or not yet)."""
    return cell_len(key.render().plain) + key.styles.gutter.width + key.styles.margin.width


class CockpitFooter(Footer):
    """``Footer`` holding only the keys it shows (see the module doc).

    Issue 32: the keys that do not fit whole beside ``^p palette`` are not shown (they ran off the line cut, as
    ``? `` without its word at 80 columns)."""

    async def recompose(self) -> None:
        await super().recompose()
        drop_dead_watchers(self)
        self.call_after_refresh(self.fit_keys)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.fit_keys)

    ESSENTIAL = ("help", "quit")
    """Shown before any other key wherever they fit: at 80 columns the log's keys left no room for them."""

    def fit_keys(self) -> None:
        """Show the keys, in order, while each fits whole in the room the palette's key and the
        essential keys (help, quit) leave."""
        if not self.is_attached:
            return
        keys = list(self.query_children(FooterKey))
        palette = [k for k in keys if k.has_class("-command-palette")]
        essential = [k for k in keys if k not in palette and k.action in self.ESSENTIAL]
        used = sum(_cells(k) for k in palette)
        shown: set[FooterKey] = set()
        for group in (essential, [k for k in keys if k not in palette and k not in essential]):
            fits = True
            for key in group:
                need = _cells(key)
                fits = fits and used + need <= self.size.width
                if fits:
                    used += need
                    shown.add(key)
        for key in keys:
            display = key in palette or key in shown
            if key.display != display:
                key.display = display
