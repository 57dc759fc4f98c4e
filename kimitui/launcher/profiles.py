"""The few things the launcher needs from a profile, in one place.

The profile model lives in ``kimitui.profiles``; this adapter keeps the
launcher's use of it narrow (name, port, argv, env, unit, where it came from).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def profile_name(profile: Any) -> str:
    return str(getattr(profile, "name", None) or profile)


def profile_port(profile: Any) -> int | None:
    port = getattr(profile, "port", None)
    return int(port) if port is not None else None


def profile_source(profile: Any) -> str | None:
    src = getattr(profile, "source_path", None)
    return str(src) if src else None


def sim_python(host: Any) -> str | None:
    """The Python that runs the simulator on ``host``: this one locally, the host's configured one remotely."""
    from kimitui.host.local import LocalHost

    if isinstance(host, LocalHost):
        return None  # render_argv's default: sys.executable
    return getattr(host, "python", None)


def argv_for(profile: Any, *, simulated: bool, python: str | None = None, sim_args: Sequence[str] = ()) -> list[str]:
    """The exact argument list that runs this profile (the simulator on the sim host, plus ``sim_args``)."""
    from kimitui.profiles import render_argv

    if not simulated:
        return [str(a) for a in render_argv(profile, python=python)]
    return [str(a) for a in render_argv(profile, simulated=True, python=python, sim_args=tuple(sim_args))]


def env_for(profile: Any) -> dict[str, str]:
    env = getattr(profile, "env", None) or {}
    return {str(k): str(v) for k, v in dict(env).items()}


def load(name_or_path: str, extra_dirs: list[str] | None = None) -> Any:
    from kimitui.profiles import load_profile

    return load_profile(name_or_path, extra_dirs)
