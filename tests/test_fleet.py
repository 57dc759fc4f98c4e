"""Several hosts in one session: simulated hosts on this machine (one over the in-process SSH server).

Each host runs its own simulated server (its own state dir and port), streams its own GPUs, swaps
and sweeps on its own; one host's link cut leaves the others streaming; the one recording holds
every host and replays as a fleet.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from kimitui.config import ConfigError, load_config
from kimitui.control import NotAvailable
from kimitui.events import Event
from kimitui.export import start_metrics
from kimitui.live import FleetController
from kimitui.recording import read_recording
from kimitui.replay.controller import ReplayController
from tests.support.net import free_port
from tests.support.waiting import event_until
from tests.test_export_prometheus import scrape

pytestmark = pytest.mark.timeout(240)


def _fleet_config(home: Path, *names: str, ssh: object | None = None, ssh_name: str = "remote") -> Path:
    """A config with simulated hosts ``names`` on this machine (a port each), and one over SSH."""
    text = ""
    for name in names:
        text += f"[hosts.{name}]\nsim = true\nsim_port = {free_port()}\n\n"
    if ssh is not None:
        text += (f"[hosts.{ssh_name}]\naddress = \"127.0.0.1\"\nport = {ssh.port}\nuser = \"{ssh.user}\"\n"
                 f"key = \"{ssh.client_key_path}\"\nknown_hosts = \"{ssh.known_hosts_path}\"\n"
                 f"agent = false\nkeepalive_s = 1\nconnect_timeout_s = 3\nsim = true\nsim_port = {free_port()}\n"
                 f"python = \"{sys.executable}\"\n")
    cfg = home / "config.toml"
    cfg.write_text(text)
    return cfg


_until = event_until


def _serving(host: str):
    return lambda e: e.kind == "profile_switch" and e.host == host and e.outcome == "ok"


def _loaded_sample(host: str):
    return lambda e: e.kind == "gpu_sample" and e.host == host and (e.gpus[0].mem_used_mib or 0) > 50_000


def test_fleet_hosts_in_the_config_are_checked_by_name(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[hosts.a]\nsim = true\n\n[fleet]\nhosts = ["a", "b"]\n')
    with pytest.raises(ConfigError, match=r"c.toml:5: fleet.hosts: fleet.hosts\[1\]: no \[hosts.b\] table"):
        load_config(cfg)
    cfg.write_text('[hosts.a]\naddress = "gpu-host.example"\nsim_port = 30011\n')
    with pytest.raises(ConfigError, match="sim_port` applies to a simulated host only"):
        load_config(cfg)
    with pytest.raises(ValueError, match="two hosts or more"):
        FleetController(["a"], config_path=None)


async def test_two_simulated_hosts_serve_stream_and_sweep_on_their_own(sim_home: Path) -> None:
    cfg = _fleet_config(sim_home, "alpha", "beta")
    rec = sim_home / "fleet.jsonl"
    fleet = FleetController(["alpha", "beta"], config_path=str(cfg), record_path=str(rec))
    sub = fleet.session.subscribe("test", maxsize=200_000)
    metrics = start_metrics(fleet.session, free_port())
    seen: list[Event] = []
    await fleet.start()
    try:
        for host in ("alpha", "beta"):
            switch = await _until(sub, _serving(host), 90, seen)
            assert switch.to_profile == "ep8-tuned"
            await _until(sub, _loaded_sample(host), 30, seen)
        # each simulated host has its own home: GPU state, run records
        homes = sim_home / "state" / "kimitui" / "sim" / "hosts"
        assert (homes / "alpha" / "gpus.json").exists() and (homes / "beta" / "gpus.json").exists()
        ports = {name: m.sim_port for name, m in fleet.members.items()}
        assert len(set(ports.values())) == 2

        # the focused host takes the actions; the other keeps serving untouched
        fleet.focus("beta")
        assert fleet.host_name == "beta" and fleet.running_profile == "ep8-tuned"
        spec = fleet.default_sweep_spec().model_copy(update={"levels": [1, 4], "max_tokens": 48, "mode": "burst",
                                                              "stop_on_oversaturation": False})
        assert str(ports["beta"]) in spec.url
        await fleet.start_sweep(spec)
        assert fleet.busy == "sweep" and fleet.busy_anywhere == {"beta": "sweep"}
        fleet.focus("alpha")
        assert fleet.busy is None  # alpha's keys stay free while beta sweeps
        result = await _until(sub, lambda e: e.kind == "sweep_result" and e.host == "beta", 90, seen)
        assert result.outcome == "completed", result.reason
        levels = [e for e in seen if e.kind == "level_result"]
        assert {lv.host for lv in levels} == {"beta"} and [lv.concurrency for lv in levels] == [1, 4]
        with pytest.raises(NotAvailable):
            fleet.focus("gamma")
        fleet.add_note("alpha looked fine")

        # the Prometheus endpoint scrapes clean, every series labelled by its host
        samples = await asyncio.to_thread(scrape, metrics)
        util_hosts = {lbl["host"] for lbl, _ in samples["kimitui_gpu_utilization_percent"]}
        assert util_hosts == {"alpha", "beta"}
        assert len(samples["kimitui_gpu_utilization_percent"]) == 16
        assert {lbl["host"] for lbl, _ in samples["kimitui_profile_info"]} == {"alpha", "beta"}
        level_hosts = {lbl["host"] for name, rows in samples.items() if name.startswith("kimitui_level_")
                       for lbl, _ in rows}
        assert level_hosts == {"beta"}
    finally:
        metrics.close()
        await fleet.shutdown()
    recording = read_recording(rec)
    assert recording.header.hosts == ["alpha", "beta"]
    assert ReplayController(rec).hosts == ["alpha", "beta"]  # replayed as a fleet (tests/test_tui_fleet.py)
    by_host = {(e.kind, e.host) for e in recording.events}
    assert {("gpu_sample", "alpha"), ("gpu_sample", "beta"), ("profile_switch", "alpha"),
            ("profile_switch", "beta"), ("level_result", "beta"), ("note", "alpha")} <= by_host


async def test_one_hosts_link_cut_leaves_the_others_streaming(sim_home: Path, ssh_server) -> None:
    cfg = _fleet_config(sim_home, "alpha", ssh=ssh_server, ssh_name="remote")
    fleet = FleetController(["remote", "alpha"], config_path=str(cfg), record=False)
    sub = fleet.session.subscribe("test", maxsize=200_000)
    seen: list[Event] = []
    await fleet.start()
    try:
        for host in ("remote", "alpha"):
            await _until(sub, _serving(host), 120, seen)
            await _until(sub, _loaded_sample(host), 30, seen)
        await ssh_server.stop()  # the remote host's link goes away like a crashed sshd
        await _until(sub, lambda e: e.kind == "connection" and e.host == "remote" and e.state in ("lost", "reconnecting"),
                     20, seen)
        cut_at = time.time()
        await asyncio.sleep(3)
        seen.extend(sub.drain())
        alpha_after = [e for e in seen if e.kind == "gpu_sample" and e.host == "alpha" and e.t > cut_at]
        assert len(alpha_after) >= 3, "alpha stopped streaming when remote's link was cut"
        await ssh_server.restart()
        await _until(sub, lambda e: e.kind == "connection" and e.host == "remote" and e.state == "connected"
                     and e.t > cut_at, 30, seen)
        back_at = time.time()
        await _until(sub, lambda e: e.kind == "gpu_sample" and e.host == "remote" and e.t > back_at, 30, seen)
    finally:
        await fleet.shutdown()


async def test_a_fleet_of_one_host_a_two_node_deployment_and_a_pd_deployment(sim_home: Path) -> None:
    """Issue 20's fleet: three hosts; pair-a swaps to a deployment over pair-a and pair-b (16 GPU rows under
    pair-a), pdh to prefill/decode with a router, swept through the router; solo keeps serving throughout."""
    cfg = _fleet_config(sim_home, "solo", "pair-a", "pair-b", "pdh")
    profiles = Path.cwd() / "profiles"
    (profiles / "two-node.toml").write_text(
        f'name = "two-node"\nextends = "ep16-2node"\nnodes = ["pair-a", "pair-b"]\n'
        f'dist_init_addr = "127.0.0.1:{free_port()}"\n[sim]\ntime_scale = 40.0\n')
    (profiles / "pd.toml").write_text(
        f'name = "pd"\nextends = "pd-1p1d"\n[sim]\ntime_scale = 40.0\n[pd]\ntransfer_backend = "mooncake"\n'
        f'[pd.prefill]\nbase_gpu_id = 0\nport = {free_port()}\nbootstrap_port = {free_port()}\n'
        f'[pd.decode]\nbase_gpu_id = 4\nport = {free_port()}\n')
    fleet = FleetController(["solo", "pair-a", "pdh"], config_path=str(cfg), record=False)
    sub = fleet.session.subscribe("test", maxsize=400_000)
    seen: list[Event] = []
    await fleet.start()
    try:
        for host in fleet.hosts:
            await _until(sub, _serving(host), 150, seen)
        fleet.focus("pair-a")
        await fleet.swap("two-node")
        fleet.focus("pdh")
        await fleet.swap("pd")
        for host, profile in (("pair-a", "two-node"), ("pdh", "pd")):
            switch = await _until(sub, lambda e, h=host, p=profile: e.kind == "profile_switch" and e.host == h
                                  and e.to_profile == p, 150, seen)
            assert switch.outcome == "ok", (switch.reason, switch.log_excerpt)
        # the second node's GPUs reach the session under the deployment's home host, tagged with their node
        await _until(sub, lambda e: e.kind == "gpu_sample" and e.host == "pair-a" and e.node == "pair-b", 30, seen)
        spec = fleet.default_sweep_spec().model_copy(update={"levels": [1, 4], "max_tokens": 32, "mode": "burst",
                                                              "stop_on_oversaturation": False})
        await fleet.start_sweep(spec)  # pdh is focused: through its router
        result = await _until(sub, lambda e: e.kind == "sweep_result" and e.host == "pdh", 120, seen)
        assert result.outcome == "completed", result.reason
        levels = [e for e in seen if e.kind == "level_result" and e.host == "pdh"]
        assert [lv.failed for lv in levels] == [0, 0] and [lv.ok for lv in levels] == [1, 4]
        # the server figures come from the decode server, the KV transfer figures from the prefill server
        await _until(sub, lambda e: e.kind == "server_stats" and e.host == "pdh" and e.source == "metrics"
                     and e.gen_throughput is not None, 30, seen)
        await _until(sub, lambda e: e.kind == "server_stats" and e.host == "pdh"
                     and "kv_transfer_latency_ms" in e.extra, 30, seen)
        assert not [e for e in seen if e.kind == "profile_switch" and e.host == "solo" and e.to_profile != "ep8-tuned"]
    finally:
        await fleet.shutdown()
