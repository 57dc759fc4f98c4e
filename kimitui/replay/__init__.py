"""Replay: a recording re-published into a Session, so the cockpit shows it as it was.

* :class:`Replayer` — plays a recording into a Session at a speed factor, with
  pause, state-rebuilding seek and jumps (see :mod:`kimitui.replay.replayer`);
* :class:`ReplayController` — the cockpit's :class:`~kimitui.control.Controller`
  for ``kimitui replay FILE`` (``live = False``).
"""

from kimitui.replay.controller import ReplayController
from kimitui.replay.replayer import (
    HIGH_RATE_KINDS,
    HISTORY_KINDS,
    JUMP_KINDS,
    LATEST_KINDS,
    LEVEL_DETAIL_KINDS,
    Replayer,
)

__all__ = [
    "HIGH_RATE_KINDS",
    "HISTORY_KINDS",
    "JUMP_KINDS",
    "LATEST_KINDS",
    "LEVEL_DETAIL_KINDS",
    "ReplayController",
    "Replayer",
]
