"""What a swap would do, before the operator confirms: the controller's ``plan_swap``.

Combines the preflight (lint errors refuse the swap), the diff against what
runs, and the confound guard against the host's baseline into the
:class:`kimitui.control.SwapPlan` the cockpit shows.
"""

from __future__ import annotations

from typing import Any

from kimitui.control import SwapPlan
from kimitui.launcher import guard


def plan_swap(target: Any, *, running: Any | None, baseline: Any | None) -> SwapPlan:
    """``target``, ``running``, ``baseline``: Profiles (``running``/``baseline`` may be None)."""
    from kimitui.profiles import diff_profiles, lint_profile

    errors = [f"{i.field}: {i.message}" for i in lint_profile(target) if i.severity == "error"]
    changes: dict[str, tuple[Any, Any]] = {}
    if running is not None:
        changes = dict(diff_profiles(running, target).changes)
    warnings: list[str] = []
    variants: list[str] = []
    confounded = False
    reference = baseline if baseline is not None else running
    if reference is not None:
        report = guard.check(reference, target)
        confounded = report.confounded
        if report.changes:
            warnings.append(report.message)
        warnings += report.warnings
        variants = [v.name for v in report.variants]
    else:
        warnings += guard.check(target, target).warnings
    return SwapPlan(
        target=target.name,
        running=getattr(running, "name", None),
        baseline=getattr(baseline, "name", None),
        changes=changes,
        confounded=confounded,
        warnings=warnings,
        errors=errors,
        variants=variants,
    )
