"""Which launch knobs differ between two profiles, and whether the change is confounded.

Changing two knobs at once (the seeds' ``ep8-v2``) makes a result impossible to
attribute; the diff says so plainly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kimitui.profiles.schema import Profile


@dataclass(frozen=True)
class ProfileDiff:
    """Knob -> (value in a, value in b), for the knobs that differ, in field order."""

    a: str
    b: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def confounded(self) -> bool:
        """More than one launch knob differs: an effect cannot be attributed to one of them."""
        return len(self.changes) > 1

    @property
    def knobs(self) -> list[str]:
        return list(self.changes)

    def lines(self) -> list[str]:
        """``num_continuous_decode_steps: 8 -> 16``, one line per changed knob."""
        return [f"{knob}: {show_value(old)} -> {show_value(new)}" for knob, (old, new) in self.changes.items()]

    def warning(self) -> str | None:
        """``confounded: 2 knobs changed (enable_eplb, num_continuous_decode_steps)`` or None."""
        if not self.confounded:
            return None
        names = ", ".join(sorted(self.changes))
        return f"confounded: {len(self.changes)} knobs changed ({names})"

    def as_event_diff(self) -> dict[str, list[Any]]:
        """The shape ``ProfileSwitch.diff`` wants: knob -> [from, to]."""
        return {k: [old, new] for k, (old, new) in self.changes.items()}


def show_value(value: object) -> str:
    """A knob's value as the diff prints it: ``(default)`` for unset, TOML's true/false, a quoted odd string."""
    if value is None:
        return "(default)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and value.strip() == value else repr(value)
    return str(value)


def _flat_knobs(profile: Profile) -> dict[str, Any]:
    """``knobs()`` with ``env`` spread out as ``env.NAME`` (each variable is its own knob)."""
    knobs = profile.knobs()
    env = knobs.pop("env")
    knobs.update({f"env.{k}": v for k, v in sorted(env.items())})
    return knobs


def diff_profiles(a: Profile, b: Profile) -> ProfileDiff:
    """The launch knobs (``Profile.knobs``) whose values differ from ``a`` to ``b``.

    Environment variables count one by one (``env.NCCL_P2P_DISABLE: (default) -> 1``).
    """
    ka, kb = _flat_knobs(a), _flat_knobs(b)
    keys = list(ka) + [k for k in kb if k not in ka]
    changes = {k: (ka.get(k), kb.get(k)) for k in keys if ka.get(k) != kb.get(k)}
    return ProfileDiff(a=a.name, b=b.name, changes=changes)


def single_knob_alternatives(a: Profile, b: Profile, candidates: Iterable[Profile]) -> list[Profile]:
    """Candidates that make exactly one of the a -> b changes (same knob, same new value).

    For a confounded swap (``ep8-tuned -> ep8-v2``) this offers ``ep8-eplb`` and ``ep8-cont16``.
    """
    wanted = diff_profiles(a, b).changes
    found = []
    for c in candidates:
        changes = diff_profiles(a, c).changes
        if len(changes) == 1:
            (knob, (_, new)), = changes.items()
            if knob in wanted and wanted[knob][1] == new:
                found.append(c)
    return found
