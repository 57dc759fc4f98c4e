"""Every key the cockpit answers to, including the profile numbers."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "Close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 95%; height: 85%; border: thick $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, keys: list[tuple[str, str]], profiles: list[str]) -> None:
        super().__init__()
        self.keys, self.profiles = keys, profiles

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False)
        table.add_column(style="bold cyan")
        table.add_column()
        for key, what in self.keys:
            table.add_row(key, what)
        for i, name in enumerate(self.profiles[:9], start=1):
            table.add_row(str(i), f"swap to profile {name}")
        table.add_row("ctrl+p", "command palette (every action is there)")
        table.add_row("tab", "next panel; enter on a straggler opens its gap")
        with VerticalScroll():
            yield Static("kimitui keys", classes="title")
            yield Static(table)
