"""Each step's profile: the best so far with one change, written as a file that ``extends`` the start.

The file lives in the user's profile folder (where ``kimitui swap`` and a later cockpit find it: the
server a tune leaves running must still have its profile after the tune).  An existing profile that
makes exactly this change is used as it is (``ep8-eplb``); a file kimitui wrote before with the same
settings is reused; a name taken by something else gets a suffix, never overwritten.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import tomli_w

from kimitui.knobs import plannable
from kimitui.profiles import Profile, ProfileError, diff_profiles, load_profile
from kimitui.profiles.diff import OBSERVABILITY_KNOBS, knob_family
from kimitui.profiles.loader import user_dir
from kimitui.tune.state import Candidate

MARK = "written by kimitui tune"


def step_settings(best_settings: dict[str, Any], cand: Candidate) -> dict[str, Any]:
    """What the step's profile changes from the start: the best's changes, the candidate's family replaced."""
    kept = {k: v for k, v in best_settings.items() if knob_family(k) != cand.family}
    return {**kept, **cand.settings}


SHORT = {"enable_eplb": "eplb", "ep_size": "ep", "moe_dense_tp_size": "dense-tp", "max_running_requests": "maxreq",
         "chunked_prefill_size": "chunk", "cuda_graph_max_bs": "graph-bs", "mem_fraction_static": "mem"}
"""A knob's part of a variant's name (``ep8-tuned-dense-tp1``); other knobs use their own name."""


def _short(settings: dict[str, Any]) -> str:
    """One family's part of a name: ``dflash``, ``eplb-on``, ``ep4``."""
    algo = settings.get("speculative_algorithm")
    if algo is not None:
        return str(algo).lower()
    knob, value = next((k, v) for k, v in settings.items() if not k.startswith("env."))
    short = SHORT.get(knob, knob.replace("_", "-"))
    if isinstance(value, bool):
        return f"{short}-{'on' if value else 'off'}"
    return short + re.sub(r"[^A-Za-z0-9.]+", "-", str(value)).strip("-")


def variant_name(start: str, settings: dict[str, Any]) -> str:
    """``ep8-tuned-dense-tp1-dflash``: the start and each change, in the order they were kept."""
    parts: list[str] = []
    done: set[str] = set()
    for k in settings:
        fam = knob_family(k)
        if fam in done or k.startswith("env.") or k in OBSERVABILITY_KNOBS:
            continue
        done.add(fam)
        parts.append(_short({kk: v for kk, v in settings.items() if knob_family(kk) == fam}))
    return "-".join([start, *parts])


def materialize(start: Profile, settings: dict[str, Any], label: str, dirs: list[str],
                existing: str | None = None) -> str:
    """The name of a profile that is ``start`` plus ``settings``: ``existing`` when it is exactly that,
    else a variant file (written now, or one written before with the same settings)."""
    if existing is not None and _same(start, existing, settings, dirs):
        return existing
    base = variant_name(start.name, settings)
    for n in range(1, 50):
        name = base if n == 1 else f"{base}-{n}"
        path = user_dir() / f"{name}.toml"
        if _same(start, name, settings, dirs):
            return name
        if path.exists() or _loads(name, dirs):
            continue
        write_profile(path, name, start.name, settings, f"{start.name} + {label} ({MARK})")
        return name
    raise OSError(f"no free profile name for {base} in {user_dir()}")


def write_profile(path: Path, name: str, extends: str, settings: dict[str, Any], description: str) -> Path:
    """A profile file: ``extends`` plus the settings (env knobs as an ``env`` table), written atomically."""
    doc: dict[str, Any] = {"name": name, "description": description, "extends": extends}
    env = {k[4:]: v for k, v in settings.items() if k.startswith("env.")}
    doc.update({k: v for k, v in settings.items() if not k.startswith("env.") and v is not None})
    if env:
        doc["env"] = env
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(tomli_w.dumps(doc))
    os.replace(tmp, path)
    return path


def _loads(name: str, dirs: list[str]) -> Profile | None:
    try:
        return load_profile(name, dirs)
    except (ProfileError, OSError):
        return None


def _same(start: Profile, name: str, settings: dict[str, Any], dirs: list[str]) -> bool:
    """Does profile ``name`` change from ``start`` exactly ``settings`` (and nothing else)?"""
    p = _loads(name, dirs)
    if p is None:
        return False
    diff = diff_profiles(start, p)
    if any(not plannable(k) for knobs in diff.families.values() for k in knobs):
        return False  # it changes an [env] variable a sweep can feel: not what the step asked for
    # an [env] observability setting (ep8-eplb's heatmap interval) or a secret is no part of a step's change
    changes = {k: new for k, (_, new) in diff.changes.items() if plannable(k)}
    return changes == {k: v for k, v in settings.items() if v is not None and plannable(k)}
