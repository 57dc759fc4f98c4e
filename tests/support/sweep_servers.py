"""Fixtures for the sweep tests: ``tests/support/minimal_server.py``, really started on 127.0.0.1.

The server runs on its own event loop in a background thread, so its pacing
never waits on the test's loop; its ``state`` counts requests, request ids,
``/flush_cache`` calls and the most streams it ever had open at once.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kimitui.events import SweepSpec

ROOT = Path(__file__).resolve().parents[2]


def load_minimal_server() -> ModuleType:
    name = "kimitui_bench_minimal_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "support" / "minimal_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def minimal_server() -> Iterator[object]:
    """A started ThreadedServer (``.url``, ``.state``); per-request pacing via body knobs."""
    server = load_minimal_server().ThreadedServer().start()
    try:
        yield server
    finally:
        server.stop()


def minimal_spec(url: str, **kw: Any) -> SweepSpec:
    """A small sweep against the minimal server (one level of C=2, 4 requests of 20 tokens, 5 ms a chunk)."""
    base: dict[str, Any] = dict(url=url, model="minimal", levels=[2], max_tokens=20, requests_per_level=4,
                                extra_body={"tick_ms": 5})
    base.update(kw)
    return SweepSpec(**base)
