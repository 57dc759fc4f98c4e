"""What a cockpit widget promises the app: which parts of the model it shows, and how to redraw.

The fold (:meth:`CockpitModel.apply`) says which parts changed; the app builds
"part -> the widgets that show it" once, when it mounts, from each widget's
``shows``, and after every fold redraws just those.  A new panel declares its
parts here instead of being typed into the app's redraw code.
"""

from __future__ import annotations

from typing import ClassVar, TypedDict

from kimitui.tui.model.fold import Parts


class WidgetOptions(TypedDict, total=False):
    """The keyword arguments every Textual widget takes (what a model view passes on)."""

    name: str | None
    id: str | None
    classes: str | None
    disabled: bool


class ModelView:
    """Mixed into a widget drawn from the :class:`~kimitui.tui.model.cockpit_state.CockpitModel`."""

    shows: ClassVar[Parts] = frozenset()
    """The parts of the model this widget draws: it is redrawn when one of them changes."""

    drawn_when_maximized: ClassVar[bool] = False
    """True for the bars above the panels: redrawn even while another panel fills the screen."""

    def redraw(self) -> None:
        """Draw the model's current state (the app calls this only while the widget is visible)."""
        raise NotImplementedError

    def caption(self) -> tuple[str | None, str | None]:
        """The (title, subtitle) for the panel around this widget after a redraw; None keeps the current one."""
        return None, None
