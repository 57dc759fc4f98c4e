"""The cockpit: one screen over a Session, every action through a Controller.

Events are never rendered one by one: a single timer (3 Hz) drains the
subscription, folds the batch into the :class:`CockpitModel`, writes the log
in one batch, redraws the panels that changed and are visible, and redraws the
charts at most every ``chart_period`` seconds.  Controller calls are wrapped so
a failure becomes a notification, never a traceback.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import ClassVar

from rich.console import RenderableType
from textual import events
from textual.actions import ActionParseResult
from textual.actions import parse as parse_action
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.screen import Screen
from textual.theme import ThemeProvider

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.gap_evidence import gather
from kimitui.capacity.slo import parse_slo
from kimitui.control import Autopilot, Controller, Fleet, ProfileDirectories, ReplayControls
from kimitui.events import Straggler, SweepSpec
from kimitui.tui.bindings import BINDINGS as COCKPIT_BINDINGS
from kimitui.tui.bindings import (FLEET_ONLY, FOOTER_ROOM, FOOTER_WHEN, LIVE_ONLY, REPLAY_ONLY, STRAGGLER_KEYS_ROOM,
                                  footer_shows)
from kimitui.tui.model.keys import profile_keys
from kimitui.tui.model.fold import Notice, Part
from kimitui.tui.model.fleet_state import FleetModels
from kimitui.tui.cockpit_base import FAILED
from kimitui.tui.painter import PANELS_BELOW_HEADER, Painter
from kimitui.tui.palette import cockpit_commands, without_textual_duplicates
from kimitui.tui.render import clock
from kimitui.tui.screens.compare import CompareScreen
from kimitui.tui.screens.confirm import Confirm
from kimitui.tui.screens.dialog import PALETTE_ID, Palette, palette_closing
from kimitui.tui.screens.expert_heatmap import ExpertHeatmap
from kimitui.tui.screens.fleet_gpus import FleetGpus
from kimitui.tui.screens.gpu_processes import GpuProcesses
from kimitui.tui.screens.help import HelpScreen
from kimitui.tui.screens.straggler_detail import StragglerDetail
from kimitui.tui.screens.swap_confirm import SwapConfirm
from kimitui.tui.screens.sweep_form import SweepForm
from kimitui.tui.screens.text_prompt import TextPrompt
from kimitui.tui.screens.tune_screen import TuneScreen
from kimitui.tui.widgets.fleet_strip import FleetStrip
from kimitui.tui.widgets.footer import CockpitFooter
from kimitui.tui.widgets.gpu_panel import GpuPanel
from kimitui.tui.widgets.header_bar import HeaderBar, RecordingStatus
from kimitui.tui.widgets.level_table import PANEL_TITLE, LevelTable
from kimitui.tui.widgets.log_panel import LogPanel
from kimitui.tui.model.layout_mode import LayoutMode
from kimitui.tui.widgets.panel import GpuBox, LogBox, Panel
from kimitui.tui.widgets.profile_bar import ProfileBar
from kimitui.tui.widgets.sweep_strip import SweepStrip
from kimitui.tui.widgets.timeline_strip import TimelineStrip
from kimitui.tui.replay_actions import ReplayActions
from kimitui.tui.widgets.replay_bar import ReplayBar, ReplayToasts
from kimitui.tui.widgets.server_panel import ServerPanel
from kimitui.tui.widgets.spread_chart import SpreadChart
from kimitui.tui.widgets.straggler_list import StragglerList
from kimitui.tui.widgets.sweep_curve import SweepCurve, sweep_status


class KimituiApp(ReplayActions):
    """The cockpit.  ``controller`` is live (``LiveController``) or a replay (``ReplayController``)."""

    CSS_PATH = "app.tcss"
    TITLE = "kimitui"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-medium"), (160, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-medium-height"), (50, "-tall")]
    """Size classes on the screen (app.tcss): 80x24 is -narrow -short, 120x40 -medium, 200x60 -wide -tall."""
    AUTO_FOCUS = "#panel-log"
    """The log is the panel most keys act on (search, filter, pause); Tab moves on from there."""

    BINDINGS: ClassVar[list[BindingType]] = [*COCKPIT_BINDINGS]

    def __init__(
        self,
        controller: Controller,
        *,
        config_keys: dict[str, str] | None = None,
        tick: float | None = 0.33,
        chart_period: float = 0.8,
    ) -> None:
        """``tick`` None disables the timer (tests call :meth:`pump`); charts redraw at most every ``chart_period`` s."""
        super().__init__()
        self.controller = controller
        self.config_keys = dict(config_keys or {})
        hosts = (list(controller.hosts) if isinstance(controller, Fleet) else []) or [controller.host_name]
        self.fleet = FleetModels(hosts, fleet=len(hosts) > 1)
        if isinstance(controller, ProfileDirectories):  # the live one: its config's [capacity] slo
            slo = parse_slo(controller.config.capacity.slo)
            for model in self.fleet.models.values():
                model.slo = slo
        self.replay = controller if isinstance(controller, ReplayControls) else None
        self._replay_toasts = ReplayToasts()
        self._tick = tick
        self.painter = Painter(self, self.fleet, chart_period=chart_period, poll=self._poll, toast=self._toast)
        """The pump and redraw engine: what changed, drawn where it can be seen."""
        self._shutdown_done = False
        self.started = False
        self._profile_keys: tuple[dict[str, str], list[str]] | None = None
        self._palette: Palette | None = None
        """The last command palette opened: ctrl+p waits while it is closing (:func:`palette_closing`)."""

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        m = self.model
        yield HeaderBar(m, id="header")
        if self.fleet.fleet:
            yield FleetStrip(self.fleet, id="fleet-strip")
        if self.replay is not None:
            yield ReplayBar(m, id="replay-bar")
        with Horizontal(id="row-top"):
            yield GpuBox(GpuPanel(m, id="gpus"), title="GPUs", id="panel-gpus")
            yield Panel(ServerPanel(m, id="server"), title="Server", id="panel-server")
        yield Panel(SweepStrip(m, id="strip"), title="Sweep", id="panel-strip")
        with Horizontal(id="row-mid"):
            yield Panel(SweepCurve(m, id="curve"), TimelineStrip(m, id="timeline"), title="Throughput vs concurrency",
                        id="panel-curve")
            yield Panel(SpreadChart(m, id="spread"), title="Per-request decode tok/s (current level)", id="panel-spread")
        with Horizontal(id="row-bot"):
            yield Panel(LevelTable(m, id="levels"), StragglerList(m, id="stragglers"), title=PANEL_TITLE,
                        id="panel-sweep")
            yield LogBox(LogPanel(m, id="logpanel"), title="Server log", id="panel-log")
        yield ProfileBar(m, id="profile-bar")
        yield CockpitFooter()  # Textual's Footer kept every key it ever showed (issue 30)

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        keymap = {}
        for name, key in self.config_keys.items():
            keymap[name if name.startswith("kimitui.") else f"kimitui.{name}"] = key
        if keymap:
            self.set_keymap(keymap)
        self.painter.reset()
        self.painter.subscribe(self.controller.session)
        self._set_up_screen()
        if self._tick is not None:
            self.set_interval(self._tick, self.pump, name="ui-pump")
        self.run_worker(self._start_controller(), group="start", exit_on_error=False)

    async def _start_controller(self) -> None:
        start = self._folding if self.replay is not None else self._call  # a replay opened --at seeks at once
        ok = await start("start", self.controller.start)
        self.started = ok is not FAILED
        # The ~300k objects alive now (Textual, the widgets, the controller) live as long as the
        # app: out of the collector's view a full collection takes ~20 ms, not ~150 ms that a key
        # press would wait for.  Refcounting still frees them; on_unmount hands them back.
        gc.freeze()
        found = self._safe(lambda: profile_keys(self.controller))
        self._profile_keys = found
        self._set_up_profile_bar()
        for note in found[1] if found else []:  # a key clash or an order the config cannot have
            self.notify(f"profile keys: {note}", severity="warning", timeout=10)

    def _set_up_screen(self) -> None:
        """What the panels do not draw from the model: the curve's status and the recording."""
        self.query_one("#panel-curve", Panel).border_subtitle = sweep_status(self.model)
        self._update_recording()

    def _set_up_profile_bar(self) -> None:
        if self.painter.held:  # focus_host sets the new bar up once it is mounted
            return
        bar = self.query_one(ProfileBar)
        bar.by_key = dict(self._profile_keys[0]) if self._profile_keys else {}
        bar.display = self.controller.live  # a replay swaps nothing: its header says what ran
        bar.redraw()

    # ------------------------------------------------------------------ rendering
    def pump(self, force_charts: bool = False) -> set[Part]:
        """One tick of the painter (:meth:`Painter.pump`); tests call it with ``tick=None``."""
        return self.painter.pump(force_charts)

    @property
    def dirty(self) -> frozenset[Part]:
        """Parts folded but not redrawn yet: a hidden panel's wait here until it is shown again."""
        return frozenset(self.painter.dirty)

    @property
    def renders(self) -> int:
        """Panel redraws so far (benchmarks and tests read it)."""
        return self.painter.renders

    @property
    def layout_shown(self) -> LayoutMode | None:
        return self.painter.layout_shown

    def _poll(self) -> None:
        """What the controller says each tick: the recording, the replay's position, which keys can fire."""
        self._update_recording()
        self._update_replay_bar()
        self._update_key_state()

    def _toast(self, notices: list[Notice]) -> None:
        """The notices as toasts; a replay playing fast shows one at a time (:meth:`_replay_coalesce`), the log has
        all."""
        notices, timeout = self._replay_coalesce(notices)
        for notice in notices:
            self.notify(notice.message, severity=notice.severity,
                        timeout=timeout or (6 if notice.severity != "error" else 10))

    def _update_recording(self) -> None:
        """The header's recording status; polled each tick (the recorder opens once the controller starts)."""
        path = self._safe(lambda: self.controller.recording_path)
        status = RecordingStatus(path, path is not None, self.controller.live)
        header = self.query_one(HeaderBar)
        if header.recording != status:
            header.recording = status
            self.painter.mark("header")

    def _update_key_state(self) -> None:
        """Re-check which keys can fire (the footer dims the others) when a swap or sweep starts or ends."""
        state = (self._safe(lambda: self.controller.busy), self.model.profile_state, self._experts_useful(),
                 sum(self.size.width >= room for room in (*STRAGGLER_KEYS_ROOM, FOOTER_ROOM)))
        if self.painter.keys_changed(state):
            self.refresh_bindings()
            bar = self.query_one(ProfileBar)
            bar.blocked = self._blocked("pick_profile") is not None
            bar.redraw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in FOOTER_WHEN and len(parameters) == (3 if action == "jump" else 1):  # the footer's copy of a key
            if not footer_shows(action, self._experts_useful(), self.size.width,  # only where it helps, and fits
                                log_focused=self._log_focused()):
                return False
            if action != "jump":
                return True
        if action in LIVE_ONLY and not self.controller.live:
            return False
        if action == "jump":  # live, j/J step through the straggler list; the other jumps need a recording
            return self.replay is not None or parameters[:1] == ("straggler",)
        if action in REPLAY_ONLY:
            return self.replay is not None
        if action in FLEET_ONLY:
            return self.fleet.fleet
        return None if self._blocked(action) else True

    async def run_action(self, action: str | ActionParseResult, default_namespace: DOMNode | None = None,
                         namespaces: Mapping[str, DOMNode] | None = None) -> bool:
        """A dimmed key (or palette entry) says why it cannot run now instead of doing nothing."""
        if isinstance(action, str) and default_namespace in (None, self):
            name = action.split("(")[0].removeprefix("app.")
            reason = self._blocked(name) if self.check_action(name, ()) is None else None
            if reason:
                self.notify(reason, severity="warning", timeout=4)
                return True
        return await super().run_action(action, default_namespace, namespaces)

    # ------------------------------------------------------------------ actions: profiles
    async def action_pick_profile(self, number: int) -> None:
        keys = await self._call("profiles", lambda: profile_keys(self.controller))
        if keys is FAILED:
            return
        by_key, _notes = keys
        name = by_key.get(str(number))
        if name is None:
            taken = ", ".join(by_key) or "none"
            self.notify(f"no profile on key {number} (profile keys: {taken})", severity="warning")
            return
        await self._offer_swap(name)

    async def action_swap_baseline(self) -> None:
        """Back to the host's baseline profile, through the same confirm as a profile key (the compare view's ``b``)."""
        reason = self._blocked("pick_profile")
        if reason or not self.model.baseline:
            self.notify(reason or "no baseline is marked on this host (b marks the running profile)", severity="warning")
            return
        await self._offer_swap(self.model.baseline)

    async def _offer_swap(self, name: str) -> None:
        """The swap's plan to confirm; an offered variant taken instead gets its own confirm (its diff) first."""
        plan = await self._call("plan swap", self.controller.plan_swap, name)
        if plan is FAILED:
            return

        def chosen(target: str | None) -> None:
            if target and target != plan.target:
                self.call_later(self._offer_swap, target)
            elif target:
                self.notify(f"swapping to {target}…")
                self.background_call("swap", self.controller.swap, target)

        self.push_screen(SwapConfirm(plan), chosen)

    async def action_baseline(self) -> None:
        name = await self._call("baseline", self.controller.mark_baseline)
        if name is FAILED:
            return
        if name:
            self.model.baseline = name
            self.painter.mark("header")
            self.notify(f"baseline: {name}")
        else:
            self.notify("no profile is running to mark as baseline", severity="warning")

    # ------------------------------------------------------------------ actions: sweeps
    async def action_sweep(self) -> None:
        if self._safe(lambda: self.controller.busy) == "sweep":
            self._ask_stop_sweep()
            return
        spec = await self._call("sweep defaults", self.controller.default_sweep_spec)
        if spec is FAILED:
            return

        def chosen(new: SweepSpec | None) -> None:
            if new is not None:
                self.notify(f"sweep: levels {new.levels}, {new.mode}, {new.max_tokens} tokens")
                self.background_call("sweep", self.controller.start_sweep, new)

        self.push_screen(SweepForm(spec, self.model), chosen)

    def _ask_stop_sweep(self) -> None:
        """A sweep can take a quarter of an hour: one stray ``s`` must not end it."""
        sw = self.model.sweep
        where = ""
        if sw is not None:
            done = len({lv.concurrency for lv in sw.levels})
            where = f" on {sw.profile or '?'} ({done} of {len(sw.spec.levels)} levels done, now C={sw.concurrency})"

        def answered(yes: bool | None) -> None:
            if yes:
                self.notify("stopping the sweep (finished levels are kept)…", severity="warning")
                self.background_call("stop sweep", self.controller.stop_sweep)

        self.push_screen(Confirm(f"Stop the sweep{where}?\n"
                                 "Finished levels are kept; the running level is recorded as aborted "
                                 "(not a curve point).\n[dim]Enter or y: stop · Esc or n: keep sweeping[/]",
                                 yes="Stop sweep", no="Keep sweeping", default=True), answered)

    # ------------------------------------------------------------------ actions: recording
    def action_note(self) -> None:
        def chosen(text: str | None) -> None:
            if text and text.strip():
                self.run_worker(self._note(text.strip()), exit_on_error=False)

        self.push_screen(TextPrompt("Note for the recording", "what did you just see or change?"), chosen)

    async def _note(self, text: str) -> None:
        if await self._call("note", self.controller.add_note, text) is not FAILED:
            self.notify(f"note added: {text}")

    async def action_marker(self) -> None:
        label = clock(time.time())
        if await self._call("marker", self.controller.add_marker, label) is not FAILED:
            self.notify(f"marker dropped at {label}")

    async def action_record(self) -> None:
        on = await self._call("recording", self.controller.toggle_recording)
        if on is FAILED:
            return
        self._update_recording()
        path = self._safe(lambda: self.controller.recording_path)
        self.notify(f"recording {'on: ' + str(path) if on else 'off'}")

    # ------------------------------------------------------------------ actions: view
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

    async def action_autopilot(self) -> None:
        """Not running: its plan to confirm.  Running: its steps and curves, to pause, skip or stop it."""
        ctl = self.controller
        if not isinstance(ctl, Autopilot):
            self.notify("the autopilot runs on a live host", severity="warning")
            return
        if self._safe(lambda: ctl.tune_running):
            def steer(choice: str | None) -> None:
                if choice:
                    self.run_worker(self._tune_action(ctl, choice), exit_on_error=False)

            self.push_screen(TuneScreen(self.model), steer)
            return
        lines = await self._call("autopilot", ctl.plan_tune)
        if lines is FAILED:
            return

        def chosen(choice: str | None) -> None:
            if choice == "start":
                self.notify("autopilot: starting (a: its steps)")
                self.background_call("autopilot", ctl.start_tune)

        self.push_screen(TuneScreen(self.model, lines), chosen)

    async def _tune_action(self, ctl: Autopilot, choice: str) -> None:
        said = await self._call("autopilot", ctl.tune_action, choice)
        if isinstance(said, str):
            self.notify(said)

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

    # ------------------------------------------------------------------ actions: the fleet
    async def action_focus_host(self, step: int = 1) -> None:
        """Focus the next (or previous) host: the whole cockpit shows it, every action goes to it."""
        await self.focus_host(self.fleet.step(step))

    async def on_fleet_strip_chosen(self, message: FleetStrip.Chosen) -> None:
        await self.focus_host(message.host)

    async def focus_host(self, host: str) -> None:
        """Show ``host``'s model in every panel (rebuilt around it) and point the controller at it."""
        if host == self.fleet.focused or self.screen is not self.screen_stack[0]:
            return
        ctl = self.controller
        if isinstance(ctl, Fleet) and await self._call("focus", ctl.focus, host) is FAILED:
            return
        self.fleet.focus(host)
        with self.painter.holding():
            await self.recompose()
        self.painter.reset()
        self._set_up_screen()
        self._set_up_profile_bar()
        self.pump(force_charts=True)
        self.notify(f"focused {host}", timeout=2)

    def action_fleet_gpus(self) -> None:
        self.push_screen(FleetGpus(self.fleet))

    def action_gpu_processes(self) -> None:
        self.push_screen(GpuProcesses(self.model))

    def _log_focused(self) -> bool:
        """The log panel has the focus on the main screen: the footer lists its four keys too (less room for the
        others), under a dialog as well."""
        focused = self.screen_stack[0].focused if self.screen_stack else None
        return focused is not None and any(isinstance(node, LogBox) for node in focused.ancestors_with_self)

    def action_experts(self, footer: bool = False) -> None:
        """The expert heatmap (layers x GPUs) and the balance: live and in a replay (``footer``: the footer's copy)."""
        self.push_screen(ExpertHeatmap(self.model))

    async def action_jump(self, kind: str, forward: bool = True, footer: bool = False) -> None:
        """A replay seeks to the next ``kind`` (:class:`ReplayActions`); live, ``j``/``J`` step through the straggler
        list.  ``footer``: pressed as the footer's copy of ``j`` (see ``FOOTER_WHEN``)."""
        if self.replay is not None:
            await self._replay_jump(kind, forward)
        elif kind == "straggler":
            self._step_straggler(forward)

    # ------------------------------------------------------------------ command palette
    def action_command_palette(self) -> None:
        """Textual's palette, closing once (:class:`Palette`); ctrl+p while the last one is still closing waits."""
        if not self.use_command_palette or not self.is_running or isinstance(self.screen, CommandPalette):
            return
        if palette_closing(self._palette):  # its id is still taken: a second one now would end the session
            self.set_timer(0.05, self.action_command_palette)
            return
        self._palette = Palette(id=PALETTE_ID)
        self.push_screen(self._palette)

    def search_themes(self) -> None:
        """The palette's theme picker, closing once like the palette."""
        self.push_screen(Palette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from without_textual_duplicates(super().get_system_commands(screen))
        yield from cockpit_commands(self)

    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Quit; a palette search still running would draw into the palette as its widgets are removed."""
        if self._palette is not None:
            self.workers.cancel_node(self._palette)
        super().exit(result, return_code, message)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not self.screen_stack:
            return  # a key still on its way as the app shuts down: no screen to act on (ScreenStackError)
        await super().on_event(event)

    # ------------------------------------------------------------------ quitting
    def _quit_rule(self) -> str:
        """What quitting does to the host's server, from the controller (a replay has no rule)."""
        return self._safe(lambda: self.controller.quit_rule()) or ""

    def _busy_for_quit(self) -> str | None:
        """The work quitting would cut short: the focused host's, or in a fleet any host's (named)."""
        ctl = self.controller
        anywhere = self._safe(lambda: ctl.busy_anywhere if isinstance(ctl, Fleet) else None)  # 3.11 reads it to check
        if anywhere:
            return ", ".join(f"{what} on {host}" for host, what in anywhere.items())
        return self._safe(lambda: self.controller.busy)

    async def action_quit(self) -> None:
        busy = self._busy_for_quit()
        if busy:
            def answered(yes: bool | None) -> None:
                if yes:
                    self.run_worker(self._quit(), exit_on_error=False)

            rule = self._quit_rule() or "It will be stopped; everything so far stays in the recording."
            self.push_screen(Confirm(f"A {busy} is running. Quit anyway?\n{rule}",
                                     yes="Quit", no="Keep running"), answered)
            return
        await self._quit()

    async def _quit(self) -> None:
        if self._safe(lambda: self.controller.busy) == "swap":
            # the controller's own rule: a start from nothing is called off at once, a real swap finished first
            first_start = self._quit_rule().startswith("The server still starting is stopped at once")
            self.notify("stopping the server still starting, then shutting down…" if first_start else
                        "finishing the swap first (or rolling it back), then shutting down…", timeout=30)
        else:
            self.notify("shutting down (flushing the recording)…")
        await self._stop_controller()
        self.exit(0)

    async def _stop_controller(self) -> None:
        if self._shutdown_done:
            return
        self._shutdown_done = True
        await self._call("shutdown", self.controller.shutdown)
        self.painter.close()

    async def on_unmount(self) -> None:
        await self._stop_controller()
        gc.unfreeze()




def run_app(controller: Controller, *, config_keys: dict[str, str] | None = None) -> int:
    """Run the cockpit in this terminal until the operator quits; returns the exit code."""
    app = KimituiApp(controller, config_keys=config_keys)
    result = app.run()
    if isinstance(result, int):
        return result
    return app.return_code or 0
