"""What the headless ``swap``/``stop``/``status`` commands share: the host to act on, a progress bar."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kimitui.events import Event, SwapProgress
from kimitui.host.base import Host
from kimitui.launcher.readiness import PHASES

class HostChoiceError(Exception):
    """The ``--host`` asked for is not configured (the message lists the ones that are)."""


def open_host(args: argparse.Namespace) -> Host:
    """The host named by ``--host`` (else the config's default); the simulated host ``sim`` when none.

    Raises HostChoiceError with the config's own message (file:line, the hosts it knows).
    """
    from kimitui.config import ConfigError, load_config
    from kimitui.host import make_host

    try:
        return make_host(load_config(getattr(args, "config", None)), getattr(args, "host", None), None)
    except ConfigError as exc:
        raise HostChoiceError(str(exc)) from exc


def overall_fraction(phase: str, fraction: float | None) -> float:
    """A swap's progress 0..1 from its phase (and the fraction within it)."""
    if phase == "serving":
        return 1.0
    if phase not in PHASES:
        return 0.0
    i = PHASES.index(phase)
    return min(1.0, (i + (fraction or 0.0)) / len(PHASES))


class SwapBar:
    """A rich progress bar fed by SwapProgress events (a Session sink)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.fields[profile]}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> "SwapBar":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def __call__(self, event: Event) -> None:
        if not isinstance(event, SwapProgress):
            return
        task = self.tasks.get(event.profile)
        if task is None:
            task = self.progress.add_task(event.message, total=1.0, profile=event.profile)
            self.tasks[event.profile] = task
        if event.phase in PHASES:
            self.progress.update(task, completed=overall_fraction(event.phase, event.fraction), description=event.message)
        else:  # "failed": the bar stays where it stopped
            self.progress.update(task, description=event.message)
