"""Random key storms against a running cockpit (tests/test_tui_chaos.py).

Keys are posted to the app the way the terminal driver posts them, 10-50 ms apart, without waiting for the
app to settle in between: a real operator's fingers do not wait for a redraw, and the races a storm is for
(a key landing while the screen is rebuilt, a dialog closed before it mounted) need keys that do not wait.
Every cockpit binding except quitting, the palette (ctrl+p, a typed command, Enter), Escape, Tab, Enter,
arrows and the dialogs' own keys; one seed makes one storm (the timing on a busy machine still varies).
"""

from __future__ import annotations

import asyncio
import random
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from textual import events

from kimitui.tui import app as app_module
from kimitui.tui.app import KimituiApp

QUITTING = frozenset({"q", "ctrl+q"})
"""Keys that end the session on the main screen: never part of a storm (``ChaosApp`` makes quit inert anyway)."""

CHARS = {"escape": "\x1b", "tab": "\t", "enter": "\r", "space": " ", "question_mark": "?", "slash": "/",
         "plus": "+", "minus": "-", "left_square_bracket": "[", "right_square_bracket": "]", "backspace": "\x7f",
         "colon": ":"}
"""The character a terminal sends with each named key (a letter or digit is its own character)."""

EXTRA_KEYS = ("escape", "escape", "escape", "tab", "shift+tab", "enter", "enter", "up", "down", "left", "right",
              "y", "n", "space", "backspace", "ctrl+c")
"""Keys beyond the cockpit's bindings: closing, moving focus, confirming, the dialogs' own (y/n), Textual's ctrl+c."""

PALETTE_WORDS = ("Compare two runs", "Log: cycle severity", "Log: cycle kind", "Log: search", "Log: pause",
                 "Add a note", "Drop a marker", "Maximise", "Experts", "Show the keys", "Start or stop a sweep",
                 "Mark the running profile", "Toggle recording", "Swap to profile", "Replay: play", "Replay: next",
                 "theme", "zzz")
"""What the storm types into the palette (a prefix of each, then Enter): the cockpit's commands, Textual's
theme picker and a word that matches nothing.  Never the quit entry (``ChaosApp`` makes it inert anyway)."""


class ChaosApp(KimituiApp):
    """The cockpit with quitting made inert: a storm that reaches a quit (a fuzzy palette match) goes on."""

    CSS_PATH = str(Path(app_module.__file__).parent / KimituiApp.CSS_PATH)  # relative paths follow the subclass
    quits_asked = 0

    async def action_quit(self) -> None:
        self.quits_asked += 1


def storm_keys(app: KimituiApp) -> list[str]:
    """Every key the cockpit binds (after the config's remaps), less the quitting ones, plus :data:`EXTRA_KEYS`."""
    keys = {k.strip() for b in app.cockpit_bindings() for k in b.key.split(",")}
    return sorted(keys - QUITTING) + list(EXTRA_KEYS)


def key_event(key: str) -> events.Key:
    char = CHARS.get(key) or (key if len(key) == 1 else None)
    return events.Key(key, char)


@dataclass
class Storm:
    """One storm: ``keys`` presses from ``seed``, ``palette`` of them opening the palette to type a command."""

    seed: int
    keys: int
    seconds: float = 60.0
    """A bound on the storm's wall time as well (a busy machine draws each key slower): it ends at either."""
    palette: float = 0.06
    min_gap_s: float = 0.010
    max_gap_s: float = 0.050
    sent: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def say(self, label: str) -> str:
        tail = " ".join(self.sent[-25:])
        return (f"chaos storm {label}: seed {self.seed} (rerun: KIMITUI_CHAOS_SEED={self.seed}), "
                f"{len(self.sent)} keys sent; last keys: {tail}")

    async def run(self, app: KimituiApp, label: str) -> None:
        """Send the storm; stop at the first unhandled exception or a stopped app (the failure names the seed)."""
        rng = random.Random(self.seed)
        keys = storm_keys(app)
        start = time.monotonic()
        while len(self.sent) < self.keys and time.monotonic() - start < self.seconds:
            if rng.random() < self.palette:
                await self._type(app, rng, ["ctrl+p", *_typed(rng.choice(PALETTE_WORDS), rng), "enter"])
            else:
                await self._type(app, rng, [rng.choice(keys)])
            alive(app, self.say(label))
        self.wall_s = time.monotonic() - start

    async def _type(self, app: KimituiApp, rng: random.Random, keys: Sequence[str]) -> None:
        for key in keys:
            storm_press(app, key)
            self.sent.append(key)
            await asyncio.sleep(rng.uniform(self.min_gap_s, self.max_gap_s))


def _typed(words: str, rng: random.Random) -> list[str]:
    """A prefix of ``words`` as key names (at least four characters: enough to rank it first)."""
    text = words[:rng.randint(min(4, len(words)), len(words))]
    return [{" ": "space", ":": "colon", "/": "slash"}.get(ch, ch) for ch in text]


def storm_press(app: KimituiApp, *keys: str) -> None:
    """Post ``keys`` at once, as a terminal delivers a burst: none waits for the app to handle the one before."""
    for key in keys:
        event = key_event(key)
        event.set_sender(app)
        app.post_message(event)


def alive(app: KimituiApp, context: str) -> None:
    """The storm's invariant: nothing raised out of a handler, timer or worker, and the app still runs."""
    error = app._exception
    if error is not None:
        where = "".join(traceback.format_exception(error)[-12:])
        raise AssertionError(f"{context}\nunhandled {type(error).__name__}: {error}\n{where}") from error
    if not app.is_running or app._exit:
        raise AssertionError(f"{context}\nthe app stopped (return code {app.return_code})")


async def close_every_screen(app: KimituiApp, context: str, presses: int = 30) -> None:
    """Escape until the main screen is on top, unmaximised: every screen a storm opened must close this way."""
    for _ in range(presses):
        if len(app.screen_stack) == 1 and app.screen.maximized is None:
            return
        storm_press(app, "escape")
        await asyncio.sleep(0.15)
        alive(app, context)
    stack = [type(s).__name__ for s in app.screen_stack]
    raise AssertionError(f"{context}\n{presses} escapes left the screens {stack} open "
                         f"(maximised: {app.screen.maximized})")
