"""The sweep form: levels, mode, max tokens, prompts; defaults come from the controller.

Two presets fill the fields (the seeds' full sweep, a quick three-level one), and the form says
how long the spec should take (:mod:`kimitui.analysis.sweep_eta`), from the running profile's
last sweep when there is one, else from the seeds' figures.
"""

from __future__ import annotations

import re

from pydantic import ValidationError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, Static

from kimitui.sglang.server_caps import sweep_caps
from kimitui.analysis.sweep_eta import RateModel, duration, spec_requests, spec_seconds
from kimitui.analysis.sweep_presets import PRESETS, preset_label
from kimitui.events import SWEEP_MODES, SweepSpec
from kimitui.loadgen.drive_budget import ChunkCost, check_drive, cost_from_levels
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.screens.dialog import Dialog


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


def form_rates(model: CockpitModel | None) -> RateModel:
    """What the form's estimate is based on: the running profile's last curve, another profile's, the seeds'."""
    if model is not None:
        order = [model.profile] if model.profile in model.curves else []
        order += [p for p in reversed(list(model.curves)) if p != model.profile]
        for profile in order:
            pts = [(c, p.agg_tok_s) for c, p in model.curves[profile].items() if p.status == "ok"]
            rates = RateModel.measured(pts, f"{profile}'s last sweep")
            if rates is not None:
                return rates
    scale = model.sim_time_scale if model is not None else None
    return RateModel.seeds(scale or 1.0)


def estimate_text(spec: SweepSpec, rates: RateModel) -> str:
    """``estimated ≈ 9m42s · 8 levels · 1,557 requests (from the seeds' figures)``."""
    n = spec_requests(spec)
    count = f" · {n:,} requests" if n is not None else ""
    levels = len(spec.levels) * spec.repeats
    return (f"estimated ≈ {duration(spec_seconds(spec, rates))} · {levels} level{'s' if levels != 1 else ''}"
            f"{count} (from {rates.basis})")


def form_cost(model: CockpitModel | None, given: ChunkCost | None = None) -> ChunkCost | None:
    """The client's CPU per chunk for the warning: given by the caller (a calibration run off the UI, e.g.
    :func:`kimitui.loadgen.drive_calibrate.calibrate`), else what the last sweep's levels measured (no
    measuring in a screen); None: nothing known yet (no warning, no guess)."""
    if given is not None:
        return given
    return cost_from_levels(model.sweep.levels) if model is not None and model.sweep is not None else None


def drive_warning(spec: SweepSpec, cost: ChunkCost | None, time_scale: float | None) -> str:
    """The one line ``kimitui sweep`` says when the plan exceeds what this client drives; "" otherwise."""
    if cost is None:
        return ""
    rate = spec.rate_rps if spec.mode == "rate" else None
    line = check_drive(spec.levels, cost, time_scale=time_scale, rate_rps=rate,
                       tokens_per_request=float(spec.max_tokens)).line()
    return f"⚠ {line}" if line else ""


def eos_text(spec: SweepSpec) -> str:
    """What the requests ask besides max tokens (issue 32: ``ignore_eos`` was sent and shown nowhere)."""
    return ("ignore_eos: each answer runs to max tokens" if spec.ignore_eos
            else "no ignore_eos: answers end where the model stops")


class SweepForm(Dialog[SweepSpec | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    DEFAULT_CSS = """
    SweepForm { align: center middle; }
    SweepForm > Vertical { width: 76; max-width: 95%; height: auto; max-height: 100%; border: thick $accent;
        background: $surface; padding: 0 2; }
    SweepForm .row { height: auto; margin-top: 1; }
    SweepForm .row Label { width: 12; color: $text-muted; }
    SweepForm .row Input, SweepForm .row Select { width: 1fr; }
    SweepForm .row #sweep-max-tokens { width: 10; }
    SweepForm #sweep-eos { width: 1fr; color: $text-muted; padding-left: 2; }
    SweepForm.-short .row, SweepForm.-short #sweep-estimate, SweepForm.-short #sweep-buttons { margin-top: 0; }
    SweepForm #sweep-presets Button { margin-right: 1; background: $primary-muted; }
    SweepForm #sweep-presets Button:focus { background: $accent; color: $background; text-style: bold; }
    SweepForm #sweep-estimate { margin-top: 1; color: $text-muted; height: auto; }
    SweepForm #sweep-error { color: $error; text-style: bold; height: auto; }
    SweepForm #sweep-caps { color: $text-muted; height: auto; }
    SweepForm #sweep-drive { color: $warning; height: auto; }
    SweepForm #sweep-buttons { height: auto; margin-top: 1; }
    SweepForm #sweep-buttons Button { margin-right: 1; }
    """

    def __init__(self, defaults: SweepSpec, model: CockpitModel | None = None, drive: ChunkCost | None = None) -> None:
        """``model``: the cockpit's state, for the estimate (the last measured curve, the time scale);
        ``drive``: the client's measured CPU per chunk (:func:`kimitui.loadgen.drive_calibrate.calibrate`), for
        the warning when the plan exceeds it (else the last sweep's levels say it)."""
        super().__init__()
        self.defaults = defaults
        self.rates = form_rates(model)
        self.cost = form_cost(model, drive)
        self.time_scale = model.sim_time_scale if model is not None else None
        self.caps = sweep_caps(model.server_args if model is not None else None)
        """What the server's /server_info says the sweep may ask of it (labels, speculative figures)."""

    def compose(self) -> ComposeResult:
        d = self.defaults
        with Vertical():
            yield Static(f"Start a sweep against {d.url} ({d.model})", classes="title")
            with Horizontal(classes="row", id="sweep-presets"):
                for name in PRESETS:
                    yield Button(preset_label(name), id=f"preset-{name}", compact=True)
            with Horizontal(classes="row"):
                yield Label("levels (C)")
                yield Input(", ".join(str(c) for c in d.levels), id="sweep-levels", compact=True)
            with Horizontal(classes="row"):
                yield Label("mode")
                yield Select([(m, m) for m in SWEEP_MODES], value=d.mode, allow_blank=False, id="sweep-mode",
                             compact=True)
            with Horizontal(classes="row"):
                yield Label("max tokens")
                yield Input(str(d.max_tokens), id="sweep-max-tokens", type="integer", compact=True)
                yield Static(eos_text(d), id="sweep-eos")
            with Horizontal(classes="row"):
                yield Label("prompts")
                yield Input(d.prompts, id="sweep-prompts", compact=True, placeholder="seed or random:N")
            yield Static(estimate_text(d, self.rates), id="sweep-estimate")
            yield Static("\n".join(self.caps.describe()), id="sweep-caps")
            yield Static("", id="sweep-error")
            with Horizontal(id="sweep-buttons"):
                yield Button("Start", id="sweep-start", variant="primary", compact=True)
                yield Button("Cancel", id="sweep-cancel", compact=True)
            # below the buttons: a long warning never pushes Start or the field error off a small screen
            warning = drive_warning(d, self.cost, self.time_scale)
            drive = Static(warning, id="sweep-drive")
            drive.display = bool(warning)  # no empty line on a screen that has none to spare
            yield drive

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self.query_one("#sweep-levels", Input).focus()

    def _values(self) -> tuple[str, str, str, str]:
        return (self.query_one("#sweep-levels", Input).value, str(self.query_one("#sweep-mode", Select).value),
                self.query_one("#sweep-max-tokens", Input).value, self.query_one("#sweep-prompts", Input).value)

    def apply_preset(self, name: str) -> None:
        """Fill the fields with a preset (the spec's other settings stay the form's defaults)."""
        p = PRESETS[name]
        self.query_one("#sweep-levels", Input).value = ", ".join(str(c) for c in p["levels"])
        self.query_one("#sweep-mode", Select).value = p["mode"]
        self.query_one("#sweep-max-tokens", Input).value = str(p["max_tokens"])
        self.query_one("#sweep-prompts", Input).value = p["prompts"]
        self._update_estimate()

    def _update_estimate(self) -> None:
        try:
            spec = build_spec(self.defaults, *self._values())
        except ValueError:
            text, drive = "estimated: - (fix the fields first)", ""
        else:
            text, drive = estimate_text(spec, self.rates), drive_warning(spec, self.cost, self.time_scale)
        self.query_one("#sweep-estimate", Static).update(text)
        shown = self.query_one("#sweep-drive", Static)
        shown.update(drive)
        shown.display = bool(drive)

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self._update_estimate()

    def on_select_changed(self, event: Select.Changed) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self._update_estimate()

    def _submit(self) -> None:
        try:
            spec = build_spec(self.defaults, *self._values())
        except ValueError as exc:
            self.query_one("#sweep-error", Static).update(str(exc))
            return
        self.dismiss(spec)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.closed:  # closed already: its widgets are being removed
            return
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        button = event.button.id or ""
        if button.startswith("preset-"):
            self.apply_preset(button.removeprefix("preset-"))
        elif button == "sweep-start":
            self._submit()
        else:
            self.dismiss(None)
