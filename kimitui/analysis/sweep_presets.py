"""The sweep form's presets: the seeds' full sweep, and a quick one to check a server in half a minute.

Each is the part of a :class:`kimitui.events.SweepSpec` a preset sets (levels, mode, tokens,
prompts); the rest (url, model, limits) stays what the form was opened with.
"""

from __future__ import annotations

from typing import Any

SEEDS_LEVELS = [1, 8, 32, 64, 96, 128, 192, 256]

SEEDS_DEFAULTS: dict[str, Any] = {
    "levels": SEEDS_LEVELS,
    "mode": "sustained",
    "max_tokens": 512,
    "ignore_eos": True,
    "prompts": "seed",
}
"""The seeds' sweep: eight levels to C=256 at 512 tokens (about a quarter of an hour on the host)."""

QUICK: dict[str, Any] = {
    "levels": [1, 8, 64],
    "mode": "sustained",
    "max_tokens": 128,
    "ignore_eos": True,
    "prompts": "seed",
}
"""Three levels at 128 tokens: the curve's shape in about half a minute."""

PRESETS: dict[str, dict[str, Any]] = {"seeds": SEEDS_DEFAULTS, "quick": QUICK}


def preset_label(name: str) -> str:
    """What the form's button says: ``quick: C=1,8,64 · 128 tokens``."""
    p = PRESETS[name]
    title = "seeds' defaults" if name == "seeds" else name
    levels: list[int] = p["levels"]
    cs = f"C={','.join(str(c) for c in levels)}" if len(levels) <= 4 else f"C={levels[0]}…{levels[-1]}"
    return f"{title}: {cs} · {p['max_tokens']} tokens"
