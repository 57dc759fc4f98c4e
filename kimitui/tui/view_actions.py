"""What the operator looks at: help, a panel maximised, the log's filters, the dialogs over the panels, stragglers.

A mixin of the cockpit app (the bindings name these actions; Textual finds them on the app).  Nothing here calls
the controller to change anything: each action shows the model (or a view of it) another way.
"""

from __future__ import annotations

from dataclasses import replace

from textual.actions import parse as parse_action
from textual.binding import Binding

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.gap_evidence import gather
from kimitui.events import Straggler
from kimitui.tui.bindings import BINDINGS as COCKPIT_BINDINGS
from kimitui.tui.cockpit_base import CockpitBase
from kimitui.tui.model.keys import profile_keys
from kimitui.tui.painter import PANELS_BELOW_HEADER
from kimitui.tui.screens.compare import CompareScreen
from kimitui.tui.screens.expert_heatmap import ExpertHeatmap
from kimitui.tui.screens.fleet_gpus import FleetGpus
from kimitui.tui.screens.gpu_processes import GpuProcesses
from kimitui.tui.screens.help import HelpScreen
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.screens.text_prompt import TextPrompt
from kimitui.tui.widgets.log_panel import LogPanel
from kimitui.tui.widgets.straggler_list import StragglerList


class ViewActions(CockpitBase):
    """Help and the keys, maximise, the log's filters, compare, experts, GPU processes, the fleet's GPUs, stragglers."""

    def action_help(self) -> None:
        def now(action: str) -> str:
            reason = self._blocked(action)
            return f"  [dim](not now: {reason})[/]" if reason else ""

        bindings = self.cockpit_bindings()
        once = {b.id: b for b in reversed(bindings)}  # a key bound twice (FOOTER_WHEN) is listed once
        keys = [(self.get_key_display(b), b.description + now(b.action.split("(")[0])) for b in bindings
                if once.get(b.id) is b and not b.action.startswith("pick_profile")
                and self.check_action(*self._help_check(b.action)) is not False]
        found = self._safe(lambda: profile_keys(self.controller))
        self.push_screen(HelpScreen(keys, found[0] if found else {}, now("pick_profile")))

    @staticmethod
    def _help_check(action: str) -> tuple[str, tuple[object, ...]]:
        """What help asks ``check_action``: a jump's kind matters (live, only the straggler's); a footer copy's
        flag does not (help lists the key whether or not the footer has room for it)."""
        _, name, params = parse_action(action)
        return name, params[:2] if name == "jump" else ()

    def cockpit_bindings(self) -> list[Binding]:
        """The app's bindings with the config's ``[keys]`` applied (what the operator presses)."""
        keymap = {(n if n.startswith("kimitui.") else f"kimitui.{n}"): k for n, k in self.config_keys.items()}
        return [replace(b, key=keymap.get(b.id or "", b.key)) for b in COCKPIT_BINDINGS]

    def action_toggle_maximize(self, footer: bool = False) -> None:
        """Maximise the focused panel, or restore it (``footer``: pressed as the footer's copy of the key)."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            self.painter.mark(*PANELS_BELOW_HEADER)
            return
        target = screen.focused
        if target is None:
            self.notify("Tab to a panel first, then z to maximise it", severity="information")
            return
        screen.maximize(target)

    def action_minimize(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
            self.painter.mark(*PANELS_BELOW_HEADER)

    # The log's own status line shows filter, search and pause: no toasts for them (each toast is a
    # mount, an animation and a relayout).
    def action_log_severity(self) -> None:
        self.query_one(LogPanel).cycle_severity()

    def action_log_kind(self) -> None:
        self.query_one(LogPanel).cycle_kind()

    def action_log_search(self) -> None:
        panel = self.query_one(LogPanel)

        def chosen(text: str | None) -> None:
            if text is not None:
                panel.set_search(text)

        self.push_screen(TextPrompt("Search the log (empty clears)", "text", panel.search), chosen)

    def action_log_pause(self) -> None:
        self.query_one(LogPanel).toggle_pause()

    def action_compare(self) -> None:
        """The compare view: two runs overlaid with a verdict."""
        self.push_screen(CompareScreen(self.model))

    def action_experts(self, footer: bool = False) -> None:
        """The expert heatmap (layers x GPUs) and the balance: live and in a replay (``footer``: the footer's copy)."""
        self.push_screen(ExpertHeatmap(self.model))

    def action_gpu_processes(self) -> None:
        self.push_screen(GpuProcesses(self.model))

    def action_fleet_gpus(self) -> None:
        self.push_screen(FleetGpus(self.fleet))

    def on_straggler_list_chosen(self, message: StragglerList.Chosen) -> None:
        self._open_straggler(message.straggler)

    def action_newest_straggler(self, footer: bool = False) -> None:
        """The newest straggler's gap, from anywhere, live and in a replay (``footer``: the footer's copy)."""
        s = self.query_one(StragglerList).newest()
        if s is None:
            self.notify("no straggler yet: they are listed as each level ends", severity="information")
            return
        self._open_straggler(s)

    def _step_straggler(self, forward: bool) -> None:
        """Live ``j``/``J``: highlight the next (previous) straggler in the list and give it the focus; where the
        layout hides the list (after a swap, or another panel maximised), open that straggler's gap instead."""
        stragglers = self.query_one(StragglerList)
        s = stragglers.step(forward)
        if s is None:
            self.notify("no straggler yet: they are listed as each level ends" if not stragglers.row_count
                        else f"no {'later' if forward else 'earlier'} straggler")
        elif self.painter.visible(stragglers, chart=True):
            stragglers.focus()
        else:
            self._open_straggler(s)

    def _open_straggler(self, s: Straggler) -> None:
        sweep = self.model.sweep
        result = sweep.straggler_result(s.request_id) if sweep is not None else None
        def cause() -> Attribution | None:  # the newest answer (a late log line may still change it)
            now = self.model.sweep
            return now.attributions.get(s.request_id) if now is not None else None

        self.push_screen(StragglerDetail(gather(s, result, self.model.history), cause(), cause))
