"""What quitting the cockpit does to the host's server: the rule, in words for the confirmation."""

from __future__ import annotations


def stops_server_on_quit(*, simulated: bool, started_here: bool, found_at_start: bool) -> bool:
    """Only on the simulated host, and only when this kimitui brought its server up from nothing."""
    return simulated and started_here and not found_at_start


def quit_rule(*, busy: str | None, simulated: bool, found_at_start: bool, host_name: str,
              first_start: bool = False) -> str:
    """The quit confirmation's sentences: the work under way, then the server's fate.

    ``first_start``: the swap under way starts a server from nothing that quitting stops anyway."""
    parts = []
    if busy == "swap" and first_start:
        parts.append("The server still starting is stopped at once (nothing ran before it), then kimitui exits.")
        return " ".join(parts)
    if busy == "swap":
        parts.append("The swap under way is finished or rolled back first (its progress stays on screen), "
                     "then kimitui exits.")
    elif busy == "sweep":
        parts.append("The sweep is stopped; everything so far stays in the recording.")
    if not simulated:
        parts.append(f"The server on {host_name} keeps running: quitting never stops a real host's server.")
    elif found_at_start:
        parts.append("The simulated server was running before this kimitui started, so it keeps running.")
    else:
        parts.append("The simulated server this kimitui started is stopped (on a real host it would keep running).")
    return " ".join(parts)
