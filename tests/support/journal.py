"""Write entries into the fake journal read by tests/support/fake_journal/journalctl."""

from __future__ import annotations

import json
import time
from pathlib import Path

FAKE_JOURNAL_BIN = Path(__file__).with_name("fake_journal")


def append_entry(path: Path, unit: str, msg: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"unit": unit, "t": time.time(), "msg": msg}) + "\n")
