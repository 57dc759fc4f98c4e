"""What the headless commands share: the host they act on, one-line errors, a swap's progress bar.

Every headless command that talks to a host (``status``, ``stop``, ``swap``,
``logs follow``) starts the same way: the host named by ``--host`` (else the
config's default, else the simulated host ``sim``), connected for the work and
closed after it, a config problem or a host error printed as one line with exit
code 2 instead of a traceback.  :func:`on_host` is that preamble.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from kimitui.config import Config, ConfigError, load_config
from kimitui.events import Event, SwapProgress
from kimitui.host.base import Host, HostError
from kimitui.hosts_from_config import make_host
from kimitui.launcher.readiness import PHASES
from kimitui.session import Session

if TYPE_CHECKING:
    from kimitui.export.otlp import OtlpExport

EXIT_HOST_PROBLEM = 2
"""A bad config, an unknown ``--host``, an unreachable host: the operator fixes something and retries."""


class HostChoiceError(Exception):
    """The ``--host`` asked for is not configured (the message lists the ones that are)."""


def open_host(args: argparse.Namespace) -> Host:
    """The host named by ``--host`` (else the config's default); the simulated host ``sim`` when none.

    Raises HostChoiceError with the config's own message (file:line, the hosts it knows).
    """
    try:
        return make_host(load_config(args.config), args.host, None)
    except ConfigError as exc:
        raise HostChoiceError(str(exc)) from exc


def print_error(console: Console, problem: BaseException | str) -> None:
    """``error: ...`` in red, the message escaped (it may hold brackets)."""
    console.print(f"[red]error[/]: {escape(str(problem))}")


ErrorReport = Callable[[BaseException], None]
"""How a command says what stopped it (``error: ...`` in red, or its own prefix on stderr)."""


async def on_host(args: argparse.Namespace, work: Callable[[Host], Awaitable[int]], report: ErrorReport) -> int:
    """``work(host)`` on the connected ``--host``: its exit code, or 2 after ``report`` said what failed.

    The failures are a config that cannot be read, a host it does not name, and any
    HostError while connecting or working (unreachable, a changed host key, refused
    credentials).
    """
    try:
        host = open_host(args)
    except Exception as exc:  # noqa: BLE001 - a bad config file is reported, not raised
        report(exc)
        return EXIT_HOST_PROBLEM
    try:
        async with host:
            return await work(host)
    except HostError as exc:
        report(exc)
        return EXIT_HOST_PROBLEM


def console_errors(console: Console) -> ErrorReport:
    """The report of ``status``, ``stop`` and ``swap``: ``error: ...`` on their console."""
    return lambda exc: print_error(console, exc)


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
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> "SwapBar":
        self.progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.__exit__(exc_type, exc, tb)

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


def start_otlp_if_asked(args: argparse.Namespace, session: Session, config: Config | None = None) -> OtlpExport | None:
    """Finished sweeps as traces to the collector ``--otlp-endpoint`` or ``[otlp] endpoint`` names (the flag wins);
    None when neither does.  The SDK is imported only then (it costs ~0.2 s)."""
    if config is None:
        try:
            config = load_config(getattr(args, "config", None))
        except ConfigError:
            return None  # the command reports its own config problems
    endpoint = getattr(args, "otlp_endpoint", None) or config.otlp.endpoint
    if not endpoint:
        return None
    from kimitui.export.otlp import start_otlp  # noqa: PLC0415

    return start_otlp(session, endpoint, headers=dict(config.otlp.headers), rates=config.cost.rates())
