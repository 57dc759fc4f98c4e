"""The one way the live controller loads a profile."""

from __future__ import annotations

from kimitui.launcher.profiles import load
from kimitui.profiles import Profile, scan_profiles
from kimitui.profiles.deploy import on_port


class ProfileBook:
    """Profiles by name or path, from the shipped, the user's and the configured folders.

    ``sim_port``: on the simulated host every profile serves there (``--sim-port`` / ``[sim] port``)."""

    def __init__(self, dirs: list[str], sim_port: int | None = None) -> None:
        self.dirs = dirs
        self.sim_port = sim_port

    def load(self, name_or_path: str) -> Profile:
        """The profile as written (raises ProfileError)."""
        return load(name_or_path, self.dirs)

    def names(self) -> list[str]:
        good, _errors = scan_profiles(self.dirs)
        return [p.name for p in good]

    def target(self, name: str, *, simulated: bool) -> Profile:
        """The profile as it will run here: on the simulated host, on ``sim_port`` when one is set."""
        profile = self.load(name)
        if simulated and self.sim_port is not None:
            profile = on_port(profile, self.sim_port)  # a PD deployment moves whole
        return profile

    def at_port(self, name: str, port: int | None) -> Profile:
        """The profile as it really serves: ``port`` is its run record's (a sim port, say)."""
        profile = self.load(name)
        return on_port(profile, port) if port else profile
