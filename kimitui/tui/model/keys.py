"""When a cockpit key can fire, and which profile each number key picks (no Textual here: testable alone)."""

from __future__ import annotations

from kimitui.control import Controller, ProfileDirectories
from kimitui.profiles.keys import profile_keys as assign_profile_keys

SWAPPING_STATES = frozenset({"starting", "stopping"})
"""Profile states during which the server is changing under a swap."""


def blocked_reason(action: str, busy: str | None, profile_state: str, watched: str | None = None,
                   tuning: bool = False) -> str | None:
    """Why ``action`` cannot run now (the footer dims it, pressing it says this), or None.

    Mirrors what the controller would refuse, so a key never opens a dialog that
    can only end in "a swap is already running".  ``watched``: the URL of a server
    this session watches but did not start (never swapped).  ``tuning``: the autopilot runs; it swaps
    and sweeps by itself, so the operator's own swaps, sweeps and baselines wait for it.
    """
    if tuning and action in ("pick_profile", "sweep", "baseline"):
        return "the autopilot is running: a to pause, skip a step or stop it (it swaps and sweeps by itself)"
    if watched and action in ("pick_profile", "baseline", "autopilot"):
        return f"{watched} is watched, not controlled: kimitui did not start it, so it never swaps it"
    swapping = busy == "swap" or profile_state in SWAPPING_STATES
    if swapping:
        if action == "pick_profile":
            return "a swap is running: wait for it to finish (progress is in the header)"
        if action == "sweep":
            return "a swap is running: sweep once the new profile serves"
        if action == "baseline":
            return "a swap is running: mark the baseline once the new profile serves"
    if action == "autopilot" and not tuning and (swapping or busy == "sweep"):
        return f"a {'swap' if swapping else 'sweep'} is running: start the autopilot once it is over"
    if busy == "sweep" and action == "pick_profile":
        return "a sweep is running: stop it (s) before swapping profiles"
    return None


def profile_keys(controller: Controller) -> tuple[dict[str, str], list[str]]:
    """Key -> profile name for the number keys, and notes about the assignment.

    The live controller offers its profile directories and config: the keys then follow
    the same rule as ``kimitui profiles list`` (:mod:`kimitui.profiles.keys`).  Otherwise
    (a replay, a test double) the names are in key order.
    """
    if controller.live and isinstance(controller, ProfileDirectories):
        assignment = assign_profile_keys(controller.profile_dirs, order=controller.config.profiles.order)
        return assignment.by_key, assignment.notes
    names = controller.profile_names()
    return {str(i): name for i, name in enumerate(names[:9], start=1)}, []
