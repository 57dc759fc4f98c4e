"""The sweep form's defaults: the last ones used, remembered in the user's state folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError

from kimitui.analysis.sweep_presets import SEEDS_DEFAULTS, SEEDS_LEVELS
from kimitui.events import SweepSpec

log = logging.getLogger(__name__)

DEFAULT_LEVELS = SEEDS_LEVELS

FIRST_DEFAULTS: dict[str, Any] = dict(SEEDS_DEFAULTS)
"""What the form offers before any sweep ran: the seeds' sweep (the form's "seeds' defaults" preset)."""

SERVER_FIELDS = frozenset({"url", "model", "spec_details", "labels_header", "labels"})
"""What belongs to the server swept, not to the operator's choice: never remembered, never restored
(speculative figures and labels are asked for only when that server's ``/server_info`` allows them)."""


class SweepDefaults:
    """A small settings store: one JSON file, everything of a sweep but what its server decides."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        """Found when asked, so a test's (or the user's) XDG_STATE_HOME is where it lives."""
        return self._path or Path(platformdirs.user_state_dir("kimitui")) / "sweep-defaults.json"

    def spec(self, url: str, model: str) -> SweepSpec:
        """The defaults for a sweep of ``url``; a remembered value that no longer validates is dropped."""
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            saved = {}
        fields = dict(FIRST_DEFAULTS)
        if isinstance(saved, dict):
            fields.update({k: v for k, v in saved.items() if k in SweepSpec.model_fields and k not in SERVER_FIELDS})
        try:
            return SweepSpec.model_validate({**fields, "url": url, "model": model})
        except ValidationError:
            return SweepSpec(url=url, model=model, levels=DEFAULT_LEVELS)

    def remember(self, spec: SweepSpec) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(spec.model_dump(exclude=set(SERVER_FIELDS))))
        except OSError as exc:
            log.debug("cannot remember sweep defaults: %s", exc)
