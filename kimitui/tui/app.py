"""The cockpit: one screen over a Session, every action through a Controller.

The app is a composition of rooms: the painter (:mod:`kimitui.tui.painter`: the 3 Hz pump that folds the
session's events and redraws what changed and can be seen), and the actions by what they act on, each a mixin over
:class:`~kimitui.tui.cockpit_base.CockpitBase` (whose controller calls turn a failure into a notification, never a
traceback): the host (:mod:`~kimitui.tui.host_actions`), the view (:mod:`~kimitui.tui.view_actions`), the replay's
transport (:mod:`~kimitui.tui.replay_actions`) and quitting (:mod:`~kimitui.tui.quit_actions`).  What stays here:
the screen's widgets, its start, which keys can fire now, the fleet's focus and the command palette.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from rich.console import RenderableType
from textual import events
from textual.actions import ActionParseResult
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.command import CommandPalette
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.screen import Screen
from textual.theme import ThemeProvider

from kimitui.capacity.slo import parse_slo
from kimitui.config import Config
from kimitui.control import Controller, Fleet, ProfileDirectories, ReplayControls
from kimitui.tui.bindings import BINDINGS as COCKPIT_BINDINGS
from kimitui.tui.bindings import (FLEET_ONLY, FOOTER_ROOM, FOOTER_WHEN, LIVE_ONLY, REPLAY_ONLY, STRAGGLER_KEYS_ROOM,
                                  footer_shows)
from kimitui.tui.model.keys import profile_keys
from kimitui.tui.model.fold import Notice, Part
from kimitui.tui.model.fleet_state import FleetModels
from kimitui.tui.cockpit_base import FAILED
from kimitui.tui.host_actions import HostActions
from kimitui.tui.painter import Painter
from kimitui.tui.quiet_collector import QuietCollector
from kimitui.tui.quit_actions import QuitActions
from kimitui.tui.replay_actions import ReplayActions
from kimitui.tui.view_actions import ViewActions
from kimitui.tui.palette import cockpit_commands, without_textual_duplicates
from kimitui.tui.screens.dialog import PALETTE_ID, Palette, palette_closing
from kimitui.tui.widgets.fleet_strip import FleetStrip
from kimitui.tui.widgets.footer import CockpitFooter
from kimitui.tui.widgets.gpu_panel import GpuPanel
from kimitui.tui.widgets.header_bar import HeaderBar
from kimitui.tui.widgets.level_table import PANEL_TITLE, LevelTable
from kimitui.tui.widgets.log_panel import LogPanel
from kimitui.tui.model.layout_mode import LayoutMode
from kimitui.tui.widgets.panel import GpuBox, LogBox, Panel
from kimitui.tui.widgets.profile_bar import ProfileBar
from kimitui.tui.widgets.sweep_strip import SweepStrip
from kimitui.tui.widgets.timeline_strip import TimelineStrip
from kimitui.tui.widgets.replay_bar import ReplayBar, ReplayToasts
from kimitui.tui.widgets.server_panel import ServerPanel
from kimitui.tui.widgets.spread_chart import SpreadChart
from kimitui.tui.widgets.straggler_list import StragglerList
from kimitui.tui.widgets.sweep_curve import SweepCurve, sweep_status


class KimituiApp(HostActions, ViewActions, ReplayActions, QuitActions):
    """The cockpit.  ``controller`` is live (``LiveController``, ``FleetController``) or a replay
    (``ReplayController``)."""

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
        config: Config | None = None,
    ) -> None:
        """``tick`` None disables the timer (tests call :meth:`pump`); charts redraw at most every ``chart_period`` s.

        ``config``: whose ``[capacity] slo`` and ``[cost]`` prices to show, where the controller carries no
        config of its own (a replay); the live controller's own config is used otherwise."""
        super().__init__()
        self.controller = controller
        self.config_keys = dict(config_keys or {})
        hosts = (list(controller.hosts) if isinstance(controller, Fleet) else []) or [controller.host_name]
        self.fleet = FleetModels(hosts, fleet=len(hosts) > 1)
        if isinstance(controller, ProfileDirectories):  # the live one: its config's [capacity] slo and [cost] prices
            config = controller.config
        if config is not None:
            slo = parse_slo(config.capacity.slo)
            rates = config.cost.rates()
            for model in self.fleet.models.values():
                model.slo = slo
                model.sweep_state.energy.rates = rates
        self.replay = controller if isinstance(controller, ReplayControls) else None
        self._replay_toasts = ReplayToasts()
        self._tick = tick
        self.painter = Painter(self, self.fleet, chart_period=chart_period, poll=self._poll, toast=self._toast,
                               paced=tick is not None)  # a test's pump draws what changed at once
        """The pump and redraw engine: what changed, drawn where it can be seen."""
        self.started = False
        self.collector = QuietCollector()
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
        # app: frozen out of the collector's view; its full collections then run when no key is
        # pressed (QuietCollector).  Refcounting still frees them; on_unmount hands them back.
        self.collector.start()
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
        """One tick of the painter (:meth:`Painter.pump`); tests call it with ``tick=None``.  A full garbage
        collection, when due and no key came lately, runs after it (:class:`QuietCollector`)."""
        drawn = self.painter.pump(force_charts)
        self.collector.tick()
        return drawn

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

    # ------------------------------------------------------------------ which keys can fire
    def _update_key_state(self) -> None:
        """Re-check which keys can fire (the footer dims the others) when a swap or sweep starts or ends."""
        state = (self._safe(lambda: self.controller.busy), self.model.profile_state, self._experts_useful(),
                 sum(self.size.width >= room for room in (*STRAGGLER_KEYS_ROOM, FOOTER_ROOM)))
        if self.painter.keys_changed(state):
            self.refresh_bindings()
            bar = self.query_one(ProfileBar)
            bar.blocked = self._blocked("pick_profile") is not None
            bar.redraw()

    def _log_focused(self) -> bool:
        """The log panel has the focus on the main screen: the footer lists its four keys too (less room for the
        others), under a dialog as well."""
        focused = self.screen_stack[0].focused if self.screen_stack else None
        return focused is not None and any(isinstance(node, LogBox) for node in focused.ancestors_with_self)

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

    # ------------------------------------------------------------------ live or replay
    async def action_jump(self, kind: str, forward: bool = True, footer: bool = False) -> None:
        """A replay seeks to the next ``kind`` (:class:`ReplayActions`); live, ``j``/``J`` step through the straggler
        list.  ``footer``: pressed as the footer's copy of ``j`` (see ``FOOTER_WHEN``)."""
        if self.replay is not None:
            await self._replay_jump(kind, forward)
        elif kind == "straggler":
            self._step_straggler(forward)

    # ------------------------------------------------------------------ the fleet
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

    # ------------------------------------------------------------------ command palette
    def action_command_palette(self) -> None:
        """Textual's palette, closing once (:class:`Palette`); ctrl+p while the last one is still closing waits."""
        if not self.use_command_palette or not self.is_running or isinstance(self.screen, CommandPalette):
            return
        if self._palette is not None and self._palette in self.screen_stack:
            return  # open already, under a screen one of its commands opened: a second one would clash with its id
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
        if isinstance(event, events.Key):
            self.collector.key()
            if not self.screen_stack:
                return  # a key still on its way as the app shuts down: no screen to act on (ScreenStackError)
        await super().on_event(event)


def run_app(controller: Controller, *, config_keys: dict[str, str] | None = None,
            config: Config | None = None) -> int:
    """Run the cockpit in this terminal until the operator quits; returns the exit code."""
    app = KimituiApp(controller, config_keys=config_keys, config=config)
    result = app.run()
    if isinstance(result, int):
        return result
    return app.return_code or 0
