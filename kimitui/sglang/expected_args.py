"""What a profile asks of SGLang: the knobs it sets explicitly, judged against what the server reports.

``/server_info`` returns SGLang's ``ServerArgs`` flattened; a knob the profile leaves to SGLang
(``None``) is never drift, and neither are ``extra_args`` and ``env`` (no ``ServerArgs`` field).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_NOT_SERVER_ARGS = frozenset({"extra_args", "env"})


def expected_args(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs a profile sets explicitly (``None`` = left to SGLang, so never drift); ``knobs``: ``Profile.knobs()``."""
    return {k: v for k, v in knobs.items() if v is not None and k not in _NOT_SERVER_ARGS}
