"""The recording format's vocabulary: header, errors, skipped lines, file names (see ``docs/recording-format.md``)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field

from kimitui import __version__
from kimitui.events import Event

FORMAT_NAME: Final = "kimitui-recording"
FORMAT_VERSION = 2
"""2: chunk offsets as integer deltas, gzip written while recording; readers take 1 and 2."""

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
    """``X.jsonl`` -> ``X.jsonl.gz`` (before format 2 the writer compressed on close, under this name)."""
    p = Path(path)
    return p if p.name.endswith(".gz") else p.with_name(p.name + ".gz")


def live_path(path: PathLike) -> Path:
    """``X.jsonl.gz`` -> ``X.jsonl`` (where a writer before format 2 appended until it closed)."""
    p = Path(path)
    return p.with_name(p.name[:-3]) if p.name.endswith(".gz") else p


def resolve_path(path: PathLike) -> Path:
    """The file that holds the recording ``path`` names (plain or compressed; old writers renamed on close)."""
    p = Path(path)
    if p.exists():
        return p
    for alt in (final_path(p), live_path(p)):
        if alt.exists():
            return alt
    raise RecordingError(f"{p}: no such recording")


_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


NAME_PROFILES_MAX = 64
"""Characters of a default name given to the profiles; the rest are counted (``+3more``)."""


def profiles_label(profiles: Sequence[str]) -> str:
    """``ep8-tuned+ep8-v2``: the profiles a recording holds, in order, at most ``NAME_PROFILES_MAX`` characters."""
    names = [_SAFE.sub("_", p) for p in dict.fromkeys(p for p in profiles if p)]
    if not names:
        return ""
    label = names[0][:NAME_PROFILES_MAX]
    for i, name in enumerate(names[1:], start=1):
        more = f"+{len(names) - i}more"
        if len(label) + 1 + len(name) + (len(more) if i < len(names) - 1 else 0) > NAME_PROFILES_MAX:
            return label + more
        label += "+" + name
    return label


def default_recording_path(host: str, profile: str | Sequence[str] | None, *, base: PathLike | None = None,
                           when: float | None = None) -> Path:
    """``<data dir>/recordings/<host>-<YYYYmmdd-HHMMSS>[-<profiles>].jsonl.gz``.

    ``profile`` is one name or every profile that ran (joined by ``+``, see :func:`profiles_label`).
    ``base`` replaces ``platformdirs.user_data_dir("kimitui")`` (tests, ``--data-dir``).
    """
    if base is None:
        base = platformdirs.user_data_dir("kimitui")
    stamp = datetime.fromtimestamp(time.time() if when is None else when).strftime("%Y%m%d-%H%M%S")
    label = profiles_label([profile] if isinstance(profile, str) else profile or [])
    suffix = f"-{label}" if label else ""
    name = f"{_SAFE.sub('_', host) or 'host'}-{stamp}{suffix}.jsonl.gz"
    return Path(base) / "recordings" / name
