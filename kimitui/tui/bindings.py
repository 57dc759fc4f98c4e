"""The cockpit's keys: every binding has an id (``kimitui.<name>``) so the config's ``[keys]`` remaps it."""

from __future__ import annotations

from textual.binding import Binding

LIVE_ONLY = {"pick_profile", "swap_baseline", "sweep", "baseline", "record", "autopilot"}
"""Actions hidden (and inert) in a replay."""
REPLAY_ONLY = {"play_pause", "speed", "seek", "jump"}
"""Actions shown only when the controller offers replay controls."""
FLEET_ONLY = {"focus_host", "fleet_gpus"}
"""Actions shown only in a session of several hosts (live or replayed)."""
FOOTER_WHEN = {"experts", "toggle_maximize", "jump", "newest_straggler"}
"""Keys bound twice under one id: ``action(True)`` is the footer's copy, shown only when :func:`footer_shows`
says so; ``action`` (hidden) works everywhere, and help and the palette list the key once."""
FOOTER_ROOM = 128
"""Columns the footer needs for every key plus ``h experts`` with the log focused (its four keys shown)."""
STRAGGLER_KEYS_ROOM = (100, 150)
"""Columns from which the footer lists ``j`` and ``x``: (another panel focused, the log focused: its four keys
shown too).  Below, help and the palette still list them, and ``q quit`` and ``^p palette`` stay on screen."""


def footer_shows(action: str, experts_useful: bool, width: int, log_focused: bool = False) -> bool:
    """Whether the footer lists ``action``'s key now: ``h`` where the running server spreads its experts
    over the GPUs (or reports their load); ``z`` gives it its room below :data:`FOOTER_ROOM` columns (so
    ``q quit`` and ``^p palette`` stay visible at 120); ``j`` and ``x`` from :data:`STRAGGLER_KEYS_ROOM` up."""
    if action == "experts":
        return experts_useful
    if action in ("jump", "newest_straggler"):
        return width >= STRAGGLER_KEYS_ROOM[log_focused]
    if action == "toggle_maximize":
        return not experts_useful or width >= FOOTER_ROOM
    return True


def key(keys: str, action: str, description: str, *, show: bool = True, name: str | None = None) -> Binding:
    """A binding with an id (``kimitui.<name>``) so the config's ``[keys]`` can remap it."""
    return Binding(keys, action, description, show=show, id=f"kimitui.{name or action.split('(')[0]}")


PROFILE_BINDINGS = [  # named on the profile bar above the footer (widgets/profile_bar.py), not in it
    key(str(i), f"pick_profile({i})", f"profile {i}", show=False, name=f"profile_{i}")
    for i in range(1, 10)
]

BINDINGS = [
    *PROFILE_BINDINGS,
    key("s", "sweep", "sweep"),
    key("b", "baseline", "baseline"),
    key("n", "note", "note"),
    key("m", "marker", "marker", show=False),
    key("r", "record", "rec", show=False),
    key("z", "toggle_maximize(True)", "max", name="toggle_maximize"),
    key("z", "toggle_maximize", "max", show=False),
    key("c", "compare", "compare"),
    key("a", "autopilot", "autopilot", show=False),
    key("g", "gpu_processes", "gpu procs", show=False),
    key("o", "focus_host(1)", "next host", name="next_host"),
    key("O", "focus_host(-1)", "prev host", show=False, name="prev_host"),
    key("G", "fleet_gpus", "all GPUs", show=False),
    key("h", "experts(True)", "experts", name="experts"),
    key("h", "experts", "experts", show=False),
    key("f", "log_severity", "log severity", show=False),
    key("t", "log_kind", "log kind", show=False),
    key("slash", "log_search", "search", show=False),
    key("p", "log_pause", "pause log", show=False),
    key("escape", "minimize", "restore", show=False),
    key("question_mark", "help", "help"),
    key("q", "quit", "quit"),
    key("space", "play_pause", "play/pause"),
    key("plus", "speed(2.0)", "faster", show=False, name="speed_up"),
    key("minus", "speed(0.5)", "slower", show=False, name="speed_down"),
    key("left_square_bracket", "seek(-30)", "back 30s", show=False, name="seek_back"),
    key("right_square_bracket", "seek(30)", "fwd 30s", show=False, name="seek_forward"),
    key("j", "jump('straggler', True, True)", "next straggler", name="next_straggler"),
    key("j", "jump('straggler', True)", "next straggler", show=False, name="next_straggler"),
    key("J", "jump('straggler', False)", "prev straggler", show=False, name="prev_straggler"),
    key("x", "newest_straggler(True)", "newest straggler", name="newest_straggler"),
    key("x", "newest_straggler", "newest straggler", show=False),
    key("w", "jump('profile_switch', True)", "next switch", show=False, name="next_switch"),
    key("W", "jump('profile_switch', False)", "prev switch", show=False, name="prev_switch"),
    key("e", "jump('error', True)", "next error", show=False, name="next_error"),
    key("E", "jump('error', False)", "prev error", show=False, name="prev_error"),
    key("k", "jump('marker', True)", "next marker", show=False, name="next_marker"),
    key("K", "jump('marker', False)", "prev marker", show=False, name="prev_marker"),
]
