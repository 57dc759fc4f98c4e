"""Which cockpit key (1-9) each profile sits on, so that a key never moves under the operator's hand.

The rule, first match wins for each profile:

1. the profile's own ``key = "N"`` (two profiles declaring one key: an error from
   :func:`~kimitui.profiles.loader.key_clashes`; the one that held the key before keeps it);
2. the config's ``[profiles] order`` (``order[0]`` is key 1, ...), if no profile declares that key;
3. the key it had the last time kimitui listed profiles (remembered in the state directory);
4. the lowest key still free, preferring keys no absent profile remembers, in name order.

Adding a profile therefore never moves another's key: the newcomer only takes a free key.
More than nine profiles: the rest have no key (they are in the command palette).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kimitui.paths import state_dir
from kimitui.profiles.loader import key_clashes, scan_profiles
from kimitui.profiles.schema import PROFILE_KEYS, Profile

log = logging.getLogger(__name__)

MEMORY_FILE = "profile-keys.json"


@dataclass(frozen=True)
class KeyAssignment:
    """``by_key``: key -> profile name, in key order; ``notes``: config entries that could not be honoured."""

    by_key: dict[str, str]
    notes: list[str] = field(default_factory=list)

    def key_of(self, name: str) -> str | None:
        return next((k for k, n in self.by_key.items() if n == name), None)


def assign_keys(profiles: Sequence[Profile] | Mapping[str, str | None], order: Sequence[str] = (),
                remembered: Mapping[str, str] | None = None) -> KeyAssignment:
    """Keys for ``profiles`` (Profile objects, or name -> declared key); pure, see the module rule."""
    declared = ({p.name: p.key for p in profiles} if not isinstance(profiles, Mapping) else dict(profiles))
    remembered = {n: k for n, k in (remembered or {}).items() if k in PROFILE_KEYS}
    names = sorted(declared)
    taken: dict[str, str] = {}  # key -> name
    notes: list[str] = []
    # 1. declared; on a clash the previous holder keeps it, else the first by name
    for name in sorted(names, key=lambda n: (remembered.get(n) != declared[n], n)):
        k = declared[name]
        if k is not None and k not in taken:
            taken[k] = name
    placed = set(taken.values())
    # 2. the config's order
    for i, name in enumerate(order[: len(PROFILE_KEYS)]):
        k = PROFILE_KEYS[i]
        if name not in declared or name in placed:
            continue
        if k in taken:
            notes.append(f"[profiles] order puts {name} on key {k}, but {taken[k]} declares key {k}")
            continue
        taken[k] = name
        placed.add(name)
    # 3. remembered
    for name in names:
        k = remembered.get(name)
        if name not in placed and k is not None and k not in taken:
            taken[k] = name
            placed.add(name)
    # 4. the lowest free key, keys remembered by absent profiles last
    absent = {k for n, k in remembered.items() if n not in declared}
    free = [k for k in PROFILE_KEYS if k not in taken and k not in absent] + \
           [k for k in PROFILE_KEYS if k not in taken and k in absent]
    for name in names:
        if name not in placed and free:
            taken[free.pop(0)] = name
            placed.add(name)
    return KeyAssignment(dict(sorted(taken.items())), notes)


def memory_path() -> Path:
    return state_dir() / MEMORY_FILE


def load_memory(path: Path | None = None) -> dict[str, str]:
    """Profile name -> the key it last had; an unreadable file is an empty memory."""
    try:
        data = json.loads((path or memory_path()).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(n): str(k) for n, k in data.items()} if isinstance(data, dict) else {}


def save_memory(assignment: KeyAssignment, previous: Mapping[str, str], path: Path | None = None) -> None:
    """Remember this assignment; absent profiles stay remembered unless their key went to another."""
    given = set(assignment.by_key)
    merged = {n: k for n, k in previous.items() if k not in given}
    merged.update({n: k for k, n in assignment.by_key.items()})
    if merged == dict(previous):
        return
    target = path or memory_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")  # two cockpits never share a temp file
        tmp.write_text(json.dumps(dict(sorted(merged.items())), indent=1), encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:  # keys still work this time; they may move next time
        log.warning("cannot remember profile keys in %s: %s", target, exc)


def stable_keys(profiles: Sequence[Profile], order: Sequence[str] = (), path: Path | None = None) -> KeyAssignment:
    """:func:`assign_keys` with the remembered keys, and remember the result."""
    previous = load_memory(path)
    assignment = assign_keys(profiles, order, previous)
    save_memory(assignment, previous, path)
    return assignment


def profile_keys(extra_dirs: Sequence[Path | str] | None = None, order: Sequence[str] = ()) -> KeyAssignment:
    """The keys of every valid visible profile (what ``kimitui profiles list`` and the cockpit show).

    Key clashes are in ``notes`` too, so the cockpit can say them.
    """
    good, _bad = scan_profiles(extra_dirs)
    assignment = stable_keys(good, order)
    return KeyAssignment(assignment.by_key, [str(e) for e in key_clashes(good)] + assignment.notes)
