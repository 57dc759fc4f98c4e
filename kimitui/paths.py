"""Where kimitui keeps its small state on the operator's machine.

Its own module because both the launcher (baselines) and the profiles (the
keys they last had) write there, and neither should import the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

STATE_ENV = "KIMITUI_STATE_DIR"


def state_dir() -> Path:
    """``$KIMITUI_STATE_DIR``, else platformdirs' ``user_state_dir("kimitui")``."""
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else Path(platformdirs.user_state_dir("kimitui"))
