"""A PD deployment (prefill server, decode server, router) swapped and rolled back as one, on the simulated host.

Real processes on 127.0.0.1: the simulator in prefill and decode mode, the simulated router, the
ProcessLauncher's run records, /health and a warm-up request through the router.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from kimitui.host.local import LocalHost
from kimitui.launcher.process import ProcessLauncher
from kimitui.launcher.select import find_running
from kimitui.launcher.swap import SwapOptions, swap
from kimitui.session import Session
from tests.support.net import free_port

pytestmark = pytest.mark.timeout(240)

SIM = '[sim]\ntime_scale = 100.0\n'


def _pd_profile(profiles: Path, name: str, router_port: int, *, decode_port: int | None = None) -> Path:
    path = profiles / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nextends = "pd-1p1d"\nport = {router_port}\n{SIM}'
        f'[pd]\n[pd.prefill]\nbase_gpu_id = 0\nport = {free_port()}\nbootstrap_port = {free_port()}\n'
        f'[pd.decode]\nbase_gpu_id = 4\nport = {decode_port or free_port()}\n')
    return path


def _good_profile(profiles: Path, port: int) -> Path:
    path = profiles / "good.toml"
    path.write_text(f'name = "good"\nextends = "ep8-tuned"\nport = {port}\n{SIM}')
    return path


async def _alive(launcher: ProcessLauncher) -> list[tuple[str, str | None]]:
    return sorted([(r.profile, r.role) for r in await launcher.records() if await launcher.alive(r)])


async def _chat(port: int) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        model = (await http.get(f"http://127.0.0.1:{port}/v1/models")).json()["data"][0]["id"]
        return await http.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                               json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})


async def test_pd_deployment_swaps_in_serves_through_the_router_and_swaps_out_whole(sim_home: Path) -> None:
    profiles, port = sim_home / "cwd" / "profiles", free_port()
    good, pd = _good_profile(profiles, port), _pd_profile(profiles, "pd", port)
    session = Session(host="sim")
    events: list = []
    session.add_sink(events.append)
    async with LocalHost("sim", simulated=True) as host:
        launcher = ProcessLauncher(host, simulated=True, state_dir=str(sim_home / "state" / "kt"))
        try:
            assert (await swap(host, str(good), SwapOptions(timeout=60), session=session, launcher=launcher)).ok
            out = await swap(host, str(pd), SwapOptions(timeout=90), session=session, launcher=launcher)
            assert out.ok and out.serving == "pd" and out.previous == "good", out.reason
            assert await _alive(launcher) == [("pd", "decode-0"), ("pd", "prefill-0"), ("pd", "router")]
            assert out.record is not None and out.record.role == "router" and out.record.entry
            assert sorted(m.role or "" for m in out.record.members) == ["decode-0", "prefill-0"]
            assert len({r.deployment for r in await launcher.records()}) == 1
            resp = await _chat(port)
            assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"], resp.text
            found = await find_running(host, state_dir=str(sim_home / "state" / "kt"))
            assert found is not None and found[1].run_id == out.record.run_id
            tagged = [e.message for e in events if e.kind == "swap_progress" and e.profile == "pd"]
            assert any(m.startswith("decode-0: ") for m in tagged) and any(m.startswith("prefill-0: ") for m in tagged)

            back = await swap(host, str(good), SwapOptions(timeout=60), session=session, launcher=launcher)
            assert back.ok and back.previous == "pd", back.reason
            assert await _alive(launcher) == [("good", None)]
        finally:
            for rec in await launcher.records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2.0)


async def test_a_failing_decode_server_rolls_the_whole_deployment_back(sim_home: Path) -> None:
    profiles, port = sim_home / "cwd" / "profiles", free_port()
    good = _good_profile(profiles, port)
    session = Session(host="sim")
    async with LocalHost("sim", simulated=True) as host:
        launcher = ProcessLauncher(host, simulated=True, state_dir=str(sim_home / "state" / "kt"))
        try:
            assert (await swap(host, str(good), SwapOptions(timeout=60), session=session, launcher=launcher)).ok
            # the decode server's GPUs are not on the host (base_gpu_id 6 + TP4): it exits at start, after the
            # prefill server and the router were started
            bad = _pd_profile(profiles, "pd-bad", port)
            bad.write_text(bad.read_text().replace("base_gpu_id = 4", "base_gpu_id = 6"))
            out = await swap(host, str(bad), SwapOptions(timeout=90), session=session, launcher=launcher)
            assert out.outcome == "rolled_back" and out.serving == "good", out.reason
            assert "decode-0" in out.reason, out.reason
            assert out.log_excerpt and all(line.startswith("[decode-0] ") for line in out.log_excerpt), out.log_excerpt
            assert await _alive(launcher) == [("good", None)]
            async with httpx.AsyncClient(trust_env=False) as http:
                assert (await http.get(f"http://127.0.0.1:{port}/health")).status_code == 200
        finally:
            for rec in await launcher.records():
                if await launcher.alive(rec):
                    await launcher.stop(rec, grace_s=2.0)
