"""A profile as one self-contained TOML document (``extends`` resolved).

For recordings and reports ("exactly what ran"), and for copying a profile to
another machine; loading the text back gives the same knobs.
"""

from __future__ import annotations

from typing import Any

import tomli_w

from kimitui.profiles.schema import Profile


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """Non-default settings only, with ``extends`` resolved away (TOML has no null)."""
    data = profile.model_dump(mode="json", exclude_defaults=True, exclude={"extends", "source_path"})
    data["name"] = profile.name
    data["model_path"] = profile.model_path
    head: dict[str, Any] = {k: data.pop(k) for k in ("name", "description", "model_path") if k in data}
    tables = {k: data.pop(k) for k in ("env", "launcher", "sim") if data.get(k)}
    return {**head, **data, **tables}


def profile_to_toml(profile: Profile) -> str:
    return tomli_w.dumps(profile_to_dict(profile))
