"""One object per load mode; the mode names and the requests-per-level rule are written once, in the domain."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kimitui.analysis.sweep_eta import level_requests
from kimitui.events import SWEEP_MODES, SweepSpec
from kimitui.loadgen.modes import MODES, Burst, LevelPlan, Rate, Sustained, mode_for
from kimitui.loadgen.sweep import SweepEngine

ROOT = Path(__file__).resolve().parents[1]
NAMES = set(SWEEP_MODES)


def test_every_mode_name_has_its_object_and_the_engine_asks_it() -> None:
    assert tuple(MODES) == SWEEP_MODES == ("sustained", "burst", "rate")  # the default first
    assert [type(m) for m in MODES.values()] == [Sustained, Burst, Rate]
    for name in SWEEP_MODES:
        spec = SweepSpec(url="http://127.0.0.1:1", model="m", levels=[1], mode=name, rate_rps=2.0)
        engine = SweepEngine(spec, lambda e: None)
        assert engine.mode is mode_for(name) and engine.mode.name == name
    assert Rate().check(SweepSpec(url="u", model="m", levels=[1], mode="rate")) == "mode 'rate' needs rate_rps > 0"
    assert Burst().check(SweepSpec(url="u", model="m", levels=[1], mode="burst")) is None


@pytest.mark.parametrize(("mode", "given", "c", "expected"), [
    ("burst", {}, 8, 8), ("sustained", {}, 8, 16), ("rate", {}, 1, 5), ("burst", {"requests_per_level": 3}, 64, 3),
    ("sustained", {"duration_s": 10.0}, 4, None),
])
def test_the_load_process_and_the_eta_read_one_rule(mode: str, given: dict, c: int, expected: int | None) -> None:
    spec = SweepSpec.model_validate({"url": "u", "model": "m", "levels": [c], "mode": mode, **given})
    plan = LevelPlan.of(spec, c)
    assert spec.level_requests(c) == level_requests(spec, c) == plan.budget == expected
    assert (plan.span_ns == 10e9) if "duration_s" in given else plan.span_ns == float("inf")


def _mode_name_collections(path: Path) -> list[str]:
    """Tuples, lists, sets and Literal[...] that spell the mode names out (two or more of them)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else None
        if elts is None or len(elts) < 2:
            continue
        words = {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if len(words & NAMES) >= 2:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_mode_names_are_written_once() -> None:
    spelled = [where for path in sorted((ROOT / "kimitui").rglob("*.py")) for where in _mode_name_collections(path)]
    assert len(spelled) == 1 and spelled[0].startswith("kimitui/events.py:"), (
        "write the sweep mode names once (kimitui.events.SweepMode / SWEEP_MODES) and import them:\n"
        + "\n".join(spelled))
