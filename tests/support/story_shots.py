"""The story's screens as pictures, to look at before calling a screen done (issue 32's closing note).

Run from the checkout: ``.venv/bin/python -m tests.support.story_shots OUT [levels|capture|confound|compare ...]``
(default: all four) at 200x55, 120x40 and 80x24 (``--sizes 80x24,120x40``).  Each screen is saved as SVG,
and as PNG where ``rsvg-convert`` (apt: librsvg2-bin) is on the PATH.

- levels: the cockpit after an 8-level sweep (plain, EPLB and DFlash layouts; the test suite's events).
- capture: a swap to ep8-eplb on the embedded simulated host while its CUDA graphs are captured.
- confound: the confound guard's dialog for ep8-v2, then its single-knob offer's own confirm.
- compare: two short sweeps (ep8-tuned, then ep8-eplb), the compare view with "b back to baseline", its confirm.
The live ones run the embedded simulated host in a scratch home (tests/support/sim_home.py), nothing outside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

SIZES = ((200, 55), (120, 40), (80, 24))
SHOTS = ("levels", "capture", "confound", "compare")


def _png(svg: Path) -> Path | None:
    if shutil.which("rsvg-convert") is None:
        return None
    png = svg.with_suffix(".png")
    subprocess.run(["rsvg-convert", "-w", "1800", str(svg), "-o", str(png)], check=True)
    return png


def _save(app: object, out: Path, name: str) -> None:
    svg = out / f"{name}.svg"
    app.save_screenshot(svg.name, path=str(out))  # type: ignore[attr-defined]
    print(_png(svg) or svg, flush=True)


async def levels(out: Path, size: tuple[int, int]) -> None:
    from kimitui.tui.app import KimituiApp
    from tests.support.fakecontrol import FakeController
    from tests.support.screen_states import drawn
    from tests.test_tui_levels_table import sweep_events

    for layout in ("plain", "eplb", "dflash"):
        app = KimituiApp(FakeController(initial=sweep_events(layout)), tick=None)
        async with app.run_test(size=size) as pilot:
            await drawn(pilot)
            _save(app, out, f"levels-{layout}-{size[0]}x{size[1]}")


async def _live(size: tuple[int, int], body: Callable[..., Awaitable[None]]) -> None:
    from kimitui.live import LiveController
    from kimitui.tui.app import KimituiApp
    from tests.support.tuiscreen import wait_for

    app = KimituiApp(LiveController(record=False), tick=None)
    async with app.run_test(size=size) as pilot:
        await wait_for(app, lambda: app.model.profile == "ep8-tuned" and app.model.profile_state == "serving",
                       180, "ep8-tuned serving")
        await body(app, pilot)


async def capture(out: Path, size: tuple[int, int]) -> None:
    from kimitui.tui.screens.swap_confirm import SwapConfirm
    from tests.support.tuiscreen import settle, wait_for

    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("6")  # ep8-eplb
        await wait_for(app, lambda: isinstance(app.screen, SwapConfirm), 10, "the swap's confirm")
        await pilot.press("y")

        def capturing() -> bool:
            swap = app.model.swap
            return (swap is not None and "graph" in swap.phase and swap.fraction is not None
                    and 0.2 <= swap.fraction <= 0.9)

        await wait_for(app, capturing, 180, "CUDA-graph capture under way")
        await settle(app, pilot)
        _save(app, out, f"capture-{size[0]}x{size[1]}")

    await _live(size, body)


async def confound(out: Path, size: tuple[int, int]) -> None:
    from kimitui.tui.screens.swap_confirm import SwapConfirm
    from tests.support.cockpit_drive import serving_with_baseline, swap_dialog
    from tests.support.tuiscreen import settle, wait_for

    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        await serving_with_baseline(app, pilot)
        await swap_dialog(app, pilot, "8")  # ep8-v2: two knobs at once
        _save(app, out, f"confound-{size[0]}x{size[1]}")
        await pilot.press("enter")  # take the offer: its own confirm, with its diff
        await wait_for(app, lambda: isinstance(app.screen, SwapConfirm) and app.screen.plan.target != "ep8-v2",
                       10, "the offer's confirm")
        await settle(app, pilot)
        _save(app, out, f"confound-offer-{size[0]}x{size[1]}")

    await _live(size, body)


async def compare(out: Path, size: tuple[int, int]) -> None:
    from kimitui.tui.screens.compare import CompareScreen
    from kimitui.tui.screens.swap_confirm import SwapConfirm
    from tests.support.cockpit_drive import serving_with_baseline, swap, sweep
    from tests.support.tuiscreen import settle, wait_for

    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        await serving_with_baseline(app, pilot)
        await sweep(app, pilot, "1,4", timeout=180)
        await swap(app, pilot, "6", "ep8-eplb", timeout=180)
        await sweep(app, pilot, "1,4", timeout=180)
        await pilot.press("c")
        await wait_for(app, lambda: isinstance(app.screen, CompareScreen), 10, "the compare view")
        await settle(app, pilot, rounds=4)
        _save(app, out, f"compare-{size[0]}x{size[1]}")
        await pilot.press("b")
        await wait_for(app, lambda: isinstance(app.screen, SwapConfirm), 10, "the baseline's confirm")
        await settle(app, pilot)
        _save(app, out, f"compare-back-{size[0]}x{size[1]}")

    await _live(size, body)


RUNNERS = {"levels": levels, "capture": capture, "confound": confound, "compare": compare}
TIME_SCALE = {"capture": 4.0}  # slow enough that a 0.5 s redraw sees the capture under way


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("shots", nargs="*", choices=SHOTS, default=list(SHOTS))
    ap.add_argument("--sizes", default=",".join(f"{w}x{h}" for w, h in SIZES))
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.sizes.split(",")]
    repo = Path(__file__).resolve().parents[2]
    for shot in args.shots or SHOTS:
        for size in sizes:
            home = Path(tempfile.mkdtemp(prefix="kimitui-shots-"))
            from tests.support.sim_home import make_sim_home

            make_sim_home(home, os.environ.__setitem__, lambda var: os.environ.pop(var, None), os.chdir,
                          time_scale=TIME_SCALE.get(shot, 40.0),
                          sweep_defaults={"requests_per_level": 4, "stop_on_oversaturation": False})
            try:
                asyncio.run(RUNNERS[shot](out, size))  # type: ignore[arg-type]
            finally:
                os.chdir(repo)
                shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
