"""Profiles as files: the model, the loader (search path, extends), lint, diff and render."""

from kimitui.profiles.deploy import ProcessSpec, deployment, entry_of
from kimitui.profiles.diff import ProfileDiff, diff_profiles, single_knob_alternatives
from kimitui.profiles.dump import profile_to_dict, profile_to_toml
from kimitui.profiles.errors import ProfileError
from kimitui.profiles.lint import LintIssue, has_errors, lint_profile
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
from kimitui.profiles.schema import FAULTS, LAUNCH_KNOBS, LauncherSettings, Profile, SimSettings
from kimitui.profiles.render import render_argv, render_command, render_unit

__all__ = [
    "FAULTS",
    "LAUNCH_KNOBS",
    "LauncherSettings",
    "LintIssue",
    "ProcessSpec",
    "ProfileDiff",
    "Profile",
    "ProfileError",
    "SimSettings",
    "deployment",
    "diff_profiles",
    "entry_of",
    "find_profile_file",
    "has_errors",
    "lint_profile",
    "list_profiles",
    "load_profile",
    "load_profile_file",
    "profile_dirs",
    "profile_files",
    "profile_to_dict",
    "profile_to_toml",
    "render_argv",
    "render_command",
    "render_unit",
    "scan_profiles",
    "shipped_dir",
    "single_knob_alternatives",
]
