"""Every cockpit action as a command-palette entry (the palette lists what the keys do)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from textual.app import SystemCommand

from kimitui.control import Watching
from kimitui.tui.model.keys import profile_keys

if TYPE_CHECKING:
    from kimitui.tui.app import KimituiApp


TEXTUAL_DUPLICATES = frozenset({"Quit", "Keys", "Maximize", "Minimize"})
"""Textual's own entries that the cockpit already offers in its words (quit, help, maximise)."""


def without_textual_duplicates(commands: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
    """Textual's system commands less those the cockpit lists itself: each action once."""
    return (c for c in commands if c.title not in TEXTUAL_DUPLICATES)


def cockpit_commands(app: "KimituiApp") -> Iterable[SystemCommand]:
    """The app's actions, with the profile list and replay controls when they apply."""
    live = app.controller.live

    shown = {b.id: app.get_key_display(b) for b in app.cockpit_bindings()}

    def key(name: str) -> str:
        """The key as the operator types it, after the config's ``[keys]`` remaps."""
        return shown.get(f"kimitui.{name}", "?")

    def run(action: str) -> Callable[[], object]:
        return lambda: app.call_later(app.run_action, action)

    if live:
        try:
            by_key, _notes = profile_keys(app.controller)
        except Exception:  # the palette must open even if the controller cannot list profiles
            by_key = {}
        for k, name in by_key.items():
            yield SystemCommand(f"Swap to profile {name}", f"key {k}: diff, confound check, confirm",
                                run(f"pick_profile({k})"))
        ctrl = app.controller
        if isinstance(ctrl, Watching) and isinstance(ctrl.watch_offer, str):  # a foreign server holds the sim port
            yield SystemCommand(f"Watch {ctrl.watch_offer}", "a server kimitui did not start: metrics, health, sweeps; "
                                "never stopped or swapped", lambda: app.background_call("watch", ctrl.watch))
        yield SystemCommand("Start or stop a sweep", f"key {key('sweep')}", run("sweep"))
        base = app.model.baseline
        yield SystemCommand(f"Swap to baseline{f' {base}' if base else ''}", "back to the host's baseline: diff, "
                            "confirm (key b in the compare view)", run("swap_baseline"))
        yield SystemCommand("Mark the running profile as baseline", f"key {key('baseline')}", run("baseline"))
        yield SystemCommand("Toggle recording", f"key {key('record')}", run("record"))
    yield SystemCommand("Add a note to the recording", f"key {key('note')}", run("note"))
    yield SystemCommand("Drop a marker", f"key {key('marker')}", run("marker"))
    yield SystemCommand("Maximise / restore the focused panel", f"key {key('toggle_maximize')}", run("toggle_maximize"))
    yield SystemCommand("Log: cycle severity filter", f"key {key('log_severity')}", run("log_severity"))
    yield SystemCommand("Log: cycle kind filter", f"key {key('log_kind')}", run("log_kind"))
    yield SystemCommand("Log: search", f"key {key('log_search')}", run("log_search"))
    yield SystemCommand("Log: pause / resume", f"key {key('log_pause')}", run("log_pause"))
    yield SystemCommand("Compare two runs", f"key {key('compare')}", run("compare"))
    yield SystemCommand("Experts: heatmap of layers x GPUs, balance, EPLB rebalances",
                        f"key {key('experts')}; live and in a replay", run("experts"))
    yield SystemCommand("Show the keys", f"key {key('help')}", run("help"))
    if app.replay is not None:
        yield SystemCommand("Replay: play / pause", "space", run("play_pause"))
        for kind in ("straggler", "profile_switch", "error", "marker"):
            yield SystemCommand(f"Replay: next {kind.replace('_', ' ')}", "", run(f"jump('{kind}', True)"))
    yield SystemCommand("Quit kimitui", f"key {key('quit')} (the recording is kept)", run("quit"))
