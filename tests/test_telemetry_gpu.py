"""GpuStream: the real agent shipped over a Host (local, and a real in-process SSH server)."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import pytest

from kimitui.events import ErrorEvent, GpuCaps, GpuEvent, GpuProcs, GpuSample
from kimitui.host.local import LocalHost
from kimitui.session import Session
from kimitui.telemetry.gpu import BOOTSTRAP, GpuStream
from tests.support.agentproc import write_busy_state
from tests.support.sshd import SSHTestServer
from tests.support.telemetry import Collector, processes_with, wait_gone


@pytest.fixture
def sim_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "gpus.json"
    write_busy_state(state)
    monkeypatch.setenv("KIMITUI_SIM_STATE", str(state))
    monkeypatch.setenv("KIMITUI_FAKE_NVML", "pcie_delay=0.001")
    return state


def _stream(host, session, tag: str, **kw) -> GpuStream:  # type: ignore[no-untyped-def]
    return GpuStream(host, session, interval=0.1, backend="fake", python=sys.executable,
                     agent_args=("--tag", tag, "--procs-interval", "0.3"), min_backoff_s=0.2, **kw)


async def test_local_stream_publishes_caps_samples_procs_and_stops_cleanly(sim_gpus: Path) -> None:
    session, tag = Session(), f"t-{uuid.uuid4().hex}"
    seen = Collector(session)
    gpu = _stream(LocalHost("sim"), session, tag)
    await gpu.start()
    try:
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) >= 5 and any(
            e.kind == "gpu_procs" for e in ev))
    finally:
        await gpu.stop()
    caps = seen.of("gpu_caps")
    assert len(caps) == 1 and isinstance(caps[0], GpuCaps)
    assert caps[0].backend == "fake" and len(caps[0].gpus) == 8 and caps[0].host == "sim"
    assert caps[0].gpus[0].power_limit_w == 600.0 and "power_w" in caps[0].gpus[0].supported
    assert caps[0].features["memory_api"] == "memory_v2"
    samples = [e for e in seen.of("gpu_sample") if isinstance(e, GpuSample)]
    seqs = [s.seq for s in samples]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    r3 = next(g for g in samples[-1].gpus if g.index == 3)
    assert r3.util_pct == 93.0 and r3.uuid == caps[0].gpus[3].uuid
    assert samples[-1].host_t is not None
    procs = next(e for e in seen.of("gpu_procs") if isinstance(e, GpuProcs))
    assert {p.rank for p in procs.procs} == {f"TP{i}_EP{i}" for i in range(8)}
    assert not seen.of("error"), seen.of("error")
    assert await wait_gone(tag) == []  # stop() leaves no agent behind


async def test_agent_killed_is_restarted_and_the_gap_is_marked(sim_gpus: Path) -> None:
    session, tag = Session(), f"t-{uuid.uuid4().hex}"
    seen = Collector(session)
    gpu = _stream(LocalHost("sim"), session, tag)
    await gpu.start()
    try:
        await seen.wait_for(lambda ev: any(e.kind == "gpu_sample" for e in ev))
        pids = processes_with(tag)
        assert len(pids) == 1
        import os
        import signal

        os.kill(pids[0], signal.SIGKILL)
        await seen.wait_for(lambda ev: any(e.kind == "gpu_event" and e.event == "gap" for e in ev), timeout=20)
        n = len(seen.of("gpu_sample"))
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) > n + 2)
        # A fixed window on purpose: streaming fine for a second. The next gap is measured from its own
        # start; were it measured from the first kill, it would exceed the bound asserted below by this much.
        await asyncio.sleep(1.0)
        killed_at = time.time()
        os.kill(processes_with(tag)[0], signal.SIGKILL)
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_event" and e.event == "gap"]) == 2)
    finally:
        await gpu.stop()
    assert gpu.starts == 3
    assert len(seen.of("gpu_caps")) == 3
    gap_events = seen.of("gpu_event")
    second = float(gap_events[1].detail.split(" a ")[1].split(" s ")[0])
    assert 0 < second <= gap_events[1].t - killed_at + 0.5  # from the last sample before the second kill
    errors = [e for e in seen.of("error") if isinstance(e, ErrorEvent)]
    assert any(e.source == "gpu" and "interrupted" in e.message for e in errors)
    assert await wait_gone(tag) == []


def test_bad_frames_are_counted_reported_once_and_skipped() -> None:
    session = Session()
    seen = Collector(session)
    gpu = GpuStream(LocalHost("x"), session)
    state = {"no_pynvml": False, "bye": False}
    for line in ["not json", '{"type":"tick","gpus":[{"index":"zero"}]}', '{"type":"warp"}', "[1,2]",
                 '{"type":"tick","seq":1,"gpus":[{"index":0,"util_pct":5,"future_field":1}]}']:
        gpu._handle(line, state)
    assert len(seen.of("error")) == 1 and gpu.bad_frames == 4  # once, not one per frame (issue 13)
    assert "not JSON" in seen.of("error")[0].detail  # type: ignore[attr-defined]
    sample = seen.of("gpu_sample")[0]
    assert isinstance(sample, GpuSample) and sample.gpus[0].util_pct == 5.0
    gpu._report_bad_frames()  # what the end of an agent (or the next minute) says: the count
    assert "4 frames skipped in all" in seen.of("error")[-1].message  # type: ignore[attr-defined]


BAD_FRAMES = [
    '{"type":"tick","seq":99,"t":1.0,"gpus":[{"util_pct":5.0}]}',  # no index: restarted the agent 4 times
    "[" * 100000,  # RecursionError
    '{"type":"tick","seq":1e400,"gpus":[]}',  # OverflowError (int(inf))
    '{"type":"tick","seq":' + "9" * 5000 + ',"gpus":[]}',  # more digits than int() takes
    '{"type":"caps","gpus":[{"uuid":"GPU-x","name":"x"}]}',  # caps without index: KeyError
    '{"type":"procs","procs":[1,2]}',
    '{"type":"tick","seq":3,"gpus":{"index":0}}',
    '{"type":"tick","seq":4,"gpus":[{"index":0,"util_pct":NaN}]}',
    '{"type":"tick","seq":5,"gpus":[{"index":0,"power_w":1e999}]}',
    "x" * 300000,
]
INJECT = """import sys
ticks = 0
for line in sys.stdin:
    sys.stdout.write(line)
    if line.startswith('{"type":"tick"'):
        ticks += 1
        if ticks == 3:
            sys.stdout.write(open(sys.argv[1]).read())
    sys.stdout.flush()
"""


async def test_bad_frames_between_good_ones_are_skipped_and_the_ticks_after_them_arrive(
    sim_gpus: Path, tmp_path: Path
) -> None:
    """The real agent, its output passed through a filter that puts bad frames after its 3rd tick."""
    (tmp_path / "bad.jsonl").write_text("".join(line + "\n" for line in BAD_FRAMES))
    (tmp_path / "inject.py").write_text(INJECT)
    python = tmp_path / "python-injecting"
    python.write_text(f'#!/bin/sh\n"{sys.executable}" "$@" | "{sys.executable}" -u "{tmp_path}/inject.py" '
                      f'"{tmp_path}/bad.jsonl"\n')
    python.chmod(0o755)
    session, tag = Session(), f"t-{uuid.uuid4().hex}"
    seen = Collector(session)
    gpu = GpuStream(LocalHost("sim"), session, interval=0.1, backend="fake", python=str(python),
                    agent_args=("--tag", tag), min_backoff_s=0.2)
    await gpu.start()
    try:
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) >= 10)
        assert gpu.bad_frames == len(BAD_FRAMES)
    finally:
        await gpu.stop()
    samples = [e for e in seen.of("gpu_sample") if isinstance(e, GpuSample)]
    seqs = [s.seq for s in samples]
    assert seqs == list(range(len(seqs))), seqs  # not one good tick lost, none from the bad frames
    assert all(len(s.gpus) == 8 for s in samples)
    assert gpu.starts == 1 and len(seen.of("gpu_caps")) == 1  # the agent was never restarted
    errors = [e for e in seen.of("error") if isinstance(e, ErrorEvent)]
    assert [e.message for e in errors] == [
        "GPU agent sent a frame kimitui does not understand; such frames are skipped",
        f"GPU agent: {len(BAD_FRAMES)} frames skipped in all ({len(BAD_FRAMES) - 1} since the last report)",
    ], errors
    assert "without 'index'" in errors[0].detail
    assert await wait_gone(tag) == []


def test_bootstrap_is_a_single_argument_without_newlines() -> None:
    assert "\n" not in BOOTSTRAP and "'" in BOOTSTRAP  # survives shlex quoting over SSH
    argv = GpuStream(LocalHost("x"), Session(), backend="pynvml").argv()
    assert argv[:4] == ["python3", "-u", "-c", BOOTSTRAP] and "--heartbeat" in argv
    sim = GpuStream(LocalHost("sim"), Session(), backend="fake").argv()  # the config's default "python3"
    assert sim[0] == sys.executable and "--pythonpath" in sim


async def test_over_ssh_the_link_dies_the_stream_resumes_and_no_agent_is_orphaned(
    sim_gpus: Path, ssh_server: SSHTestServer
) -> None:
    session, tag = Session(), f"t-{uuid.uuid4().hex}"
    seen = Collector(session)
    host = ssh_server.make_host("gpu-host")
    host.set_event_callback(session.publish)
    await host.connect()
    gpu = _stream(host, session, tag)
    await gpu.start()
    try:
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) >= 3)
        assert len(processes_with(tag)) == 1
        await ssh_server.stop()  # the link dies like a crashed sshd
        await seen.wait_for(lambda ev: any(e.kind == "error" and e.source == "gpu" for e in ev))
        assert await wait_gone(tag) == []  # no agent survives the dropped link
        before = len(seen.of("gpu_sample"))
        await ssh_server.restart()
        await seen.wait_for(lambda ev: any(e.kind == "gpu_event" and e.event == "gap" for e in ev), timeout=30)
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) >= before + 3)
        assert len(processes_with(tag)) == 1  # exactly one agent after the resume
    finally:
        await gpu.stop()
        await host.close()
    assert await wait_gone(tag) == []
    assert len(seen.of("gpu_caps")) == 2 and gpu.starts >= 2
    states = [e.state for e in seen.of("connection")]
    assert "lost" in states and states.count("connected") >= 2
    gap = next(e for e in seen.of("gpu_event") if isinstance(e, GpuEvent) and e.event == "gap")
    assert "resumed after" in gap.detail and gap.host == "gpu-host"


async def test_a_lost_gpu_is_an_event_and_the_other_seven_keep_streaming(
    sim_gpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIMITUI_FAKE_NVML", "lost=5@0.3;pcie_delay=0.001")
    session, tag = Session(), f"t-{uuid.uuid4().hex}"
    seen = Collector(session)
    gpu = _stream(LocalHost("sim"), session, tag)
    await gpu.start()
    try:
        await seen.wait_for(lambda ev: any(e.kind == "gpu_event" and e.event == "lost" for e in ev))
        n = len(seen.of("gpu_sample"))
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) >= n + 3)
    finally:
        await gpu.stop()
    lost = [e for e in seen.of("gpu_event") if isinstance(e, GpuEvent)]
    assert [(e.event, e.gpu_index) for e in lost] == [("lost", 5)]
    assert {g.index for g in seen.of("gpu_sample")[-1].gpus} == set(range(8)) - {5}
    assert gpu.starts == 1  # one GPU lost is not a reason to restart the agent


async def test_host_without_pynvml_falls_back_to_nvidia_smi(tmp_path: Path) -> None:
    python = tmp_path / "python-without-site"  # -S: no site-packages, so no pynvml, like a bare host
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    python.chmod(0o755)
    smi = tmp_path / "nvidia-smi"
    row = "{i}, GPU-{i}, NVIDIA RTX PRO 6000 Blackwell Server Edition, 50, 20, 1000, 97887, 300.5, 600.00, 60, 2000, 14000, P1, 0x0000000000000000, 5, 16"
    # like nvidia-smi -lms: a block every interval until its stdout breaks
    smi.write_text("#!/bin/sh\nwhile cat <<'EOF'\n" + "\n".join(row.format(i=i) for i in range(8)) + "\nEOF\ndo sleep 0.1; done\n")
    smi.chmod(0o755)
    session, tag = Session(), f"t-{uuid.uuid4().hex}"
    seen = Collector(session)
    gpu = GpuStream(LocalHost("bare"), session, interval=0.1, backend="pynvml", python=str(python),
                    agent_args=("--tag", tag, "--nvidia-smi", str(smi)))
    await gpu.start()
    try:
        await seen.wait_for(lambda ev: len([e for e in ev if e.kind == "gpu_sample"]) >= 3)
    finally:
        await gpu.stop()
    messages = [e.message for e in seen.of("error")]
    assert any("falling back to nvidia-smi" in m for m in messages)
    caps = seen.of("gpu_caps")[-1]
    assert isinstance(caps, GpuCaps) and caps.backend == "nvidia-smi" and len(caps.gpus) == 8
    sample = seen.of("gpu_sample")[-1]
    assert len(sample.gpus) == 8 and sample.gpus[0].power_w == 300.5 and sample.gpus[0].uuid == "GPU-0"
    assert await wait_gone(tag) == [] and await wait_gone(str(smi)) == []
