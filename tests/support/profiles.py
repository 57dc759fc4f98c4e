"""Helpers for profile tests: an isolated search path, and writing profile files."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BASE = """\
model_path = "/models/m"
tp_size = 8
"""


def write_profile(directory: Path, name: str, body: str) -> Path:
    """Write ``<directory>/<name>.toml`` with ``body`` dedented; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


@dataclass
class ProfileDirs:
    """The search-path locations of one isolated test: cwd/profiles, the user dir, scratch."""

    cwd: Path
    local: Path
    user: Path
    tmp: Path


@pytest.fixture
def profile_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProfileDirs]:
    """cwd, XDG config home and $KIMITUI_PROFILES pointed into tmp_path (the shipped dir stays)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    yield ProfileDirs(cwd=cwd, local=cwd / "profiles", user=tmp_path / "xdg" / "kimitui" / "profiles", tmp=tmp_path)
