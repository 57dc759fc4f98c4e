"""The few things the launcher needs from a profile, in one place.

The profile model lives in ``kimitui.profiles``; this adapter keeps the
launcher's use of it narrow (name, port, argv, env, unit, where it came from).
"""

from __future__ import annotations

from collections.abc import Sequence

from kimitui.host.base import Host
from kimitui.host.local import LocalHost
from kimitui.profiles import Profile, load_profile, render_argv


def profile_name(profile: Profile) -> str:
    return profile.name


def profile_port(profile: Profile) -> int | None:
    return profile.port


def profile_source(profile: Profile) -> str | None:
    return str(profile.source_path) if profile.source_path else None


def sim_python(host: Host) -> str | None:
    """The Python that runs the simulator on ``host``: this one locally, the host's configured one remotely."""
    if isinstance(host, LocalHost):
        return None  # render_argv's default: sys.executable
    return host.python


def argv_for(profile: Profile, *, simulated: bool, python: str | None = None, sim_args: Sequence[str] = ()) -> list[str]:
    """The exact argument list that runs this profile (the simulator on the sim host, plus ``sim_args``)."""
    if not simulated:
        return [str(a) for a in render_argv(profile, python=python)]
    return [str(a) for a in render_argv(profile, simulated=True, python=python, sim_args=tuple(sim_args))]


def env_for(profile: Profile) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(profile.env or {}).items()}


def load(name_or_path: str, extra_dirs: Sequence[str] | None = None) -> Profile:
    """The profile by name or path (the shipped ones, the user's, then ``extra_dirs``)."""
    return load_profile(name_or_path, extra_dirs)
