"""The one way the live controller loads a profile."""

from __future__ import annotations

from kimitui.launcher.profiles import load
from kimitui.profiles import Profile, scan_profiles


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
        if simulated and self.sim_port is not None and profile.port != self.sim_port:
            profile = profile.model_copy(update={"port": self.sim_port})
        return profile

    def at_port(self, name: str, port: int | None) -> Profile:
        """The profile as it really serves: ``port`` is its run record's (a sim port, say)."""
        profile = self.load(name)
        if port and port != profile.port:
            profile = profile.model_copy(update={"port": port})
        return profile
