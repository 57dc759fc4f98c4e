"""A bordered, titled, focusable box that can be maximised (``z``).

The focused panel must be obvious at a glance, not only by a border's hue: it gets a heavy border
in the accent colour and its title in reverse video, the way lazygit and k9s mark the active view.
A panel may carry keys of its own (``keys``): they show in the footer while it has the focus, so
the footer always lists what the current view can do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar, Unpack

from textual.binding import BindingType
from textual.containers import Vertical
from textual.widget import Widget

from kimitui.tui.bindings import key
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
        &:focus-within {
            border: heavy $accent;
            border-title-color: $background;
            border-title-background: $accent;
            border-title-style: bold;
        }
    }
    """

    def __init__(self, *children: Widget, title: str = "", **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(*children, **kwargs)
        self.border_title = title


class LogBox(Panel):
    """The log's panel: its filter, search and pause keys show in the footer while it has the focus.

    The same actions stay bound app-wide (hidden from the footer), so ``/`` searches the log from
    anywhere; here they are listed because this is the view they act on.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        # the app's ids (a ``[keys]`` remap applies here too), acting on the app's actions
        replace(key(keys, action, description), action=f"app.{action}")
        for keys, action, description in (("slash", "log_search", "search"), ("f", "log_severity", "severity"),
                                          ("t", "log_kind", "kind"), ("p", "log_pause", "pause"))
    ]


class GpuBox(Panel):
    """The GPUs' panel: ``g`` (the per-process view) shows in the footer while it has the focus."""

    BINDINGS: ClassVar[list[BindingType]] = [
        replace(key("g", "gpu_processes", "processes"), action="app.gpu_processes"),
    ]
