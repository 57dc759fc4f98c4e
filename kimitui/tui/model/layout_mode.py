"""Which layout the cockpit shows: the screen follows what the operator is doing (no Textual here).

* ``monitor``: no sweep yet, or the profile changed since the last one (a swap, a new server coming
  up).  The GPUs, the server's figures over time and the log get the room; the sweep area is one
  strip: the last sweep's summary and "press s".
* ``sweep``: a sweep is running, or the last one measured the profile that is serving now.  The curve
  and the per-request spread get the room, with the level table beside the log.

Charts with nothing to draw do not take 40 % of the screen: before the first sweep there is nothing
on them, and after a swap their figures belong to the profile that is gone (its curve stays
overlaid on the next sweep, and in the strip's summary).
"""

from __future__ import annotations

from typing import Literal

from kimitui.tui.model.cockpit_state import CockpitModel

LayoutMode = Literal["monitor", "sweep"]


def layout_mode(model: CockpitModel) -> LayoutMode:
    """``sweep`` while a sweep runs and after it until the profile changes; ``monitor`` otherwise."""
    sw = model.sweep
    if sw is None:
        return "monitor"
    if sw.outcome is None:
        return "sweep"
    switch = model.last_switch
    if switch is not None and switch.t > sw.outcome.t:
        return "monitor"
    if model.profile is not None and sw.profile is not None and model.profile != sw.profile:
        return "monitor"
    if model.profile_state in ("starting", "stopping"):
        return "monitor"
    return "sweep"
