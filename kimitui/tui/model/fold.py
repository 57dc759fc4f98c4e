"""The fold's vocabulary: the parts of the screen an event can change, the toasts it raises, its tables.

Every panel state (``gpu_state``, ``server_state``, ``log_state``, ``sweep_state``, ``header_state``)
folds the events it cares about through a table built here and says which parts it changed, so the
app redraws only those; :class:`~kimitui.tui.model.cockpit_state.CockpitModel` hands each event to all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeAlias, TypeVar, cast, get_args

from kimitui.events import Event

HISTORY = 120
"""Points kept per live series (util per GPU, server figures)."""

Part = Literal["header", "gpus", "server", "log", "curve", "spread", "levels", "stragglers", "timeline", "experts"]
"""A part of the screen the fold can change; each widget declares the parts it shows (``ModelView.shows``)."""
Parts: TypeAlias = frozenset[Part]
PANELS: tuple[Part, ...] = get_args(Part)
CHARTS: Parts = frozenset({"curve", "spread"})
"""Parts drawn as plots: the costly ones, redrawn at most every ``chart_period`` seconds."""

NOTHING: Parts = frozenset()
EVERYTHING: Parts = frozenset(PANELS)
GPUS: Parts = frozenset({"gpus"})
LOG: Parts = frozenset({"log"})
HEADER: Parts = frozenset({"header"})
SERVER: Parts = frozenset({"server"})
HEADER_LOG: Parts = frozenset({"header", "log"})
TIMELINE: Parts = frozenset({"timeline"})
CAUSE_PARTS: Parts = frozenset({"stragglers", "levels"})

NoticeSeverity = Literal["information", "warning", "error"]
NOTICE_OF: dict[str, NoticeSeverity] = {"info": "information", "warning": "warning", "error": "error"}
"""A log severity as a toast's."""


@dataclass
class Notice:
    """Something the operator must see now (a toast): a failure, a lost link."""

    severity: NoticeSeverity
    message: str


S = TypeVar("S")
E = TypeVar("E", bound=Event)


class FoldTable(Generic[S]):
    """Event type -> the handler of a panel state ``S`` that folds it (a type not listed changes nothing).

    Built with :meth:`on`, so mypy checks that each handler takes the event type it is listed under.
    """

    def __init__(self) -> None:
        self._handlers: dict[type[Event], Callable[[S, Event], Parts]] = {}

    def on(self, kind: type[E], handler: Callable[[S, E], Parts]) -> FoldTable[S]:
        # safe: fold looks a handler up by the event's own type
        self._handlers[kind] = cast(Callable[[S, Event], Parts], handler)
        return self

    def fold(self, state: S, ev: Event) -> Parts:
        handler = self._handlers.get(type(ev))
        return handler(state, ev) if handler is not None else NOTHING
