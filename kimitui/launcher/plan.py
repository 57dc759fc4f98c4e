"""What a swap would do, before the operator confirms: the controller's ``plan_swap``.

Combines the preflight (lint errors refuse the swap), the diff against what
runs, and the confound guard against the host's baseline into the
:class:`SwapPlan` the cockpit shows (the UI's port, ``kimitui.control``, re-uses it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kimitui.launcher import guard
from kimitui.profiles import Profile, diff_profiles, lint_profile


@dataclass(frozen=True)
class SwapPlan:
    """What a swap would change, shown before the operator confirms."""

    target: str
    running: str | None
    baseline: str | None
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """knob -> (running value, target value)."""
    confounded: bool = False
    warnings: list[str] = field(default_factory=list)
    """What needs attention: the confound warning, lint warnings ("has no effect in this SGLang", said only
    where the swap changes that knob)."""
    errors: list[str] = field(default_factory=list)
    """Lint errors: the swap would be refused."""
    variants: list[str] = field(default_factory=list)
    """Single-knob alternatives (profile names) offered instead of a confounded change: ones that can matter."""
    notes: list[str] = field(default_factory=list)
    """Facts and good news, no warning: one knob changed from the baseline, back at the baseline."""


def plan_swap(target: Profile, *, running: Profile | None, baseline: Profile | None) -> SwapPlan:
    """What swapping ``running`` (None: nothing runs) to ``target`` would change, judged against ``baseline``."""
    errors = [f"{i.field}: {i.message}" for i in lint_profile(target) if i.severity == "error"]
    changes: dict[str, tuple[Any, Any]] = {}
    if running is not None:
        changes = dict(diff_profiles(running, target).changes)
    warnings: list[str] = []
    notes: list[str] = []
    variants: list[str] = []
    confounded = False
    reference = baseline if baseline is not None else running
    if reference is not None:
        report = guard.check(reference, target, changed=changes if running is not None else None)
        confounded = report.confounded
        if report.changes:
            (warnings if report.severity == "warning" else notes).append(report.message)
        warnings += report.warnings
        variants = [v.name for v in report.offers if v.existing]  # a button can only swap to a profile that exists
        if baseline is not None and target.name == baseline.name and not report.changes:
            notes.append(f"{target.name} is the baseline: back to the known-good profile")
    else:
        warnings += guard.lint_warnings(target, None)
    return SwapPlan(
        target=target.name,
        running=running.name if running is not None else None,
        baseline=baseline.name if baseline is not None else None,
        changes=changes,
        confounded=confounded,
        warnings=warnings,
        errors=errors,
        variants=variants,
        notes=notes,
    )
