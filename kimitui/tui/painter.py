"""The painter: what the session published, folded into the models and drawn where it changed and can be seen.

Events are never drawn one by one: each pump (a 3 Hz timer) drains the subscription, folds the batch into the
models, and redraws the parts that changed and are visible; a hidden panel's part waits, dirty, until it is shown.
The charts redraw at most every ``chart_period`` seconds and the fleet strip every ``FLEET_PERIOD_S``, inside the
same tick: every frame costs a terminal write.  Everything the painter remembers about the screen it draws on
starts over in one call, :meth:`Painter.reset` (a screen rebuilt around another host).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from textual.app import App
from textual.css.query import NoMatches
from textual.widget import Widget

from kimitui.session import Session, Subscription
from kimitui.tui.model.fold import CHARTS, PANELS, Notice, Part
from kimitui.tui.model.fleet_state import FleetModels
from kimitui.tui.model.layout_mode import LayoutMode, layout_mode
from kimitui.tui.widgets.fleet_strip import FleetStrip
from kimitui.tui.widgets.log_panel import LogPanel
from kimitui.tui.widgets.model_view import ModelView
from kimitui.tui.widgets.panel import Panel

PANELS_BELOW_HEADER: frozenset[Part] = frozenset(PANELS) - {"header"}
"""What a maximised panel hid, or a new layout shows: redrawn when the screen is restored."""

FLEET_PERIOD_S = 0.9
"""The fleet strip redraws at most this often (its figures move a few times a second)."""

GPU_PERIOD_S = 0.9
"""The GPU panel redraws at most this often: its samples come at 4 Hz and each one moves a figure (power by a
watt), which no one reads 3 times a second: once a second, every third pump of the 3 Hz timer (docs/screen.md)."""
LEVELS_PERIOD_S = 0.9
"""The levels table likewise: a sweep's progress comes at 5 Hz and moves the running level's figures; once a second
is as fast as they are read, and the table (a DataTable) is one of the costliest frames (issue 33)."""

KeyState = tuple[str | None, str, bool, int]
"""What decides which keys can fire (busy, the profile's state, experts useful, the footer's room)."""


class Painter:
    """The pump and redraw engine of one app: its dirty parts, its view map, the layout it shows."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"app", "fleet", "chart_period", "paced", "periods", "poll", "toast",
                                                "sub", "held", "renders"})
    """What :meth:`reset` keeps: what the painter was made with, its subscription, the hold, the count of redraws.
    Every other field describes the screen drawn last, and a reset puts it as a new painter has it."""

    def __init__(self, app: App[int], fleet: FleetModels, *, chart_period: float,
                 poll: Callable[[], None], toast: Callable[[list[Notice]], None],
                 paced: bool = True) -> None:
        """``poll`` reads the controller each tick (after the fold); ``toast`` shows the models' notices.
        The charts redraw at most every ``chart_period`` s; ``paced`` (the timer's cockpit, not a test's pump):
        the GPU panel and the levels table at most once a second, and one chart a pump."""
        self.app = app
        self.fleet = fleet
        self.chart_period = chart_period
        self.paced = paced
        self.periods: dict[Part, float] = {part: chart_period for part in CHARTS}
        if paced:
            self.periods |= {"gpus": GPU_PERIOD_S, "levels": LEVELS_PERIOD_S}
        """The parts redrawn at most this often: what changes with every sample and costs a frame each time."""
        self.poll = poll
        self.toast = toast
        self.sub: Subscription | None = None
        self.held = False
        """True while the app recomposes the screen: its widgets are being replaced, so the pump (a timer, not
        queued behind the key) leaves them alone until it is done."""
        self.renders = 0
        """Panel redraws so far (benchmarks and tests read it)."""
        self.reset()

    def reset(self) -> None:
        """Start over on the screen as it is now (mounted, or recomposed around another host): every part is
        drawn, the layout and the keys worked out again, the log views rebuilt from their model's ring."""
        self.dirty: set[Part] = set()
        self.stale: dict[Part, set[int] | None] = {}
        """Part -> the views (by id) still to redraw since it last changed; None: all of them.  A part shown by a
        hidden widget and a visible one stays dirty for the hidden one only: the visible one is not redrawn each
        pump meanwhile (the monitor layout's sweep strip was, 3 times a second, with the curve hidden; issue 33)."""
        self.sizes: dict[int, tuple[int, int]] = {}
        """View (by id) -> the size it was drawn at: a view whose size changed is drawn again (its caption, its
        columns and its legend fit the room it has)."""
        self.captions: dict[int, tuple[object, object, object, object]] = {}
        """Panel (by id) -> the title set here and what the panel then showed, the same for the subtitle: set again
        only when one changed (each set repaints)."""
        self.mark(*PANELS)
        self.views: dict[Part, list[ModelView]] = self._map_views()
        """Part -> the widgets that show it (``ModelView.shows``)."""
        self.layout_shown: LayoutMode | None = None
        """The layout the screen shows (``layout_mode``): None until the next pump works it out."""
        self.generation = self.fleet.model.generation
        """The model's generation the log views were built from (a replay seek bumps it)."""
        self._restart_logs()
        self.keys_shown: KeyState | None = None
        """What the footer's keys were last checked against (``keys_changed``)."""
        self.touched: set[Part] = set()
        """The parts some widget redrew in this pump (a part is done once all its widgets are)."""
        self.last_drawn: dict[Part, float] = {}
        """A periodic part -> when it was drawn last (``periods``)."""
        self.fleet_changed = True
        self.last_fleet_draw = 0.0
        self.apply_layout()  # at once: the first frame has the layout's panels

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Draw nothing while the screen is rebuilt (what changes meanwhile stays dirty)."""
        self.held = True
        try:
            yield
        finally:
            self.held = False

    def subscribe(self, session: Session) -> None:
        self.sub = session.subscribe("tui", maxsize=20_000)

    def close(self) -> None:
        if self.sub is not None:
            self.sub.close()

    def mark(self, *parts: Part) -> None:
        """Redraw these parts, in every widget that shows them, at the next pump."""
        self.dirty.update(parts)
        for part in parts:
            self.stale[part] = None

    def keys_changed(self, state: KeyState) -> bool:
        """Whether the keys must be checked again (a swap or a sweep started or ended, the screen was resized)."""
        changed, self.keys_shown = state != self.keys_shown, state
        return changed

    # ------------------------------------------------------------------ the pump
    def pump(self, force_charts: bool = False) -> set[Part]:
        """Drain events, fold them, redraw what changed and is visible; returns the parts redrawn (in one of their
        widgets at least).

        ``force_charts``: the charts, the GPU panel and the fleet strip now, whenever they were drawn last.
        """
        app = self.app
        if self.held or not app.is_running:  # shutting down: the screens may be gone (ScreenStackError)
            return set()
        try:
            return self._pump(force_charts)
        except NoMatches:
            if app._closing or app._closed or not app.is_running:
                return set()  # a timer tick that fired while the screen was being torn down
            raise

    def _pump(self, force: bool) -> set[Part]:
        self.fold()
        self.poll()
        if self.fleet.model.generation != self.generation:  # a replay seek: the log starts over with the model
            self.generation = self.fleet.model.generation
            self._restart_logs()
        self.apply_layout()
        self._mark_resized()
        self.toast(self.fleet.notices())
        now = time.monotonic()
        if self.fleet_changed and (force or now - self.last_fleet_draw >= FLEET_PERIOD_S):
            self.fleet_changed, self.last_fleet_draw = False, now
            for strip in self.app.query(FleetStrip):
                strip.redraw()
        waiting = {part for part, period in self.periods.items()
                   if not force and now - self.last_drawn.get(part, 0.0) < period}
        due = self.dirty - waiting
        charts: list[Part] = []
        if self.paced and not force:  # one costly render a frame: the shown chart that waited longest
            charts = sorted((part for part in due & CHARTS if self._shown(part)),
                            key=lambda part: self.last_drawn.get(part, 0.0))[:1]
            due -= CHARTS
        self.touched = set()
        drawn = self.draw(due | set(charts))
        for part in self.touched & self.periods.keys():
            self.last_drawn[part] = now
        self._captions()
        return drawn | self.touched

    def _shown(self, part: Part) -> bool:
        """Whether any widget that shows ``part`` is on screen now."""
        return any(self.visible(view, chart=part in CHARTS) for view in self.views.get(part, [])
                   if isinstance(view, Widget))

    def fold(self) -> None:
        """Fold what the subscription holds into the models (drawn by the pump)."""
        if self.sub is not None:
            events = self.sub.drain(limit=50_000)
            if events:
                dirty, changed = self.fleet.apply(events)
                self.mark(*dirty)
                self.fleet_changed |= changed

    # ------------------------------------------------------------------ drawing
    def draw(self, parts: set[Part]) -> set[Part]:
        drawn: set[Part] = set()
        if not parts:
            return drawn
        with self.app.batch_update():
            for part in parts:
                if self._redraw(part):
                    self.dirty.discard(part)
                    drawn.add(part)
        self.renders += len(drawn)
        return drawn

    def apply_layout(self) -> None:
        """Set the main screen's layout class from the state; what it reveals is redrawn now."""
        stack = self.app.screen_stack
        if not stack:
            return
        mode = layout_mode(self.fleet.model)
        if self.layout_shown != mode:
            self.layout_shown = mode
            stack[0].set_class(mode == "monitor", "-monitor")
            stack[0].set_class(mode == "sweep", "-sweep")
            self.mark(*PANELS_BELOW_HEADER)

    def visible(self, widget: Widget, *, chart: bool = False) -> bool:
        """Shown, not behind a maximised panel; a chart also not hidden by the layout (its redraw is the costly one)."""
        stack = self.app.screen_stack
        if not stack:
            return False
        if chart and not all(node.display for node in widget.ancestors_with_self if isinstance(node, Widget)):
            return False  # hidden by the layout (app.tcss): drawn when the layout shows it
        maxed = stack[0].maximized
        return maxed is None or maxed is widget or maxed in widget.ancestors

    def _restart_logs(self) -> None:
        """The log views rewrite themselves from their model's ring (lines held back for more copies are dropped)."""
        if self.app.screen_stack:  # not mounted yet: nothing to rewrite
            for panel in self.app.query(LogPanel):
                panel.rebuild()

    def _map_views(self) -> dict[Part, list[ModelView]]:
        views: dict[Part, list[ModelView]] = {part: [] for part in PANELS}
        if not self.app.screen_stack:  # not mounted yet: the app resets its painter once it is
            return views
        for widget in self.app.query(Widget):
            if isinstance(widget, ModelView):
                for part in widget.shows:
                    views[part].append(widget)
        return views

    def _redraw(self, part: Part) -> bool:
        """Redraw the widgets that show ``part`` and have not since it changed; False while one is hidden (the
        part stays dirty for that one alone) or none is mounted."""
        views = self.views.get(part)
        if not views:
            return False
        stale = self.stale.get(part)
        hidden: set[int] = set()
        for view in views:
            assert isinstance(view, Widget)  # every ModelView is a widget (see _map_views)
            if stale is not None and id(view) not in stale:
                continue  # drawn since the part last changed
            if not view.drawn_when_maximized and not self.visible(view, chart=part in CHARTS):
                hidden.add(id(view))
                continue
            view.redraw()
            self.touched.add(part)
            self.sizes[id(view)] = (view.size.width, view.size.height)
        self.stale[part] = hidden
        return not hidden

    def _captions(self) -> None:
        """Every shown view's caption, checked each pump: a caption may say what its part does not carry (the
        curve's subtitle names the timeline's marks), and a set repaints only where the words changed."""
        seen: set[int] = set()
        for part, views in self.views.items():
            for view in views:
                assert isinstance(view, Widget)
                if id(view) in seen or not self.visible(view, chart=part in CHARTS):
                    continue
                seen.add(id(view))
                self._caption(view)

    def _mark_resized(self) -> None:
        """Views drawn at another size than they have now are owed a redraw (a part drawn once per change would
        otherwise keep what it drew for the size it had before the layout settled)."""
        for part, views in self.views.items():
            for view in views:
                assert isinstance(view, Widget)
                drawn = self.sizes.get(id(view))
                if drawn is not None and drawn != (view.size.width, view.size.height):
                    del self.sizes[id(view)]
                    self.dirty.add(part)
                    stale = self.stale.get(part)
                    if stale is not None:
                        stale.add(id(view))

    def _caption(self, view: ModelView) -> None:
        """The view's title and subtitle on its panel's border, set only where they changed (others may set them
        too: the app sets the curve's subtitle, so what the panel shows is checked, not only what was set here)."""
        title, subtitle = view.caption()
        panel = view.parent  # type: ignore[attr-defined]  # a ModelView is a widget
        if (title is None and subtitle is None) or not isinstance(panel, Panel):
            return
        said = self.captions.get(id(panel), (None, None, None, None))
        if title is not None and (title != said[0] or panel.border_title != said[1]):
            panel.border_title = title
            said = (title, panel.border_title, *said[2:])
        if subtitle is not None and (subtitle != said[2] or panel.border_subtitle != said[3]):
            panel.border_subtitle = subtitle
            said = (*said[:2], subtitle, panel.border_subtitle)
        self.captions[id(panel)] = said
