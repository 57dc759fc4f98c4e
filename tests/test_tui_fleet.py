"""The cockpit over a fleet: the strip, focusing a host (the whole cockpit follows), all GPUs grouped,
a lost link named by host, and a fleet recording replayed the same way."""

from __future__ import annotations

from pathlib import Path

from kimitui.events import ConnectionState, Event, ProfileState, ServerStats
from kimitui.recording import RecordingWriter
from kimitui.replay.controller import ReplayController
from kimitui.tui.app import KimituiApp
from kimitui.tui.renderables.fleet_render import fleet_gpus
from kimitui.tui.screens.fleet_gpus import FleetGpus
from kimitui.tui.widgets.fleet_strip import FleetStrip
from kimitui.tui.widgets.header_bar import HeaderBar
from tests.support.fakecontrol import T0, FakeController, caps, gpu_sample
from tests.support.tuiscreen import screen_text

HOSTS = {"gpu-a": ("ep8-tuned", "serving", 80.0, 1538.0), "gpu-b": ("pd-1p1d", "serving", 40.0, 862.0),
         "gpu-c": ("ep16-2node", "starting", 5.0, None)}


def fleet_events(t: float = T0) -> list[Event]:
    out: list[Event] = []
    for host, (profile, state, util, gen) in HOSTS.items():
        sample = gpu_sample(t + 1, util)
        out += [ConnectionState(t=t, host=host, state="connected"), caps(t).model_copy(update={"host": host}),
                sample.model_copy(update={"host": host}),
                ProfileState(t=t + 1, host=host, profile=profile, state=state)]
        if gen is not None:
            out.append(ServerStats(t=t + 2, host=host, source="metrics", gen_throughput=gen, running_reqs=16))
    return out


class FakeFleet(FakeController):
    """The fake controller over three hosts: actions go to the focused one (``focus`` records the call)."""

    def __init__(self) -> None:
        super().__init__(initial=fleet_events())
        self.hosts = list(HOSTS)
        self.host_name = self.hosts[0]

    def focus(self, host: str) -> None:
        self.calls.append(("focus", host))
        self.host_name = host

    @property
    def busy_anywhere(self) -> dict[str, str]:
        return {self.host_name: self.busy} if self.busy else {}


def strip_text(app: KimituiApp) -> str:
    return str(app.query_one(FleetStrip).render())


async def test_the_strip_names_every_host_and_o_focuses_the_next_one_everywhere() -> None:
    ctl = FakeFleet()
    app = KimituiApp(ctl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        lines = strip_text(app).splitlines()
        assert len(lines) == 3
        assert lines[0].startswith("▶ gpu-a") and "ep8-tuned" in lines[0] and "1,538 tok/s" in lines[0]
        assert "pd-1p1d" in lines[1] and "862 tok/s" in lines[1] and "8 GPUs" in lines[1]
        assert "ep16-2node" in lines[2] and "starting" in lines[2]
        assert "ep8-tuned" in str(app.query_one(HeaderBar).render())

        await pilot.press("o")
        await pilot.pause()
        assert ("focus", "gpu-b") in ctl.calls and app.fleet.focused == "gpu-b"
        assert app.model is app.fleet.models["gpu-b"]
        assert "pd-1p1d" in str(app.query_one(HeaderBar).render())  # every panel follows the focused host
        assert strip_text(app).splitlines()[1].startswith("▶ gpu-b")
        text = screen_text(app)
        assert "40%" in text or "40 %" in text or "39%" in text  # gpu-b's utilisation in the GPU panel

        await pilot.press("O")
        await pilot.pause()
        assert app.fleet.focused == "gpu-a"

        # a lost link on an unfocused host: its line says so, and a toast names it
        ctl.session.publish(ConnectionState(t=T0 + 5, host="gpu-c", state="lost", detail="keepalive timeout"))
        app.pump(force_charts=True)
        await pilot.pause()
        assert "lost" in strip_text(app).splitlines()[2]
        assert any("gpu-c: connection lost" in str(n.message) for n in app._notifications)

        await pilot.press("G")
        await pilot.pause()
        assert isinstance(app.screen, FleetGpus)
        await pilot.press("escape")
        await pilot.pause()


def test_all_gpus_are_grouped_by_host() -> None:
    from rich.console import Console

    from kimitui.tui.model.fleet_state import FleetModels

    fleet = FleetModels(list(HOSTS), fleet=True)
    fleet.apply(fleet_events())
    console = Console(width=160, record=True, color_system=None)
    console.print(fleet_gpus(fleet))
    text = console.export_text()
    starts = [text.index(host) for host in HOSTS]
    assert starts == sorted(starts)
    assert text.count("GPU7") == 3 and "ep16-2node" in text


async def test_one_host_has_no_strip_and_no_fleet_keys() -> None:
    app = KimituiApp(FakeController(), tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        assert not app.query(FleetStrip)
        assert app.check_action("focus_host", ()) is False and app.check_action("fleet_gpus", ()) is False


async def test_a_fleet_recording_replays_as_a_fleet(tmp_path: Path) -> None:
    path = tmp_path / "fleet.jsonl"
    writer = RecordingWriter(path, hosts=list(HOSTS))
    for ev in fleet_events():
        writer(ev)
    writer.close()
    ctl = ReplayController(path, speed=None)
    assert ctl.hosts == list(HOSTS)
    app = KimituiApp(ctl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(20):
            await pilot.pause(0.05)
            app.pump(force_charts=True)
            if app.fleet.models["gpu-c"].profile:
                break
        assert app.fleet.fleet and [m.profile for m in app.fleet.models.values()] == ["ep8-tuned", "pd-1p1d",
                                                                                      "ep16-2node"]
        app.pump(force_charts=True)
        await pilot.pause()
        assert len(strip_text(app).splitlines()) == 3
        await pilot.press("o")
        await pilot.pause()
        assert app.fleet.focused == "gpu-b" and ctl.host_name == "gpu-b"


def test_a_two_node_deployment_shows_sixteen_gpu_rows_and_a_new_profile_drops_them() -> None:
    from kimitui.tui.model.cockpit_state import CockpitModel

    m = CockpitModel(host="pair-a")
    m.apply([caps(T0), gpu_sample(T0, 50.0), gpu_sample(T0, 20.0).model_copy(update={"node": "pair-b"})])
    assert sorted(m.gpus) == list(range(16))
    assert m.gpus[8].rank == "pair-b" and m.gpus[8].static is not None and m.gpus[0].rank is None
    assert m.gpus[8].reading.index == 8 and m.gpus[8].reading.util_pct == 20.0 and m.gpus[0].reading.util_pct == 50.0
    m.apply([ProfileState(t=T0 + 9, host="pair-a", profile="ep8-tuned", state="starting")])
    assert sorted(m.gpus) == list(range(8)) and m.nodes == []


async def test_a_pd_server_shows_its_queues_and_kv_transfer_in_the_server_panel() -> None:
    from kimitui.tui.widgets.server_panel import ServerPanel

    pd = ServerStats(t=T0 + 3, source="metrics", gen_throughput=700.0, running_reqs=8,
                     extra={"num_decode_transfer_queue_reqs": 3.0, "kv_transfer_latency_ms": 41.2,
                            "kv_transfer_speed_gb_s": 27.9, "num_transfer_failed_reqs_total": 1.0})
    ctl = FakeController(initial=[ConnectionState(t=T0, state="connected"), caps(T0), gpu_sample(T0, 50.0),
                                  ProfileState(t=T0, profile="pd-1p1d", state="serving"), pd])
    app = KimituiApp(ctl, tick=None)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.pump(force_charts=True)
        await pilot.pause()
        text = str(app.query_one(ServerPanel).render())
        assert "PD" in text and "xfer 3" in text and "41.2 ms" in text and "27.9 GB/s" in text and "xfail 1" in text
        assert app.query_one(ServerPanel).size.height == 8 and "health" in text  # one row more, health kept


def test_a_deployments_log_lines_say_which_process_and_merge_ranks_per_process() -> None:
    from kimitui.events import LogLine
    from kimitui.tui.model.cockpit_state import CockpitModel

    m = CockpitModel(host="pair-a")
    line = "[2026-12-05 22:01:19 TP{r} EP{r}] Capture cuda graph end. Time elapsed: 1.31 s."
    m.apply([LogLine(t=T0, host="pair-a", raw=line.format(r=r), line_kind="startup", node=node)
             for node, ranks in (("node-0", range(8)), ("node-1@pair-b", range(8, 16))) for r in ranks])
    from kimitui.tui.widgets.log_panel import format_entry

    shown = [format_entry(e).split(" ", 3)[3].lstrip() for e in m.logs]
    assert shown == ["[node-0] [TP0–7 EP0–7] Capture cuda graph end. Time elapsed: 1.31 s.",
                     "[node-1@pair-b] [TP8–15 EP8–15] Capture cuda graph end. Time elapsed: 1.31 s."]
