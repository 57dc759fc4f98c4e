"""Profiles as files: the model, the loader (search path, extends), lint, diff and render."""

from kimitui.profiles.errors import ProfileError
from kimitui.profiles.loader import (
    find_profile_file,
    list_profiles,
    load_profile,
    load_profile_file,
    profile_dirs,
    profile_files,
    scan_profiles,
    shipped_dir,
)
from kimitui.profiles.model import FAULTS, LAUNCH_KNOBS, LauncherSettings, Profile, SimSettings

__all__ = [
    "FAULTS",
    "LAUNCH_KNOBS",
    "LauncherSettings",
    "Profile",
    "ProfileError",
    "SimSettings",
    "find_profile_file",
    "list_profiles",
    "load_profile",
    "load_profile_file",
    "profile_dirs",
    "profile_files",
    "scan_profiles",
    "shipped_dir",
]
