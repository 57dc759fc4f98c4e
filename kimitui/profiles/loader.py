"""Find profile files, resolve ``extends`` chains, validate, and locate errors.

Search order (first match wins): each ``--profiles DIR``, each entry of
``$KIMITUI_PROFILES`` (``os.pathsep``-separated), ``./profiles``, the user's
config dir (``platformdirs.user_config_dir("kimitui")/profiles``), and the
profiles shipped inside the package.

``extends`` names a profile, which is looked up on that same search path: never
a file path, so a profile cannot reach outside the profile folders (a value
with ``/``, ``\\``, ``..`` or ``.toml`` is an error at its line; to extend a
profile kept elsewhere, add its folder with ``--profiles DIR`` or
``$KIMITUI_PROFILES``).  Every extends error names the file and line of the
``extends`` that caused it.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError

from kimitui.profiles.errors import ProfileError
from kimitui.profiles.schema import Profile
from kimitui.profiles.tomlpos import find_key_line

ENV_VAR = "KIMITUI_PROFILES"
SUFFIX = ".toml"
_MAX_DEPTH = 32
# Keys that belong to one file and are never inherited from a parent.
_NOT_INHERITED = ("name", "description", "extends", "key")
# Tables merged key by key (child wins per key); every other value is replaced whole.
_MERGED_TABLES = ("launcher", "sim", "env")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MAX_NAME = 250
"""A profile name's longest: ``NAME.toml`` must fit one file-name component (255 bytes)."""


def shipped_dir() -> Path:
    """The profiles that ship inside the package (``kimitui/data/profiles``)."""
    return Path(str(resources.files("kimitui") / "data" / "profiles"))


def user_dir() -> Path:
    return Path(platformdirs.user_config_dir("kimitui")) / "profiles"


def profile_dirs(extra_dirs: Sequence[Path | str] | None = None) -> list[Path]:
    """Directories searched for ``NAME.toml``, highest precedence first (duplicates dropped)."""
    candidates: list[Path] = [Path(d) for d in extra_dirs or ()]
    env = os.environ.get(ENV_VAR, "")
    candidates += [Path(p) for p in env.split(os.pathsep) if p]
    candidates += [Path.cwd() / "profiles", user_dir(), shipped_dir()]
    seen: set[Path] = set()
    dirs: list[Path] = []
    for d in candidates:
        d = d.expanduser()
        key = d.resolve() if d.exists() else d.absolute()
        if key not in seen:
            seen.add(key)
            dirs.append(d)
    return dirs


def _looks_like_path(name_or_path: str) -> bool:
    return name_or_path.endswith(SUFFIX) or "/" in name_or_path or os.sep in name_or_path


def find_profile_file(name: str, extra_dirs: Sequence[Path | str] | None = None, *, after: Path | None = None) -> Path:
    """The file for profile ``name``; with ``after``, only directories after that one count."""
    dirs = profile_dirs(extra_dirs)
    skip: Path | None = None
    if after is not None:
        resolved = [d.resolve() for d in dirs]
        after_r = after.resolve()
        if after_r in resolved:
            dirs = dirs[resolved.index(after_r) + 1 :]
        else:  # a file outside the search path: anything but itself
            skip = (after / f"{name}{SUFFIX}").resolve()
    for d in dirs:
        candidate = d / f"{name}{SUFFIX}"
        try:
            if candidate.is_file() and candidate.resolve() != skip:
                return candidate
        except OSError:  # a name too long for the file system, a folder we may not read: not there
            continue
    searched = ", ".join(str(d) for d in dirs) or "(no directories)"
    raise ProfileError(f"no profile named {name!r} (searched: {searched})")


def _read_toml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError("file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read: {exc}", path=path) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ProfileError(f"TOML syntax error: {message}", path=path, line=line) from None


class _Source:
    """One file in an extends chain: its data, text, and where it came from."""

    def __init__(self, path: Path, data: dict[str, Any], text: str) -> None:
        self.path = path
        self.data = data
        self.text = text

    def error(self, message: str, field: str) -> ProfileError:
        return ProfileError(message, path=self.path, line=find_key_line(self.text, field.split(".")), field=field)


def _check_name(src: _Source) -> None:
    stem = src.path.name[: -len(SUFFIX)] if src.path.name.endswith(SUFFIX) else src.path.stem
    name = src.data.get("name", stem)
    if not isinstance(name, str):
        raise src.error("must be a string", "name")
    if name != stem:
        raise src.error(f"name {name!r} does not match the file name {src.path.name!r}", "name")
    if not _NAME.match(name):
        raise src.error(f"invalid profile name {name!r} (letters, digits, '.', '_', '-')", "name")
    src.data["name"] = name


def _chain(path: Path, extra_dirs: Sequence[Path | str] | None) -> list[_Source]:
    """The profile at ``path`` and its ancestors, child first. Detects cycles."""
    chain: list[_Source] = []
    seen: dict[Path, str] = {}
    current: Path | None = path
    while current is not None:
        resolved = current.resolve()
        data, text = _read_toml(current)
        src = _Source(current, data, text)
        _check_name(src)
        if resolved in seen:
            cycle = " -> ".join([*(s.data["name"] for s in chain), src.data["name"]])
            raise chain[-1].error(f"extends cycle: {cycle}", "extends")
        seen[resolved] = src.data["name"]
        chain.append(src)
        if len(chain) > _MAX_DEPTH:  # the profile asked for is to blame, not whichever file is 33rd
            names = [s.data["name"] for s in chain]
            shown = " -> ".join([*names[:3], "...", *names[-2:]])
            raise chain[0].error(f"extends chain deeper than {_MAX_DEPTH} files ({shown}); extend a profile "
                                 "nearer the shipped ones", "extends")
        parent = data.get("extends")
        if parent is None:
            current = None
        elif not isinstance(parent, str) or not parent:
            raise src.error("must be a profile name", "extends")
        else:
            current = _resolve_parent(src, parent, extra_dirs)
    return chain


def _resolve_parent(src: _Source, parent: str, extra_dirs: Sequence[Path | str] | None) -> Path:
    """The file of the profile ``parent`` names, searched on the profile search path (never a path).

    A child may extend its own name: it then shadows and refines a profile of
    that name further down the search path (e.g. a local ``ep8-tuned`` that
    tweaks the shipped one).
    """
    shown = parent if len(parent) <= 60 else parent[:60] + f"... ({len(parent)} characters)"
    if _looks_like_path(parent) or "\\" in parent or ".." in parent:
        raise src.error(f"names a profile, not a file: {shown!r} (extends looks a name up on the profile "
                        "search path; for a profile in another folder add it with --profiles DIR "
                        f"or ${ENV_VAR})", "extends")
    if len(parent) > _MAX_NAME or not _NAME.match(parent):
        raise src.error(f"invalid profile name {shown!r} (letters, digits, '.', '_', '-'; "
                        f"at most {_MAX_NAME} characters)", "extends")
    try:
        if parent == src.data["name"]:
            return find_profile_file(parent, extra_dirs, after=src.path.parent)
        return find_profile_file(parent, extra_dirs)
    except ProfileError as exc:
        if parent == src.data["name"]:
            raise src.error(_no_parent_of_own_name(parent, src.path, extra_dirs), "extends") from None
        raise src.error(exc.message, "extends") from None


def _no_parent_of_own_name(name: str, path: Path, extra_dirs: Sequence[Path | str] | None) -> str:
    """Why a profile that extends its own name found nothing: the whole search path, its own folder marked."""
    own = path.parent.resolve()
    dirs = profile_dirs(extra_dirs)
    shown = ", ".join(f"{d} (this file's)" if d.resolve() == own else str(d) for d in dirs)
    where = f"in a folder after {path.parent}" if own in {d.resolve() for d in dirs} else f"other than {path}"
    return (f"no profile named {name!r} {where} (a profile that extends its own name refines the one a later "
            f"folder holds; search path, first wins: {shown})")


def _merge(chain: list[_Source]) -> tuple[dict[str, Any], dict[str, _Source]]:
    """Merge ancestors into the child (child wins); remember which file set each key."""
    merged: dict[str, Any] = {}
    origin: dict[str, _Source] = {}
    for depth, src in enumerate(reversed(chain)):
        is_child = depth == len(chain) - 1
        for key, value in src.data.items():
            if key in _NOT_INHERITED and not is_child:
                continue
            if key in _MERGED_TABLES and isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
                for sub in value:
                    origin[f"{key}.{sub}"] = src
            else:
                merged[key] = value
                for stale in [k for k in origin if k.startswith(f"{key}.")]:
                    del origin[stale]
                if isinstance(value, dict):
                    for sub in value:
                        origin[f"{key}.{sub}"] = src
            origin[key] = src
    return merged, origin


def _validation_error(exc: ValidationError, chain: list[_Source], origin: dict[str, _Source]) -> ProfileError:
    """The first validation error, pointing at the file that set the field."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    names = [p for p in err["loc"] if not isinstance(p, int)]
    field = ".".join(loc) if loc else "(profile)"
    src = None
    for n in range(len(names), 0, -1):
        src = origin.get(".".join(str(p) for p in names[:n]))
        if src is not None:
            break
    src = src or chain[0]
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field (not a profile setting; misspelt? free-form flags go in extra_args)"
    elif err["type"] == "missing":
        message = "required field is missing"
    more = len(exc.errors()) - 1
    if more:
        message += f" (and {more} more error{'s' if more > 1 else ''})"
    line = find_key_line(src.text, names) if names else None
    return ProfileError(message, path=src.path, line=line, field=field)


def load_profile_file(path: Path | str, extra_dirs: Sequence[Path | str] | None = None) -> Profile:
    """Load, inherit and validate the profile in ``path``."""
    path = Path(path).expanduser()
    chain = _chain(path, extra_dirs)
    merged, origin = _merge(chain)
    merged.pop("source_path", None)
    try:
        profile = Profile.model_validate(merged)
    except ValidationError as exc:
        raise _validation_error(exc, chain, origin) from None
    _check_deployment(profile, chain, origin)
    profile.source_path = path
    return profile


def _check_deployment(profile: Profile, chain: list[_Source], origin: dict[str, _Source]) -> None:
    """What one field cannot say alone: a multi-node profile needs ``dist_init_addr``; nodes and PD exclude each other."""

    def error(message: str, field: str) -> ProfileError:
        return (origin.get(field) or chain[0]).error(message, field)

    nodes = profile.nodes
    if len(nodes) > 1 and not profile.dist_init_addr:
        raise error(f"{len(nodes)} nodes need dist_init_addr = \"HOST:PORT\" (where the nodes meet: "
                    "--dist-init-addr, normally node 0's address)", "nodes")
    if len(set(nodes)) != len(nodes):
        raise error(f"a host may be named once: {nodes}", "nodes")
    if profile.pd is not None and len(nodes) > 1:
        raise error("a PD profile places its servers with pd.prefill/pd.decode `node`, not with nodes", "nodes")


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # e.g. a name too long for the file system
        return False


def load_profile(name_or_path: str, extra_dirs: Sequence[Path | str] | None = None) -> Profile:
    """A profile by name (searched in ``profile_dirs``) or by path (``x.toml`` or with a '/')."""
    if _looks_like_path(name_or_path) or _is_file(Path(name_or_path)):
        return load_profile_file(name_or_path, extra_dirs)
    if len(name_or_path) > _MAX_NAME or not _NAME.match(name_or_path):
        raise ProfileError(f"invalid profile name {name_or_path[:60]!r}")
    return load_profile_file(find_profile_file(name_or_path, extra_dirs), extra_dirs)


def profile_files(extra_dirs: Sequence[Path | str] | None = None) -> dict[str, Path]:
    """Every visible profile name -> the file that wins for it, sorted by name."""
    found: dict[str, Path] = {}
    for d in profile_dirs(extra_dirs):
        if not d.is_dir():
            continue
        for f in sorted(d.glob(f"*{SUFFIX}")):
            name = f.name[: -len(SUFFIX)]
            if f.is_file() and name not in found:
                found[name] = f
    return dict(sorted(found.items()))


def list_profiles(extra_dirs: Sequence[Path | str] | None = None) -> list[Profile]:
    """All valid visible profiles, sorted by name. Invalid files raise; see ``scan_profiles``."""
    return [load_profile_file(p, extra_dirs) for p in profile_files(extra_dirs).values()]


def scan_profiles(extra_dirs: Sequence[Path | str] | None = None) -> tuple[list[Profile], list[ProfileError]]:
    """Every visible profile, with the invalid ones reported instead of raised (for listings/UI)."""
    good: list[Profile] = []
    bad: list[ProfileError] = []
    for p in profile_files(extra_dirs).values():
        try:
            good.append(load_profile_file(p, extra_dirs))
        except ProfileError as exc:
            bad.append(exc)
        except OSError as exc:  # never expected; still one broken profile, not a broken listing
            bad.append(ProfileError(f"cannot read: {exc}", path=p))
    return good, bad + key_clashes(good)


def _key_line(profile: Profile) -> int | None:
    try:
        return find_key_line(profile.source_path.read_text(encoding="utf-8"), ["key"]) if profile.source_path else None
    except (OSError, UnicodeDecodeError):
        return None


def key_clashes(profiles: Sequence[Profile]) -> list[ProfileError]:
    """One error per profile that declares a cockpit key another profile already declares.

    Both files are named with their lines, so the operator sees which two to reconcile.
    """
    holders: dict[str, Profile] = {}
    errors: list[ProfileError] = []
    for p in sorted(profiles, key=lambda q: q.name):
        if p.key is None:
            continue
        first = holders.setdefault(p.key, p)
        if first is p:
            continue
        line = _key_line(first)
        where = f"{first.source_path}{f':{line}' if line else ''}"
        errors.append(ProfileError(f"key {p.key} is also declared by {first.name} ({where}); a key belongs to one "
                                   f"profile", path=p.source_path, line=_key_line(p), field="key"))
    return errors


def locate_field(profile: Profile, loc: Sequence[str | int], extra_dirs: Sequence[Path | str] | None = None) -> tuple[Path, int | None] | None:
    """The file (and line) in the profile's extends chain that sets ``loc``; None if only defaulted.

    ``loc`` is a field path such as ``("sim", "fault")`` or ``("extra_args", 2)``.
    """
    if profile.source_path is None:
        return None
    names = [str(p) for p in loc if not isinstance(p, int)]
    try:
        chain = _chain(profile.source_path, extra_dirs)
    except ProfileError:
        return None
    for depth, src in enumerate(chain):
        if names and names[0] in _NOT_INHERITED and depth > 0:
            break
        node: object = src.data
        for name in names:
            if not isinstance(node, dict) or name not in node:
                node = _MISSING
                break
            node = node[name]
        if node is not _MISSING:
            return src.path, find_key_line(src.text, names)
    return None


_MISSING = object()
