"""Dialogs that close once and touch nothing once closed, and a command palette that does the same.

Textual's ``Screen.dismiss`` pops whatever screen is on top.  Two closing keys in quick succession (Enter on a
button and Escape, two Enters in the palette) reach a dialog that is already closing: the second pop took the
screen below it, or the main screen (``ScreenStackError``: the session ended).  A dialog here closes only while
it is the one on top; a later close is a no-op.
"""

from __future__ import annotations

from typing import Any, TypeVar

from textual import on
from textual.app import App
from textual.await_complete import AwaitComplete
from textual.command import CommandPalette
from textual.events import Mount
from textual.screen import ModalScreen, Screen
from textual.widgets import Input

R = TypeVar("R")


def closing_twice(screen: Screen[Any]) -> bool:
    """``screen`` already closed (or never opened): it is not on top, so dismissing it would pop another."""
    return not screen.is_attached or screen not in screen.app.screen_stack or screen.app.screen is not screen


def shutting_down(app: App[Any]) -> bool:
    """The app exits: its screens' widgets are being removed (or about to be)."""
    return not app.is_running or app.return_code is not None


class Dialog(ModalScreen[R]):
    """A modal screen whose ``dismiss`` acts once: a second closing key is ignored, not a second pop.

    Once closed its widgets are removed one by one while its own mount, timers and handlers may still run (a
    closing key right behind the opening one, a refresh tick): they check :attr:`closed` first.
    """

    @property
    def closed(self) -> bool:
        """Off the screen stack: closed (its widgets going or gone), so nothing may query them."""
        return self not in self.app.screen_stack

    def dismiss(self, result: R | None = None) -> AwaitComplete:
        if closing_twice(self):
            return AwaitComplete.nothing()
        return super().dismiss(result)


class Palette(CommandPalette):
    """Textual's command palette, closing once (two Enters ran its close twice and popped the main screen),
    deaf once closed: a key already on its way to the input (Escape, ctrl+p and a letter at once) started a
    search whose results found the palette's list removed (``NoMatches`` in a worker ended the session)."""

    def dismiss(self, result: None = None) -> AwaitComplete:
        if closing_twice(self):
            return AwaitComplete.nothing()
        self.workers.cancel_node(self)  # a search under way must not draw into the widgets being removed
        return super().dismiss(result)

    def _on_mount(self, event: Mount) -> None:
        """Closed before it mounted (ctrl+p and Escape at once), or mounted as the app exits: no search."""
        if closing_twice(self) or shutting_down(self.app):
            event.prevent_default()

    def _watch__list_visible(self) -> None:
        """Textual's own watcher queries the list; a search finishing as the palette closes or the app shuts
        down found it removed (``NoMatches`` in a worker: a traceback at exit)."""
        if closing_twice(self) or shutting_down(self.app):
            return
        super()._watch__list_visible()

    @on(Input.Changed)
    @on(Input.Submitted)
    def _deaf_once_closed(self, event: Input.Changed | Input.Submitted) -> None:
        """Runs before the palette's own handlers: once closed, typing searches nothing and Enter runs nothing."""
        if closing_twice(self) or shutting_down(self.app):
            event.stop()
            event.prevent_default()


def palette_closing(last: Screen[Any] | None) -> bool:
    """The ``last`` palette was closed but is not removed yet: it still holds its id, and a palette opened now
    under that id would clash with it (``DuplicateIds``)."""
    return last is not None and last.is_attached and last not in last.app.screen_stack


PALETTE_ID = "--command-palette"
"""The id Textual gives its palette (``App.action_command_palette``)."""
