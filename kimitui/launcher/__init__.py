"""Safe profile swaps: launchers (plain process, systemd), readiness, rollback, confound guard.

Import the module you need (``kimitui.launcher.swap``, ``.plan``, ``.guard``, ...): the package
itself imports nothing, so a replay that only needs :class:`~kimitui.launcher.plan.SwapPlan`
does not load the launchers.
"""
