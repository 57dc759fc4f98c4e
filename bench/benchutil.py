"""What several benchmarks share: this process's RSS, a module as it was at another revision, and the PASS/FAIL
line each prints beside its figure (with the load average)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """Resident set size of this process, in MB (from /proc, no extra dependency)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 1e6


def module_at_revision(rev: str, path: str, name: str) -> ModuleType:
    """``path`` (relative to the repository) as it was at git ``rev``, imported as module ``name``.

    For A/B figures in one run: the old code beside the new, measured at the same moment."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(text)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def load_average() -> str:
    """The 1/5/15-minute load average: said beside every figure (this box is shared; a figure means little alone)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def verdict(name: str, figure: str, goal: str, ok: bool) -> bool:
    """One line a person and ``bench/quick.py`` both read: ``PASS  name: figure  (goal: goal; load average ...)``.

    Every benchmark prints one per goal it checks, so a regression reads FAIL the day it happens (issue 33)."""
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {figure}  (goal: {goal}; {load_average()})", flush=True)
    return ok


def exit_on(results: list[bool]) -> None:
    """Exit 1 when any goal failed (``bench/quick.py`` and CI read the status), else return."""
    if not all(results):
        sys.exit(1)
