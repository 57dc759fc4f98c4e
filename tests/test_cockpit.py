"""The live controller on the embedded simulated host: real launcher, sim server,
GPU agent (fake NVML), log follower, metrics poller, sweep worker and recorder."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.live import LiveController
from kimitui.control import NotAvailable
from kimitui.events import ConnectionState, ProfileSwitch
from kimitui.recording import read_recording
from tests.support.net import free_port
from tests.support.waiting import event_until


_until = event_until


async def test_newcomer_session_starts_known_good_profile_streams_everything_and_records(sim_home: Path):
    rec = sim_home / "session.jsonl"
    c = LiveController(record_path=str(rec))
    sub = c.session.subscribe("test", maxsize=100_000)
    seen: list = []
    await c.start()
    try:
        switch = await _until(sub, lambda e: e.kind == "profile_switch", 60, seen)
        assert switch.to_profile == "ep8-tuned" and switch.outcome == "ok", switch
        # The startup showed progress, in order, and the log reached the session.
        phases = [e.phase for e in seen if e.kind == "swap_progress"]
        assert phases.index("weights") < phases.index("cuda_graph") < phases.index("ready")
        await _until(sub, lambda e: e.kind == "log_line" and "fired up and ready to roll" in e.raw, 20, seen)
        sample = await _until(sub, lambda e: e.kind == "gpu_sample" and (e.gpus[0].mem_used_mib or 0) > 50_000, 20, seen)
        assert len(sample.gpus) == 8
        await _until(sub, lambda e: e.kind == "server_stats" and e.source == "metrics", 20, seen)

        assert c.mark_baseline() == "ep8-tuned"
        plan = c.plan_swap("ep8-v2")
        assert plan.confounded and "confounded" in " ".join(plan.warnings)
        assert set(plan.changes) >= {"enable_eplb", "num_continuous_decode_steps"}
        assert any("ep8-eplb" == v or "eplb" in v for v in plan.variants)

        spec = c.default_sweep_spec().model_copy(update={"levels": [1, 4], "max_tokens": 64, "mode": "burst", "stop_on_oversaturation": False})
        await c.start_sweep(spec)
        assert c.busy == "sweep"
        with pytest.raises(NotAvailable):
            await c.swap("ep8-v2")
        result = await _until(sub, lambda e: e.kind == "sweep_result", 60, seen)  # the levels came before it
        seen.extend(sub.drain())
        assert result.outcome == "completed", result.reason
        levels = [e for e in seen if e.kind == "level_result"]
        assert [lv.concurrency for lv in levels] == [1, 4]
        assert all(lv.ok == lv.concurrency and lv.failed == 0 for lv in levels)
        assert levels[1].agg_tok_s > levels[0].agg_tok_s  # batching pays off
        c.add_note("baseline done")
        c.add_marker("m1")  # no wait: shutdown() flushes the recording before it returns
    finally:
        await c.shutdown()
    recording = read_recording(rec)
    kinds = {e.kind for e in recording.events}
    assert {"gpu_sample", "log_line", "profile_switch", "level_result", "note", "marker", "baseline"} <= kinds
    assert recording.skipped == []


async def test_default_recording_is_named_after_the_profile_and_keeps_the_first_events(sim_home: Path):
    c = LiveController()
    sub = c.session.subscribe("t", maxsize=100_000)
    seen: list = []
    await c.start()
    try:
        await _until(sub, lambda e: e.kind == "profile_switch", 60, seen)
        path = c.recording_path
        assert path is not None and Path(path).name.startswith("sim-") and path.endswith("-ep8-tuned.jsonl.gz")
        assert Path(path).is_relative_to(sim_home / "data")
        assert Path(path).read_bytes()[:2] == b"\x1f\x8b"  # compressed while recording, under the name shown
    finally:
        await c.shutdown()
    assert c.last_recording_path == path  # one profile ran: the name stays
    recording = read_recording(path)
    # the connection event published before the recorder opened is in the file, first
    first_event = recording.events[0]
    assert isinstance(first_event, ConnectionState) and first_event.state == "connected"


async def test_a_recording_of_several_profiles_is_named_after_all_of_them(sim_home: Path):
    (Path.cwd() / "profiles" / "ep8-v2.toml").write_text(
        f'extends = "ep8-v2"\nport = {free_port()}\n[sim]\ntime_scale = 40.0\n')
    c = LiveController()
    sub = c.session.subscribe("t", maxsize=100_000)
    seen: list = []
    await c.start()
    try:
        await _until(sub, lambda e: e.kind == "profile_switch", 60, seen)
        first = c.recording_path
        assert first is not None and first.endswith("-ep8-tuned.jsonl.gz")
        await c.swap("ep8-v2")
        switch = await _until(sub, lambda e: e.kind == "profile_switch" and e.to_profile == "ep8-v2", 90, seen)
        assert switch.outcome == "ok", switch
        assert c.recording_path == first  # while recording, the name on disk
    finally:
        await c.shutdown()
    final = c.last_recording_path
    assert final is not None and final == first.replace("-ep8-tuned.jsonl.gz", "-ep8-tuned+ep8-v2.jsonl.gz")
    assert Path(final).exists() and not Path(first).exists()
    assert any(isinstance(e, ProfileSwitch) and e.to_profile == "ep8-v2" for e in read_recording(final).events)


async def test_unreachable_host_is_an_error_event_not_an_exception(sim_home: Path):
    cfg = sim_home / "config.toml"
    cfg.write_text('[hosts.ct200]\naddress = "127.0.0.1"\nport = 1\nuser = "nobody"\nconnect_timeout_s = 2\n')
    c = LiveController(config_path=str(cfg), host="ct200", record=False)
    sub = c.session.subscribe("t")
    await c.start()
    try:
        seen: list = []
        err = await _until(sub, lambda e: e.kind == "error", 20, seen)
        assert "ct200" in err.message and "retrying" in err.message
        with pytest.raises(NotAvailable):
            await c.swap("ep8-tuned")
    finally:
        await c.shutdown()


async def test_configured_host_over_ssh_comes_up_later_and_the_whole_story_runs_through_the_link(
    sim_home: Path, ssh_server
):
    """[hosts.ct200] reached over a real SSH link: down at start (retried), then the
    simulated server is launched, followed and measured through the link; a dropped
    link is reported and telemetry comes back by itself."""
    import sys

    cfg = sim_home / "config.toml"
    cfg.write_text(
        "[hosts.ct200]\n"
        f'address = "127.0.0.1"\nport = {ssh_server.port}\nuser = "{ssh_server.user}"\n'
        f'key = "{ssh_server.client_key_path}"\nknown_hosts = "{ssh_server.known_hosts_path}"\n'
        f'agent = false\nkeepalive_s = 2\nconnect_timeout_s = 3\nsim = true\npython = "{sys.executable}"\n'
    )
    await ssh_server.stop()
    c = LiveController(config_path=str(cfg), record=False)
    sub = c.session.subscribe("t", maxsize=100_000)
    seen: list = []
    await c.start()
    try:
        err = await _until(sub, lambda e: e.kind == "error" and "retrying" in e.message, 20, seen)
        assert c.host_name == "ct200" and "ct200" in err.message
        await ssh_server.restart()
        switch = await _until(sub, lambda e: e.kind == "profile_switch", 90, seen)
        assert switch.outcome == "ok" and switch.host == "ct200"
        await _until(sub, lambda e: e.kind == "gpu_sample" and (e.gpus[0].mem_used_mib or 0) > 50_000, 30, seen)
        await _until(sub, lambda e: e.kind == "server_stats" and e.source == "metrics", 30, seen)
        # the link drops: said in the header's terms, then everything resumes by itself
        await ssh_server.stop()
        await _until(sub, lambda e: e.kind == "connection" and e.state == "lost", 20, seen)
        await ssh_server.restart()
        mark = len(seen)
        await _until(sub, lambda e: e.kind == "connection" and e.state == "connected", 30, seen)
        await _until(sub, lambda e: e.kind == "gpu_sample" and seen.index(e) > mark, 30, seen)
    finally:
        await c.shutdown()
