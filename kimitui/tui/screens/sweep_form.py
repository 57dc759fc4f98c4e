"""The sweep form: levels, mode, max tokens, prompts; defaults come from the controller."""

from __future__ import annotations

import re

from pydantic import ValidationError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from kimitui.events import SweepSpec

MODES = ("sustained", "burst", "rate")


def parse_levels(text: str) -> list[int]:
    """'1, 8 32' -> [1, 8, 32]; raises ValueError naming the bad item."""
    items = [x for x in re.split(r"[,\s]+", text.strip()) if x]
    if not items:
        raise ValueError("levels: give at least one concurrency, e.g. 1,8,32")
    out = []
    for item in items:
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"levels: {item!r} is not a positive whole number")
        out.append(int(item))
    return out


def build_spec(base: SweepSpec, levels: str, mode: str, max_tokens: str, prompts: str) -> SweepSpec:
    """The base spec with the form's values; ValueError with the field named when one is wrong."""
    lv = parse_levels(levels)
    if not max_tokens.strip().isdigit() or int(max_tokens) < 1:
        raise ValueError(f"max tokens: {max_tokens!r} is not a positive whole number")
    prompts = prompts.strip() or "seed"
    if prompts != "seed" and not re.fullmatch(r"random:\d+", prompts):
        raise ValueError(f"prompts: {prompts!r} must be 'seed' or 'random:N'")
    try:
        return SweepSpec.model_validate({**base.model_dump(), "levels": lv, "mode": mode,
                                         "max_tokens": int(max_tokens), "prompts": prompts})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None


class SweepForm(ModalScreen[SweepSpec | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    DEFAULT_CSS = """
    SweepForm { align: center middle; }
    SweepForm > Vertical { width: 76; max-width: 95%; height: auto; border: thick $accent;
        background: $surface; padding: 1 2; }
    SweepForm Label { margin-top: 1; color: $text-muted; }
    SweepForm Input, SweepForm Select { margin: 0 0; }
    SweepForm #sweep-error { color: $error; text-style: bold; height: auto; }
    SweepForm Horizontal { height: auto; margin-top: 1; }
    SweepForm Button { margin-right: 1; }
    """

    def __init__(self, defaults: SweepSpec) -> None:
        super().__init__()
        self.defaults = defaults

    def compose(self) -> ComposeResult:
        d = self.defaults
        with Vertical():
            yield Static(f"Start a sweep against {d.url} ({d.model})", classes="title")
            yield Label("levels (concurrency)")
            yield Input(", ".join(str(c) for c in d.levels), id="sweep-levels", compact=True)
            yield Label("mode")
            yield Select([(m, m) for m in MODES], value=d.mode, allow_blank=False, id="sweep-mode", compact=True)
            yield Label("max tokens")
            yield Input(str(d.max_tokens), id="sweep-max-tokens", type="integer", compact=True)
            yield Label("prompts (seed or random:N)")
            yield Input(d.prompts, id="sweep-prompts", compact=True)
            yield Static("", id="sweep-error")
            with Horizontal():
                yield Button("Start", id="sweep-start", variant="primary")
                yield Button("Cancel", id="sweep-cancel")

    def on_mount(self) -> None:
        self.query_one("#sweep-levels", Input).focus()

    def _submit(self) -> None:
        try:
            spec = build_spec(
                self.defaults,
                self.query_one("#sweep-levels", Input).value,
                str(self.query_one("#sweep-mode", Select).value),
                self.query_one("#sweep-max-tokens", Input).value,
                self.query_one("#sweep-prompts", Input).value,
            )
        except ValueError as exc:
            self.query_one("#sweep-error", Static).update(str(exc))
            return
        self.dismiss(spec)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "sweep-start":
            self._submit()
        else:
            self.dismiss(None)
