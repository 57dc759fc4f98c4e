"""The recording format's vocabulary: header, errors, skipped lines, file names (see ``docs/recording-format.md``)."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kimitui import __version__
from kimitui.events import Event

FORMAT_NAME = "kimitui-recording"
FORMAT_VERSION = 1

PathLike = str | os.PathLike[str]


class RecordingError(Exception):
    """A file that is not a readable recording; the message names the file and line."""


class RecordingHeader(BaseModel):
    """Line 1 of every recording."""

    model_config = ConfigDict(extra="allow")

    format: Literal["kimitui-recording"] = FORMAT_NAME
    version: int = FORMAT_VERSION
    kimitui: str = __version__
    hosts: list[str] = Field(default_factory=list)
    started: float = Field(default_factory=time.time)
    """Wall-clock seconds when the writer was created."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form: the command line, profile, sweep spec... whatever the writer's owner adds."""


@dataclass(frozen=True)
class SkippedLine:
    line_no: int
    """1-based line number in the (decompressed) file."""
    reason: str


@dataclass
class Recording:
    """A whole recording in memory."""

    header: RecordingHeader
    events: list[Event]
    skipped: list[SkippedLine] = field(default_factory=list)
    path: Path | None = None


# --------------------------------------------------------------------------- file names


def final_path(path: PathLike) -> Path:
    """Where a closed (compressed) recording ends up: ``X.jsonl`` -> ``X.jsonl.gz``."""
    p = Path(path)
    return p if p.name.endswith(".gz") else p.with_name(p.name + ".gz")


def live_path(path: PathLike) -> Path:
    """Where a running writer appends: ``X.jsonl.gz`` -> ``X.jsonl``."""
    p = Path(path)
    return p.with_name(p.name[:-3]) if p.name.endswith(".gz") else p


def resolve_path(path: PathLike) -> Path:
    """The file that holds the recording ``path`` names (plain or compressed)."""
    p = Path(path)
    if p.exists():
        return p
    for alt in (final_path(p), live_path(p)):
        if alt.exists():
            return alt
    raise RecordingError(f"{p}: no such recording")


_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def default_recording_path(host: str, profile: str | None, *, base: PathLike | None = None,
                           when: float | None = None) -> Path:
    """``<data dir>/recordings/<host>-<YYYYmmdd-HHMMSS>[-<profile>].jsonl`` (live name; ``.gz`` on close).

    ``base`` replaces ``platformdirs.user_data_dir("kimitui")`` (tests, ``--data-dir``).
    """
    if base is None:
        import platformdirs

        base = platformdirs.user_data_dir("kimitui")
    stamp = datetime.fromtimestamp(time.time() if when is None else when).strftime("%Y%m%d-%H%M%S")
    suffix = f"-{_SAFE.sub('_', profile)}" if profile else ""
    name = f"{_SAFE.sub('_', host) or 'host'}-{stamp}{suffix}.jsonl"
    return Path(base) / "recordings" / name
