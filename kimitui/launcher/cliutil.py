"""What the headless ``swap``/``stop``/``status`` commands share: the host to act on, a progress bar."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kimitui.events import Event, SwapProgress
from kimitui.host.base import Host
from kimitui.launcher.readiness import PHASES

SIM_HOST = "sim"


class HostChoiceError(Exception):
    """The ``--host`` asked for is not configured (the message lists the ones that are)."""


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", metavar="NAME", help="configured host (default: the only/first one, else the simulated host 'sim')")


def open_host(args: argparse.Namespace) -> Host:
    """The host named by ``--host`` from the config; the simulated host when none is configured."""
    wanted = getattr(args, "host", None)
    config = None
    try:
        from kimitui import config as config_mod
    except ImportError:
        config_mod = None  # type: ignore[assignment]
    if config_mod is not None:
        config = config_mod.load_config(getattr(args, "config", None))
        hosts = list(getattr(config, "hosts", {}) or {})
        if wanted is None and hosts:
            wanted = hosts[0]
        if wanted is not None and (wanted in hosts or wanted != SIM_HOST):
            if wanted not in hosts:
                raise HostChoiceError(f"no host {wanted!r} in the config (configured: {', '.join(hosts) or 'none'}; or 'sim')")
            return config_mod.make_host(config, wanted, None)
    if wanted not in (None, SIM_HOST):
        raise HostChoiceError(f"no host {wanted!r} is configured (only the simulated host 'sim' is available)")
    from kimitui.host.local import LocalHost

    host = LocalHost(SIM_HOST)
    host.simulated = True  # type: ignore[attr-defined]
    return host


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
        self.progress.update(task, completed=overall_fraction(event.phase, event.fraction), description=event.message)
