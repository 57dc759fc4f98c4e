"""The GPU panel redesign (issue 15): a device header line, colours that mean something, bars drawn
from the current reading, a compact summary on a small screen, wide columns on a wide one, and the
per-process view on ``g``."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rich.text import Text
from textual.app import App, ComposeResult

from kimitui.events import GpuCaps, GpuProcess, GpuProcs, GpuReading, GpuSample, GpuStatic
from kimitui.host.local import LocalHost
from kimitui.session import Session
from kimitui.sim import gpustate
from kimitui.sim import nvml as fake_nvml
from kimitui.sim.gpus import GpuModel
from kimitui.sim.scheduler import SchedStats
from kimitui.sim.settings import load_settings
from kimitui.sim.startup import BootState
from kimitui.telemetry.agent import NvmlBackend, Output
from kimitui.telemetry.gpu import GpuStream
from kimitui.tui.model.cockpit_state import CockpitModel
from kimitui.tui.widgets.gpu_panel import GpuPanel
from kimitui.tui.app import KimituiApp
from tests.support.fakecontrol import SUPPORTED, FakeController, gpu_sample
from tests.support.fakecontrol import caps as fake_caps
from tests.support.agentproc import write_busy_state
from tests.support.telemetry import Collector
from tests.support.tuiscreen import screen_text, settle

NAME = "NVIDIA H200"
BLOCK_CHARS = set("▁▂▃▄▅▆▇█▏▎▍▌▋▊▉")


def caps(n: int = 8, *, max_gen: int = 5, max_width: int = 16) -> GpuCaps:
    return GpuCaps(t=0, driver="575.57.08", cuda_version="12.9", interval_s=0.25, gpus=[
        GpuStatic(index=i, uuid=f"GPU-{i}", name=NAME, memory_total_mib=143_771, power_limit_w=700,
                  pcie_max_gen=max_gen, pcie_max_width=max_width,
                  supported=[*SUPPORTED, "mem_util_pct", "mem_clock_mhz", "pcie_gen", "pcie_width"])
        for i in range(n)])


def sample(seq: int, util: float | dict[int, float] = 86.0, *, temp: dict[int, float] | None = None,
           throttle: dict[int, list[str]] | None = None, gen: int = 5, width: int = 16, n: int = 8) -> GpuSample:
    utils = util if isinstance(util, dict) else {}
    return GpuSample(t=seq, seq=seq, gpus=[GpuReading(
        index=i, util_pct=utils.get(i, 86.0 if isinstance(util, dict) else util), mem_util_pct=40.0,
        mem_used_mib=87_000, mem_total_mib=143_771, power_w=490, power_limit_w=700,
        temp_c=(temp or {}).get(i, 62.0 + i), sm_clock_mhz=1980, mem_clock_mhz=3201, pcie_tx_kbps=2e4,
        pcie_rx_kbps=1e4, throttle_reasons=(throttle or {}).get(i, []), pcie_gen=gen, pcie_width=width)
        for i in range(n)])


def ranked() -> GpuProcs:
    return GpuProcs(t=0, procs=[GpuProcess(gpu_index=i, pid=4242, used_mib=86_000 + i, name=f"sglang::scheduler_TP{i}_EP{i}",
                                           rank=f"TP{i}_EP{i}") for i in range(8)])


class PanelApp(App[None]):
    """The panel alone at a given content height (the cockpit's layout is the lead's)."""

    def __init__(self, model: CockpitModel, rows: int | None = None) -> None:
        super().__init__()
        self.model, self.rows = model, rows

    def compose(self) -> ComposeResult:
        panel = GpuPanel(self.model, id="gpus")
        if self.rows is not None:
            panel.styles.height = self.rows
        yield panel


async def drawn(model: CockpitModel, size: tuple[int, int], rows: int | None = None) -> Text:
    app = PanelApp(model, rows)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        panel.redraw()
        await pilot.pause()
        return panel.render()


def model_of(*events: object) -> CockpitModel:
    m = CockpitModel()
    m.apply(events)  # type: ignore[arg-type]  # test events are all Event subclasses
    return m


def line_of(text: Text, start: str) -> tuple[int, str]:
    """(offset in ``text``, the line) of the first line whose text starts with ``start`` (stripped)."""
    offset = 0
    for line in text.plain.split("\n"):
        if line.lstrip().startswith(start):
            return offset, line
        offset += len(line) + 1
    raise AssertionError(f"no line starting {start!r} in\n{text.plain}")


def styles_at(text: Text, start: int, end: int) -> str:
    return " ".join(str(span.style) for span in text.spans if span.start < end and span.end > start)


# ----------------------------------------------------------------------------- bars and numbers


async def test_a_stopped_server_shows_empty_bars_next_to_zero() -> None:
    m = model_of(caps(), *[sample(k, 90.0) for k in range(120)], sample(120, 0.0))
    text = await drawn(m, (120, 40))
    _, row = line_of(text, "0 ")
    left_of_number = row[:row.index(" 0%")]
    assert not BLOCK_CHARS & set(left_of_number), row  # the bar shows the current 0 %, not the 90 % history


async def test_the_bar_is_filled_to_the_current_reading() -> None:
    m = model_of(caps(), *[sample(k, 0.0) for k in range(120)], sample(120, 100.0))
    text = await drawn(m, (120, 40))
    _, row = line_of(text, "0 ")
    left = row[:row.index("100%")]
    assert left.count("█") >= 8 and "░" not in left, row  # full now, though the history was idle


async def test_the_history_spark_is_labelled_as_history() -> None:
    m = model_of(caps(), *[sample(k, 90.0) for k in range(120)])
    text = await drawn(m, (200, 60))
    gauge = text.plain.split("\n")[-1]
    assert re.search(r"↑ util history, last \d+ s$", gauge), gauge
    row = line_of(text, "0 ")[1]
    assert len(row) == len(gauge) and set(row[gauge.index("↑"):]) == {"▇"}  # the label stands under the history


# ----------------------------------------------------------------------------- the header line


async def test_header_line_names_model_driver_cuda_and_pcie_link() -> None:
    m = model_of(caps(), sample(0))
    text = await drawn(m, (120, 40))
    head = text.plain.split("\n")[0]
    for part in ("8× NVIDIA H200 140G", "driver 575.57.08", "CUDA 12.9", "PCIe Gen5 x16 (max Gen5 x16)"):
        assert part in head, head


async def test_a_degraded_pcie_link_is_coloured() -> None:
    m = model_of(caps(), sample(0, gen=4, width=8))
    text = await drawn(m, (120, 40))
    head = text.plain.split("\n")[0]
    at = head.index("PCIe Gen4 x8")
    assert "(max Gen5 x16)" in head
    assert "red" in styles_at(text, at, at + 12) or "yellow" in styles_at(text, at, at + 12)
    healthy = await drawn(model_of(caps(), sample(0)), (120, 40))
    at = healthy.plain.index("PCIe Gen5 x16")
    assert "red" not in styles_at(healthy, at, at + 12) and "yellow" not in styles_at(healthy, at, at + 12)


# ----------------------------------------------------------------------------- colours


async def test_rank_labels_are_neutral() -> None:
    m = model_of(caps(), sample(0), ranked())
    text = await drawn(m, (120, 40))
    at = text.plain.index("TP3_EP3")
    style = styles_at(text, at, at + 7)
    for colour in ("red", "magenta", "green", "yellow"):
        assert colour not in style, style


async def test_temperature_coloured_from_80_and_88() -> None:
    m = model_of(caps(), sample(0, temp={0: 79.0, 1: 80.0, 2: 88.0}))
    text = await drawn(m, (120, 40))
    found = {}
    for gpu, label in ((0, "79°C"), (1, "80°C"), (2, "88°C")):
        offset, row = line_of(text, f"{gpu} ")
        at = offset + row.index(label)
        found[gpu] = styles_at(text, at, at + len(label))
    assert "yellow" not in found[0] and "red" not in found[0]
    assert "yellow" in found[1]
    assert "red" in found[2]


async def test_throttling_shown_and_coloured_idle_not() -> None:
    m = model_of(caps(), sample(0, throttle={3: ["sw_power_cap"], 5: ["gpu_idle"], 6: ["hw_thermal_slowdown"]}))
    text = await drawn(m, (120, 40))
    offset, row = line_of(text, "3 ")
    assert "power cap" in row
    at = offset + row.index("power cap")
    assert "yellow" in styles_at(text, at, at + 9)
    offset, row = line_of(text, "6 ")
    at = offset + row.index("HW thermal")
    assert "red" in styles_at(text, at, at + 10)
    _, row = line_of(text, "5 ")
    assert "idle" not in row


async def test_imbalance_is_labelled_and_coloured_by_severity() -> None:
    calm = await drawn(model_of(caps(), sample(0, {0: 84.0, 1: 87.0})), (120, 40))
    offset, line = line_of(calm, "util spread")
    assert "3 pts" in line
    style = styles_at(calm, offset, offset + len(line))
    assert "red" not in style and "green" not in style and "yellow" not in style
    bad = await drawn(model_of(caps(), sample(0, {0: 40.0, 1: 90.0})), (120, 40))
    offset, line = line_of(bad, "util spread")
    assert "red" in styles_at(bad, offset, offset + len(line))


# ----------------------------------------------------------------------------- sizes


async def test_few_rows_draw_a_summary() -> None:
    m = model_of(caps(), sample(0, {0: 85.0, 7: 88.0}, temp={0: 62.0, 7: 69.0}), ranked())
    text = await drawn(m, (80, 24), rows=3)
    lines = text.plain.split("\n")
    assert len(lines) <= 3
    whole = " ".join(lines)
    for part in ("8× H200 140G", "util 85–88%", "mem 85/140G", "62–69°C", "3.9/5.6kW", "spread 3", "no throttling"):
        assert part in whole, whole
    assert all(len(line) <= 80 for line in lines)


async def test_one_row_still_says_the_essentials() -> None:
    m = model_of(caps(), sample(0, {0: 85.0, 7: 88.0}, throttle={4: ["hw_slowdown"]}))
    text = await drawn(m, (80, 24), rows=1)
    assert "\n" not in text.plain
    assert "util 85–88%" in text.plain and "HW slowdown" in text.plain, text.plain


async def test_wide_terminal_shows_more_columns() -> None:
    m = model_of(caps(), sample(0))
    narrow = await drawn(m, (80, 40), rows=10)
    wide = await drawn(m, (200, 60))
    _, row = line_of(wide, "0 ")
    for part in ("1980MHz", "3201MHz", "↑ 20M", "↓ 10M"):
        assert part in row, row
    assert re.search(r"bw +40%", row), row
    assert "3201MHz" not in line_of(narrow, "0 ")[1]
    assert all(len(line) <= 200 for line in wide.plain.split("\n"))


async def test_full_rows_fit_120_columns() -> None:
    m = model_of(caps(), sample(0), ranked())
    text = await drawn(m, (120, 40))
    for line in text.plain.split("\n"):
        assert len(line) <= 120 and "…" not in line, line


# ----------------------------------------------------------------------------- the process view


async def test_g_opens_the_process_list_sorted_by_gpu() -> None:
    procs = GpuProcs(t=0, procs=[
        GpuProcess(gpu_index=i, pid=5000 + i, used_mib=86_000.0 + i, name=f"sglang::scheduler_TP{i}", rank=f"TP{i}")
        for i in (3, 0, 7, 1, 2, 6, 5, 4)])


    app = KimituiApp(FakeController(initial=[fake_caps(), gpu_sample(1, 80.0), procs]), tick=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("g")
        await settle(app, pilot)
        text = screen_text(app)
        for col in ("GPU", "pid", "name", "rank", "memory"):
            assert col in text, text
        at = [text.index(f"sglang::scheduler_TP{i}") for i in range(8)]
        assert at == sorted(at), text
        assert "5003" in text and "84.0 GiB" in text
        await pilot.press("escape")
        await settle(app, pilot)
        assert "sglang::scheduler_TP3" not in screen_text(app)


async def test_process_view_says_when_there_are_none() -> None:


    for initial, says in (([fake_caps()], "the agent reports no process list"),
                          ([fake_caps(), GpuProcs(t=0, procs=[])], "no compute processes")):
        app = KimituiApp(FakeController(initial=initial), tick=None)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            await pilot.press("g")
            await settle(app, pilot)
            assert says in screen_text(app)


# ----------------------------------------------------------------------------- the agent over the fake NVML


@pytest.fixture
def busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    monkeypatch.setenv("KIMITUI_SIM_STATE", str(state))
    monkeypatch.setenv("KIMITUI_FAKE_NVML", "pcie_delay=0")
    yield state
    fake_nvml.uninstall()


def _backend(scenario: str = "pcie_delay=0") -> NvmlBackend:
    fake_nvml.configure(scenario)
    try:
        return NvmlBackend(Output(io.StringIO()), fake=True)
    finally:
        fake_nvml.configure(None)


def test_caps_carry_the_cuda_version_and_ticks_the_current_pcie_link(busy: Path) -> None:
    backend = _backend()
    caps = backend.caps()
    assert caps["cuda_version"] == "12.9"
    assert {"pcie_gen", "pcie_width"} <= set(caps["gpus"][0]["supported"])
    assert caps["gpus"][0]["pcie_max_gen"] == 5 and caps["gpus"][0]["pcie_max_width"] == 16
    row = backend.sample()[0]
    assert row["pcie_gen"] == 5 and row["pcie_width"] == 16  # the simulated host: Gen5 x16 of Gen5 x16
    fast = backend.sample(slow=False)[0]
    assert fast["pcie_gen"] == 5  # read at the slow cadence, carried in every tick
    assert _backend("pcie_delay=0;driver580").caps()["cuda_version"] == "13.0"
    assert _backend("pcie_delay=0;old_driver").caps()["cuda_version"] == "11.4"


def test_a_degraded_link_is_reported_as_it_is(busy: Path) -> None:
    state = gpustate.read_state(busy)
    state.gpus[3].pcie_gen, state.gpus[3].pcie_width = 4, 8
    gpustate.write_state(state, busy)
    backend = _backend()
    backend.caps()
    rows = {r["index"]: r for r in backend.sample()}
    assert (rows[3]["pcie_gen"], rows[3]["pcie_width"]) == (4, 8) and rows[2]["pcie_gen"] == 5


def test_a_driver_without_the_link_calls_leaves_the_fields_out(busy: Path) -> None:
    backend = _backend("pcie_delay=0;not_supported=pcie_gen,pcie_width")
    caps = backend.caps()
    assert "pcie_gen" not in caps["gpus"][0]["supported"] and caps["gpus"][0]["unsupported"]["pcie_gen"] == "not_supported"
    assert "pcie_gen" not in backend.sample()[0]  # never a made-up link


def test_one_process_per_gpu_for_a_serving_profile(busy: Path) -> None:
    backend = _backend()
    backend.caps()
    procs = backend.procs()
    assert sorted(p["gpu_index"] for p in procs) == list(range(8))
    assert all(p["rank"] == f"TP{p['gpu_index']}_EP{p['gpu_index']}" and p["used_mib"] > 80_000 for p in procs)


def test_the_simulators_serving_gpus_each_have_the_scheduler_process() -> None:
    model = GpuModel(load_settings("ep8-tuned"), pid=4242, rank_title=lambda i: f"sglang::scheduler_TP{i}_EP{i}")
    state = model.state(BootState(phase="serving", mem_used_gb=85.0), SchedStats())
    assert all(g.pid == 4242 and g.proc_title and g.mem_used_mib > 0 for g in state.gpus)
    assert all((g.pcie_gen, g.pcie_width) == (5, 16) for g in state.gpus)


def test_the_client_keeps_cuda_version_and_interval_from_caps() -> None:
    session = Session()
    seen = Collector(session)
    stream = GpuStream(LocalHost("x"), session)
    state = {"no_pynvml": False, "bye": False}
    stream._handle('{"type":"caps","cuda_version":"12.9","interval":0.25,"gpus":[{"index":0,"name":"G"}]}', state)
    stream._handle('{"type":"tick","seq":1,"gpus":[{"index":0,"pcie_gen":4,"pcie_width":16}]}', state)
    caps_ev, tick = seen.of("gpu_caps")[0], seen.of("gpu_sample")[0]
    assert isinstance(caps_ev, GpuCaps) and caps_ev.cuda_version == "12.9" and caps_ev.interval_s == 0.25
    assert isinstance(tick, GpuSample) and (tick.gpus[0].pcie_gen, tick.gpus[0].pcie_width) == (4, 16)


async def test_64_gpus_on_a_small_screen_get_the_summary_not_a_line_too_wide() -> None:
    m = model_of(caps(64), sample(0, {21: 12.0}, n=64, temp={i: 65.0 for i in range(64)}))
    text = await drawn(m, (50, 24), rows=3)
    lines = text.plain.split("\n")
    assert len(lines) == 3 and "spread 74 pts (GPU21)" in lines[1], lines  # who lags, though it is 1 of 64
    big = await drawn(m, (120, 40), rows=10)
    assert "16-23" in big.plain and "GPU21" in big.plain  # room for group lines: one per 8 GPUs


async def test_an_idle_gpu_training_its_link_down_is_not_an_alarm() -> None:
    """Real GPUs drop to Gen1 when idle to save power; only a link still low under load (or narrow) is yellow."""
    idle = await drawn(model_of(caps(), sample(0, 0.0, gen=1, width=16)), (120, 40))
    head = idle.plain.split("\n")[0]
    assert "PCIe Gen1 x16 (max Gen5 x16, idle)" in head, head
    at = head.index("PCIe Gen1")
    assert "yellow" not in styles_at(idle, at, at + len("PCIe Gen1 x16"))
    narrow = await drawn(model_of(caps(), sample(0, 0.0, gen=1, width=8)), (120, 40))
    at = narrow.plain.index("PCIe Gen1 x8")
    assert "yellow" in styles_at(narrow, at, at + 12)  # a lost lane is a fault, idle or not
