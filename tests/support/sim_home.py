"""A kimitui home for the embedded simulated host inside one folder: every platform directory, a cwd whose
./profiles refines the shipped profiles the cockpit's tests and screenshots use to one free port and a fast
clock.  Used by the ``sim_home`` fixture (tests/conftest.py) and by tests/support/story_shots.py."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]

SIM_HOME_PROFILES = ("ep8-tuned", "ep8-v2", "ep8-eplb", "ep8-dflash")
"""The shipped profiles refined locally (same name, so they win)."""

PLATFORM_DIRS = (("TMPDIR", "tmp"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data"),
                 ("XDG_CONFIG_HOME", "config"))
CLEARED = ("KIMITUI_SIM_STATE", "KIMITUI_CONFIG", "KIMITUI_PROFILES")


def make_sim_home(root: Path, setenv: Callable[[str, str], None], delenv: Callable[[str], None],
                  chdir: Callable[[Path], None], *, time_scale: float = 40.0,
                  sweep_defaults: dict | None = None) -> Path:
    """Lay out ``root`` and point the environment at it (through the callables: a test's monkeypatch, or
    os.environ for a script); returns ``root``."""
    for var, sub in PLATFORM_DIRS:
        (root / sub).mkdir(parents=True, exist_ok=True)
        setenv(var, str(root / sub))
    for var in CLEARED:
        delenv(var)
    cwd = root / "cwd"
    (cwd / "profiles").mkdir(parents=True, exist_ok=True)
    chdir(cwd)
    port = free_port()
    for name in SIM_HOME_PROFILES:
        # a key is not inherited: the refinement keeps the shipped one (a new shipped profile moves no key)
        key = tomllib.loads((ROOT / "profiles" / f"{name}.toml").read_text()).get("key")
        declared = f'key = "{key}"\n' if key else ""
        (cwd / "profiles" / f"{name}.toml").write_text(
            f'extends = "{name}"\nport = {port}\n{declared}[sim]\ntime_scale = {time_scale}\n')
    if sweep_defaults:
        (root / "state" / "kimitui").mkdir(parents=True, exist_ok=True)
        (root / "state" / "kimitui" / "sweep-defaults.json").write_text(json.dumps(sweep_defaults))
    return root
