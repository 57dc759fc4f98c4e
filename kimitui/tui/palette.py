"""Every cockpit action as a command-palette entry (the palette lists what the keys do)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from textual.app import SystemCommand

if TYPE_CHECKING:
    from kimitui.tui.app import KimituiApp


def cockpit_commands(app: "KimituiApp") -> Iterable[SystemCommand]:
    """The app's actions, with the profile list and replay controls when they apply."""
    live = app.controller.live

    def run(action: str) -> Callable[[], Any]:
        return lambda: app.call_later(app.run_action, action)

    if live:
        try:
            names = app.controller.profile_names()
        except Exception:  # the palette must open even if the controller cannot list profiles
            names = []
        for i, name in enumerate(names[:9], start=1):
            yield SystemCommand(f"Swap to profile {name}", f"key {i}: diff, confound check, confirm",
                                run(f"pick_profile({i})"))
        yield SystemCommand("Start or stop a sweep", "key s", run("sweep"))
        yield SystemCommand("Mark the running profile as baseline", "key b", run("baseline"))
        yield SystemCommand("Toggle recording", "key r", run("record"))
    yield SystemCommand("Add a note to the recording", "key n", run("note"))
    yield SystemCommand("Drop a marker", "key m", run("marker"))
    yield SystemCommand("Maximise / restore the focused panel", "key z", run("toggle_maximize"))
    yield SystemCommand("Log: cycle severity filter", "key f", run("log_severity"))
    yield SystemCommand("Log: cycle kind filter", "key t", run("log_kind"))
    yield SystemCommand("Log: search", "key /", run("log_search"))
    yield SystemCommand("Log: pause / resume", "key p", run("log_pause"))
    yield SystemCommand("Compare two runs", "key c", run("compare"))
    yield SystemCommand("Show the keys", "key ?", run("help"))
    if app.replay is not None:
        yield SystemCommand("Replay: play / pause", "space", run("play_pause"))
        for kind in ("straggler", "profile_switch", "error", "marker"):
            yield SystemCommand(f"Replay: next {kind.replace('_', ' ')}", "", run(f"jump('{kind}', True)"))
    yield SystemCommand("Quit kimitui", "key q (the recording is kept)", run("quit"))
