"""Multi-node deployments: ``--nnodes N --node-rank R --dist-init-addr HOST:PORT`` (docs/pd.md).

Rank 0 (the HTTP server, :mod:`kimitui.sim.server`) listens on the dist-init address, as torch's TCPStore
does, and holds "Init torch distributed" until ranks 1..N-1 have connected (``--dist-timeout``, 60 s by
default, then ``DistStoreError: Timed out ... waiting for clients`` and exit 1).  A rank >= 1
(:func:`run_peer_node`) connects, retrying until the same timeout (then ``DistNetworkError``), acts out its
own TP ranks' start-up lines, and while serving shows on its host's GPUs the load rank 0 sends it four
times a second.  The TCP connection stands in for NCCL: when any process goes away (a crash, a kill) its
peers see the connection close, print an NCCL error and exit 1 within a moment, as a real deployment
falls over.  A clean stop of rank 0 (SIGTERM) says ``bye`` first and the other ranks exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable

from kimitui.sim.gpus import GpuModel, release_state, state_target, write_loop
from kimitui.sim.logfmt import SimLog
from kimitui.sim.perf_model import PerfModel
from kimitui.sim.scheduler import SchedStats, SimClock
from kimitui.sim.settings import ServerSettings
from kimitui.sim.startup import BootState, StartupFailed, run_startup

DEFAULT_DIST_TIMEOUT_S = 60.0
STATS_INTERVAL_S = 0.25
NCCL_VERSION = "2.27.3"


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def timeout_s(settings: ServerSettings) -> float:
    return float(settings.dist_timeout) if settings.dist_timeout else DEFAULT_DIST_TIMEOUT_S


def nccl_error_lines(peer: str) -> list[str]:
    """What a rank prints when a peer's process dies under a collective (the scheduler's exception)."""
    return [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 3118, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/distributed_c10d.py", line 2806, in all_reduce',
        "    work = group.allreduce([tensor], opts)",
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
        f"remote process exited or there was a network error, NCCL version {NCCL_VERSION}",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        f"Last error:\nsocket.c:445 NCCL WARN Net : Connection closed by remote peer {peer}",
    ]


def report_peer_lost(log: SimLog, peer: str) -> None:
    lines = nccl_error_lines(peer)
    log.line("Scheduler hit an exception: " + lines[0], rank=log.ranks[0])
    log.raw("".join(line + "\n" for line in lines[1:]))
    log.line("Received sigquit from a child process. It usually means the child failed.")


class Rendezvous:
    """Rank 0's side: the listening store, the other ranks' connections, the load it sends them."""

    def __init__(self, settings: ServerSettings, log: SimLog, on_lost: Callable[[], Awaitable[None]]) -> None:
        self.s = settings
        self.log = log
        self.on_lost = on_lost
        self.peers: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self._joined = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False

    async def listen(self) -> None:
        host, port = split_addr(self.s.dist_init_addr or "127.0.0.1:0")
        self._server = await asyncio.start_server(self._on_peer, host, port)

    async def _on_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = json.loads(await reader.readline() or b"{}")
            rank = int(hello["rank"])
        except (ValueError, KeyError, OSError):
            writer.close()
            return
        self.peers[rank] = (reader, writer)
        if len(self.peers) >= self.s.nnodes - 1:
            self._joined.set()
        peer = writer.get_extra_info("peername")
        # nothing more comes: EOF is the peer gone, and so is a reset (a peer killed with our load lines unread in
        # its socket: the kernel answers with RST, and read() raises).  A reset used to end this task with an
        # unread exception, and rank 0 served on as if its peer were there.
        with contextlib.suppress(ConnectionError):
            await reader.read()
        if not self.closing:
            self.closing = True
            report_peer_lost(self.log, f"{peer[0]}<{peer[1]}>" if peer else f"node {rank}")
            await self.on_lost()

    async def wait_all(self) -> None:
        """Block "Init torch distributed" until every node joined; the timeout fails start-up."""
        limit = timeout_s(self.s)
        try:
            await asyncio.wait_for(self._joined.wait(), limit)
        except TimeoutError:
            self.log.line("Scheduler hit an exception: Traceback (most recent call last):", rank=0)
            self.log.raw(
                '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store\n'
                "    return TCPStore(\n"
                f"torch.distributed.DistStoreError: Timed out after {int(limit) + 1} seconds waiting for clients. "
                f"{len(self.peers) + 1}/{self.s.nnodes} clients joined.\n"
            )
            self.log.line("Received sigquit from a child process. It usually means the child failed.")
            raise StartupFailed("the other nodes never joined") from None
        for _, writer in self.peers.values():
            writer.write(b'{"go": true}\n')

    async def send_stats(self, stats: Callable[[], SchedStats | None], phase: Callable[[], str]) -> None:
        """Four times a second: what the scheduler does, so the other nodes' GPUs show the same load."""
        while True:
            st = stats()
            if st is not None:
                line = json.dumps({"running": st.running, "batch": st.batch, "generated_total": st.generated_total,
                                   "busy_for": max(0.0, st.busy_until - time.monotonic()), "frozen": st.frozen,
                                   "in_rebalance": st.in_rebalance, "phase": phase()}).encode() + b"\n"
                for _, writer in list(self.peers.values()):
                    with contextlib.suppress(OSError, RuntimeError):
                        writer.write(line)
            await asyncio.sleep(STATS_INTERVAL_S)

    async def close(self) -> None:
        """A clean stop: tell the other nodes, then close."""
        self.closing = True
        for _, writer in self.peers.values():
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(b'{"bye": true}\n')
                await asyncio.wait_for(writer.drain(), 1.0)
            writer.close()
        if self._server is not None:
            self._server.close()


# --------------------------------------------------------------------------- ranks >= 1


async def _connect(settings: ServerSettings, log: SimLog) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Retry reaching rank 0 until ``--dist-timeout`` (torch's TCPStore client does the same)."""
    host, port = split_addr(settings.dist_init_addr or "")
    limit = timeout_s(settings)
    deadline = time.monotonic() + limit
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(json.dumps({"rank": settings.node_rank}).encode() + b"\n")
            await writer.drain()
            return reader, writer
        except OSError:
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.2)
    log.line("Scheduler hit an exception: Traceback (most recent call last):", rank=log.ranks[0])
    log.raw(
        '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store\n'
        "    return TCPStore(\n"
        f"torch.distributed.DistNetworkError: The client socket has timed out after {int(limit * 1000)}ms while trying to "
        f"connect to ({host}, {port}).\n"
    )
    log.line("Received sigquit from a child process. It usually means the child failed.")
    raise StartupFailed("rank 0 never answered")


class PeerNode:
    """A node rank >= 1: start-up lines for its ranks, then its GPUs mirror rank 0's load."""

    def __init__(self, settings: ServerSettings) -> None:
        self.s = settings
        self.log = SimLog(settings)
        self.clock = SimClock(settings.time_scale)
        self.model = PerfModel(settings)
        self.boot = BootState()
        self.stats: SchedStats | None = None
        self.exit_code = 0

    async def _rendezvous(self) -> None:
        self._reader, self._writer = await _connect(self.s, self.log)
        hello = await self._reader.readline()  # rank 0 answers once every node joined
        if not hello:
            raise ConnectionResetError("rank 0 went away during init")

    async def _follow(self) -> None:
        """Read rank 0's load lines until ``bye`` (exit 0) or the connection drops (NCCL error, exit 1)."""
        while True:
            try:
                line = await self._reader.readline()
            except ConnectionError:  # reset, not closed: rank 0 killed with this node's lines unread
                line = b""
            if not line:
                peer = self._writer.get_extra_info("peername")
                report_peer_lost(self.log, f"{peer[0]}<{peer[1]}>" if peer else "node 0")
                self.exit_code = 1
                return
            msg = json.loads(line)
            if msg.get("bye"):
                return
            if self.stats is not None:
                st = self.stats
                st.running, st.batch, st.generated_total = msg["running"], msg["batch"], msg["generated_total"]
                st.busy_until = time.monotonic() + float(msg["busy_for"])
                st.frozen, st.in_rebalance = bool(msg["frozen"]), bool(msg["in_rebalance"])

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        path = state_target(self.s, os.getpid())
        gpu_task = asyncio.create_task(write_loop(GpuModel(self.s, os.getpid(), self.log.rank_title), self.boot,
                                                  lambda: self.stats, path))
        main = asyncio.create_task(self._main())
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({main, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if main.done():
                exc = main.exception()
                self.exit_code = 1 if isinstance(exc, (StartupFailed, ConnectionError)) else self.exit_code
                if exc is not None and not isinstance(exc, (StartupFailed, ConnectionError)):
                    raise exc
            else:
                main.cancel()
        finally:
            stopper.cancel()
            gpu_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gpu_task
            release_state(path)
        return self.exit_code

    async def _main(self) -> None:
        follow: asyncio.Task[None] | None = None

        async def rendezvous() -> None:
            nonlocal follow
            await self._rendezvous()
            follow = asyncio.create_task(self._follow())

        boot = asyncio.create_task(run_startup(self.s, self.model, self.log, self.clock, self.boot, rendezvous))
        while not boot.done() and (follow is None or not follow.done()):
            await asyncio.wait({boot, *([follow] if follow else [])}, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
        if follow is not None and follow.done() and not boot.done():  # rank 0 died while we loaded
            boot.cancel()
            return
        boot.result()
        self.boot.enter("serving")
        self.stats = SchedStats()
        if follow is not None:
            await follow


def run_peer_node(settings: ServerSettings) -> int:
    """Foreground entry point of ``kimitui sim serve --node-rank R`` (R >= 1): no HTTP server."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # TextIO does not declare it; a stream without it is suppressed
    with asyncio.Runner() as runner:
        return runner.run(PeerNode(settings).run())
