"""A bordered, titled, focusable box that can be maximised (``z``)."""

from __future__ import annotations

from typing import Unpack

from textual.containers import Vertical
from textual.widget import Widget

from kimitui.tui.widgets.model_view import WidgetOptions


class Panel(Vertical, can_focus=True):
    """One cockpit area; Tab moves between panels and ``z`` fills the screen with one."""

    ALLOW_MAXIMIZE = True

    DEFAULT_CSS = """
    Panel {
        border: round $panel-lighten-2;
        border-title-color: $text-accent;
        padding: 0 1;
        height: 1fr;
        &:focus-within { border: round $accent; }
    }
    """

    def __init__(self, *children: Widget, title: str = "", **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(*children, **kwargs)
        self.border_title = title
