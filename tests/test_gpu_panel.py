"""GPU panel at fleet sizes: it never pushes the other panels off screen, and a tick rebuilds only changed rows."""

from __future__ import annotations

from textual.pilot import Pilot

from kimitui.events import GpuCaps, GpuReading, GpuSample, GpuStatic
from kimitui.tui.app import KimituiApp
from kimitui.tui.widgets.gpu_panel import GpuPanel, group_size
from tests.support.fakecontrol import SUPPORTED, FakeController


def fleet_caps(n: int) -> GpuCaps:
    return GpuCaps(t=0, gpus=[GpuStatic(index=i, uuid=f"GPU-{i}", name="GPU", memory_total_mib=97_887,
                                        power_limit_w=600, supported=list(SUPPORTED)) for i in range(n)])


def fleet_sample(n: int, seq: int, util: dict[int, float] | None = None) -> GpuSample:
    util = util or {}
    return GpuSample(t=seq, seq=seq, gpus=[GpuReading(
        index=i, util_pct=util.get(i, 90.0 + (i % 3)), mem_used_mib=87_000, mem_total_mib=97_887, power_w=450,
        power_limit_w=600, temp_c=65, sm_clock_mhz=2400, pcie_tx_kbps=2e4, pcie_rx_kbps=1e4, throttle_reasons=[])
        for i in range(n)])


async def _shown(app: KimituiApp, pilot: Pilot[int]) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause(0.05)
    app.pump(force_charts=True)
    await pilot.pause(0.05)


async def test_64_gpus_leave_the_other_panels_on_screen():
    app = KimituiApp(FakeController(initial=[fleet_caps(64), fleet_sample(64, 0, {21: 12.0})]), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await _shown(app, pilot)
        gpus = app.query_one("#panel-gpus").region
        assert gpus.height <= 12  # 8 group lines, the legend, the gauge, the border
        assert app.layout_shown == "monitor"  # no sweep yet: the strip and the log below the GPUs
        for name in ("#panel-strip", "#panel-log"):
            region = app.query_one(name).region
            assert region.y >= gpus.bottom and region.bottom <= 39 and region.height >= 3, (name, region)
        assert app.query_one("#panel-log").region.height >= 12
        text = app.query_one(GpuPanel).render().plain
        assert "16-23" in text and "GPU21" in text  # the group with the idle GPU names it


def test_group_size_fits_the_screen():
    assert group_size(8, 40) == 1 and group_size(16, 40) == 1
    assert group_size(32, 40) == 8 and group_size(128, 40) == 16
    assert group_size(8, 24) == 1 and group_size(16, 24) == 8 and group_size(64, 24) == 16
    for n in (8, 16, 32, 64, 128, 256):
        for h in (24, 40, 60):
            size = group_size(n, h)
            lines = n if size == 1 else -(-n // size) + 1
            assert lines <= (min(16, h // 2 - 3) if size == 1 else h // 4), (n, h, size)


async def _rebuilt_when_one_gpu_changes(n: int) -> int:
    ctrl = FakeController(initial=[fleet_caps(n)] + [fleet_sample(n, k) for k in range(130)])  # history full
    app = KimituiApp(ctrl, tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await _shown(app, pilot)
        panel = app.query_one(GpuPanel)
        ctrl.session.publish(fleet_sample(n, 130))  # same figures: nothing to rebuild
        await _shown(app, pilot)
        before = panel.rows_built
        ctrl.session.publish(fleet_sample(n, 131, {3: 90.6}))  # GPU 3 only, inside the spread (gauge unchanged)
        await _shown(app, pilot)
        return panel.rows_built - before


async def test_one_changed_gpu_rebuilds_one_row():
    assert await _rebuilt_when_one_gpu_changes(8) == 1


async def test_one_changed_gpu_rebuilds_one_group_line_at_64():
    assert await _rebuilt_when_one_gpu_changes(64) == 1
