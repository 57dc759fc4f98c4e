"""A model split over two simulated nodes (``--nnodes 2``): start-up, load on both hosts, and how a failing
node takes the deployment down (docs/pd.md)."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.net import free_port
from tests.support.simserver import SimServerProcess, start_sim
from tests.support.waiting import wait_until

SCALE = 50.0


@contextmanager
def two_nodes(fault1: str | None = None, rank0_wait: bool = True) -> Iterator[tuple[SimServerProcess, SimServerProcess, Path]]:
    folder = Path(tempfile.mkdtemp(prefix="kimitui-2n-"))
    addr = f"127.0.0.1:{free_port()}"
    common = ["--nnodes", "2", "--dist-init-addr", addr, "--dist-timeout", "20"]
    node0 = start_sim("ep8-tuned", time_scale=SCALE, wait_ready=False, extra_args=[*common, "--node-rank", "0"],
                      env={"KIMITUI_SIM_STATE": str(folder / "a" / "gpus.json")})
    node1 = start_sim("ep8-tuned", time_scale=SCALE, wait_ready=False, fault=fault1, extra_args=[*common, "--node-rank", "1"],
                      env={"KIMITUI_SIM_STATE": str(folder / "b" / "gpus.json")})
    try:
        node0.start()
        node1.start()
        if rank0_wait:
            node0.wait_healthy(node0.ready_timeout)
        yield node0, node1, folder
    finally:
        node1.stop()
        node0.stop()
        node0.cleanup()
        node1.cleanup()


def test_two_nodes_serve_one_model_and_both_hosts_show_load() -> None:
    from kimitui.sim.nvml import _shard_states

    with two_nodes() as (node0, node1, folder):
        r = httpx.post(node0.url + "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                                 "max_tokens": 20}, timeout=20)
        assert r.status_code == 200
        assert node1.health() is None  # rank 1 serves no HTTP
        text = node1.output()
        assert "TP4 EP4] Load weight end." in text and "TP7 EP7] Load weight end." in text and "TP0" not in text
        assert "TP3 EP3] Load weight end." in node0.output()
        wait_until(lambda: _shard_states(folder / "b" / "gpus.json"), 5, "node 1's GPU state")
        gpus = _shard_states(folder / "b" / "gpus.json")[0].gpus
        assert [g.mem_used_mib > 50_000 for g in gpus] == [True] * 4 + [False] * 4
        assert gpus[0].proc_title == "sglang::scheduler_TP4_EP4"
        info = httpx.get(node0.url + "/server_info", timeout=5).json()
        assert info["nnodes"] == 2 and info["node_rank"] == 0
        node0.stop()
        assert node1.wait_exit(timeout=10) == 0  # a clean stop of rank 0 ends the others cleanly


def test_a_killed_node_takes_the_deployment_down() -> None:
    with two_nodes() as (node0, node1, _):
        assert node1.proc is not None
        os.killpg(node1.proc.pid, signal.SIGKILL)
        # node 0 sees the peer's socket close (or reset: the test below) at once, and its way out (the NCCL lines,
        # then the exit) takes about 2 s; 30 s, as a crash while loading gets below, is for a loaded box
        assert node0.wait_exit(timeout=30) != 0
        text = node0.output()
        assert "torch.distributed.DistBackendError: NCCL error" in text
        assert "remote process exited or there was a network error" in text


def test_a_node_killed_with_lines_unread_takes_the_deployment_down_too() -> None:
    """Killed while rank 0's load lines sat unread in its socket, a node's kernel answers with a reset, not a
    close: rank 0 read that as an error, not as its peer gone, and served on (one CI rehearsal: still up 30 s
    after the kill).  Stopped first, the node reads nothing while rank 0 sends four lines a second."""
    with two_nodes() as (node0, node1, _):
        assert node1.proc is not None
        os.killpg(node1.proc.pid, signal.SIGSTOP)
        time.sleep(1.0)  # ~4 load lines queue up in node 1's socket
        os.killpg(node1.proc.pid, signal.SIGKILL)
        assert node0.wait_exit(timeout=30) != 0
        text = node0.output()
        assert "remote process exited or there was a network error" in text


def test_a_crash_while_loading_on_one_node_fails_both() -> None:
    with two_nodes(fault1="crash_load", rank0_wait=False) as (node0, node1, _):
        assert node1.wait_exit(timeout=30) != 0
        assert "SafetensorError" in node1.output()
        assert node0.wait_exit(timeout=10) != 0
        assert "NCCL error" in node0.output() and "fired up" not in node0.output()


def test_rank0_gives_up_when_the_other_node_never_joins() -> None:
    addr = f"127.0.0.1:{free_port()}"
    with start_sim("ep8-tuned", time_scale=SCALE, wait_ready=False,
                   extra_args=["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", addr, "--dist-timeout", "1"]) as node0:
        assert node0.wait_exit(timeout=20) != 0
    text = node0.output()
    assert "Init torch distributed begin." in text and "Init torch distributed ends." not in text
    assert "torch.distributed.DistStoreError: Timed out after 2 seconds waiting for clients. 1/2 clients joined." in text
    node0.cleanup()
