"""What the simulator really did to stall a request: the ground truth attribution is measured against.

Written only when ``KIMITUI_SIM_TRUTH`` names a file (the bench and tests set it), one JSON object a
line: ``{"cause", "start", "end", "request_ids", "detail"}`` with epoch seconds of real time and the
client's ``X-Request-ID`` values where a cause hits only some requests (``null``: every request running
then).  kimitui itself never reads it: attribution works from what SGLang and NVML show.
"""

from __future__ import annotations

import json
import os
from typing import Any

TRUTH_ENV = "KIMITUI_SIM_TRUTH"


class Truth:
    """Appends truth records, or does nothing when no file is named."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path if path is not None else os.environ.get(TRUTH_ENV) or None

    def record(self, cause: str, start: float, end: float, request_ids: list[str] | None = None,
               detail: dict[str, Any] | None = None) -> None:
        if self.path is None:
            return
        line = json.dumps({"cause": cause, "start": start, "end": end, "request_ids": request_ids,
                           "detail": detail or {}})
        try:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            pass  # a truth file that cannot be written must not take the server down
