"""The profile keys, named, above the footer: ``1 ep4  2 ep8 … 7 ep8-tuned●`` (the running one marked).

Textual's footer has one description per binding and no room for nine names, so the number keys get
their own line: the operator sees which key starts which profile without opening the help.  Dimmed
while a swap or sweep is running (the keys are refused then; pressing one says why).
"""

from __future__ import annotations

from typing import Unpack

from rich.text import Text
from textual.widgets import Static

from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.widgets.model_view import ModelView, WidgetOptions


def profile_line(by_key: dict[str, str], running: str | None, state: str, blocked: bool,
                 version: str | None = None) -> Text:
    """``profiles  1 ep4  2 ep8 …`` with the running profile bold and marked by its state's colour, and the
    SGLang version the host runs it on (``/server_info``): a flag's meaning depends on it."""
    out = Text("profiles ", "dim")
    if not by_key:
        out.append("none found (kimitui profiles list says where they are looked for)", "dim")
        return out
    mark = {"serving": "green", "starting": "yellow", "stopping": "yellow", "failed": "red"}.get(state, "dim")
    for key, name in by_key.items():
        out.append(f" {key}", "dim bold" if blocked else "bold #ffa62b")
        out.append(" ")
        if name == running:
            out.append(name, f"bold reverse {mark}" if not blocked else f"reverse {mark}")
        else:
            out.append(name, "dim" if blocked else "")
        out.append(" ")
    if version and running:
        out.append(f"│ on SGLang {version}", "dim")  # the host's, not the last key's
    return out


class ProfileBar(Static, ModelView):
    """Redrawn with the header (profile state changes); the key map comes from the app once it is known."""

    shows = frozenset({"header"})
    drawn_when_maximized = True

    def __init__(self, model: CockpitModel, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.by_key: dict[str, str] = {}
        self.blocked = False

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        self.update(profile_line(self.by_key, self.model.profile, self.model.profile_state, self.blocked,
                                 self.model.sglang_version))
