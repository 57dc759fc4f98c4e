"""Every key the cockpit answers to, as the operator types it, including the profile numbers."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static
from kimitui.tui.screens.dialog import Dialog


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "Close")]
    """Keys are shown as typed (``/``, ``?``): the caller passes Textual's key display, not key names."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 95%; height: 85%; border: thick $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, keys: list[tuple[str, str]], profiles: dict[str, str], profile_note: str = "") -> None:
        """``keys``: (key as typed, what it does, markup); ``profiles``: profile key -> name; ``profile_note``: why not now."""
        super().__init__()
        self.keys, self.profiles, self.profile_note = keys, profiles, profile_note

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False)
        table.add_column(style="bold cyan")
        table.add_column()
        for key, what in self.keys:
            table.add_row(Text(key), what)  # a key such as "[" is not markup
        for k, name in self.profiles.items():
            table.add_row(k, f"swap to profile {name}{self.profile_note}")
        table.add_row("ctrl+p", "command palette (every action is there)")
        table.add_row("tab", "next panel; enter on a straggler opens its gap (live, j / J step through the "
                             "stragglers; x opens the newest)")
        table.add_row("c, then b", "in the compare view, where the verdict is: b swaps back to the baseline "
                                   "(with its confirm); [ ] picks another A; esc closes")
        with VerticalScroll():
            yield Static("kimitui keys", classes="title")
            yield Static(table)
