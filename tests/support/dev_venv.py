"""The virtualenvs of their own that some tests run in (the real engine, SGLang's own parser).

Each lives in the user's cache (``kimitui-dev/<name>``) unless its environment variable names a folder
(CI builds them in the checkout), is ready once its mark exists (written last by its set-up), and is
rebuilt from nothing when an interrupted set-up left half of one.  Stdlib only: the set-up scripts run
under a bare ``python3``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def venv_dir(env_var: str, name: str) -> Path:
    """Where a venv lives: ``$env_var``, else the user's cache (as platformdirs gives it on Linux)."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var]).expanduser()
    try:
        import platformdirs

        cache = Path(platformdirs.user_cache_dir("kimitui-dev"))
    except ImportError:  # run by a bare python3: the same place platformdirs gives on Linux
        cache = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "kimitui-dev"
    return cache / name


def ready_python(venv: Path, mark: str) -> Path | None:
    """The venv's python, if its set-up finished (the mark is written last)."""
    py = venv / "bin" / "python"
    return py if (venv / mark).exists() and py.exists() else None


def fresh_venv(venv: Path, *, quiet: bool) -> list[str]:
    """A new, empty venv at ``venv`` (a half-built one removed first); returns its pip command."""
    if venv.exists():
        shutil.rmtree(venv)  # a half-built one from an interrupted set-up
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return [str(venv / "bin" / "python"), "-m", "pip", *(["-q"] if quiet else []), "--disable-pip-version-check"]


def python_or_skip(py: Path | None, venv: Path, what: str, script: str, require_var: str) -> Path:
    """``py``, or skip the test saying how to build the venv; a failure where ``$require_var`` is 1 (CI)."""
    if py is not None:
        return py
    import pytest

    why = f"no {what} venv at {venv}: build it with `python3 tests/support/{script} setup`"
    if os.environ.get(require_var) == "1":
        pytest.fail(why + f" ({require_var}=1)")
    pytest.skip(why)
