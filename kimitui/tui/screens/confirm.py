"""A yes/no question (quit while a sweep runs, stop a running sweep)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static
from kimitui.tui.screens.dialog import Dialog


class Confirm(Dialog[bool]):
    BINDINGS = [Binding("escape,n", "dismiss(False)", "No"), Binding("y", "dismiss(True)", "Yes")]

    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 70; height: auto; border: thick $error; background: $surface; padding: 1 2; }
    Confirm Horizontal { height: auto; margin-top: 1; }
    Confirm Button { margin-right: 1; }
    """

    def __init__(self, question: str, yes: str = "Yes", no: str = "No", *, default: bool = False) -> None:
        """``default``: which button has the focus, so Enter answers it (Escape is always No)."""
        super().__init__()
        self.question, self.yes, self.no, self.default = question, yes, no, default

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="confirm-question")
            with Horizontal():
                yield Button(self.yes, id="confirm-yes", variant="error")
                # the focused answer is the coloured one: a blue "No" beside a focused "Yes" reads as chosen
                yield Button(self.no, id="confirm-no", variant="default" if self.default else "primary")

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self.query_one("#confirm-yes" if self.default else "#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")
