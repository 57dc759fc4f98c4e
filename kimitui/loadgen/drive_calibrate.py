"""The load client's CPU per streamed chunk, measured in-process on its own code path, and the
preflight a sweep or a capacity search runs with it (:mod:`kimitui.loadgen.drive_budget` judges).

The calibration streams SGLang-shaped chunks (per-chunk usage, as kimitui asks for) over local
socket pairs (no network) into the real :class:`kimitui.loadgen.h1client.Conn` on the event loop the
load process uses (uvloop where there is one), one chunk per read across 16 streams, then builds and
serialises each request's result as the load process does.  Its CPU (this thread's, so the writer
thread that plays the server is not counted) over the chunks, times :data:`FULL_PATH_FACTOR` (what
the rest of the load process adds, measured), is the cost.  About 0.1 s of CPU, once
per process (cached).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

from kimitui.analysis.sweep_eta import RateModel
from kimitui.events import SweepSpec, dump_event
from kimitui.loadgen.drive_budget import ChunkCost, DriveCheck, check_drive

STREAMS = 16
CHUNKS_PER_STREAM = 96
_PAUSE_S = 0.0004
"""Between rounds of writes, so each stream's chunk arrives in a read of its own (as from a paced server)."""
FULL_PATH_FACTOR = 3.0
"""The whole load process per chunk over the calibrated path: the load process also samples progress,
watches its own health and pipes every event to its parent.  Measured on the 2-core dev machine
against the simulator: levels' busiest second gave 31-44 us per chunk (ep8-tuned, C=32-256, time
scales 5 and 20) where this calibration gave 11-18 us."""
_cached: ChunkCost | None = None
_lock = threading.Lock()


def _frame(i: int) -> bytes:
    data = ("data: " + json.dumps({
        "id": "0123456789abcdef", "object": "chat.completion.chunk", "created": 1733000000, "model": "m",
        "choices": [{"index": 0, "delta": {"reasoning_content": None, "content": " word"}, "logprobs": None,
                     "finish_reason": None, "matched_stop": None}],
        "usage": {"prompt_tokens": 100, "total_tokens": 100 + i, "completion_tokens": i}},
        separators=(",", ":")) + "\n\n").encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def _measure() -> ChunkCost:
    from kimitui.loadgen.client import Clock, Deadlines, RequestTrace, to_result
    from kimitui.loadgen.h1client import Conn, Pool

    pairs = [socket.socketpair() for _ in range(STREAMS)]
    frames = [_frame(i + 1) for i in range(CHUNKS_PER_STREAM)]
    done = b"data: [DONE]\n\n"
    tail = b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    go = threading.Event()
    got: dict[str, Any] = {}

    def server() -> None:
        go.wait(10.0)
        for _, s in pairs:
            s.sendall(head)
        for f in frames:
            for _, s in pairs:
                s.sendall(f)
            time.sleep(_PAUSE_S)
        for _, s in pairs:
            s.sendall(tail)

    async def client() -> None:
        loop = asyncio.get_running_loop()
        pool = Pool("http://127.0.0.1:9/v1/chat/completions", Deadlines())
        waits: list[asyncio.Future[None]] = []
        traces: list[RequestTrace] = []
        for mine, _ in pairs:
            _, conn = await loop.create_connection(lambda: Conn(pool), sock=mine)
            trace = RequestTrace(f"cal-{len(traces)}", STREAMS, False, 0)
            waits.append(conn.send(trace, b""))
            traces.append(trace)
        cpu0 = time.thread_time()
        go.set()
        await asyncio.wait_for(asyncio.gather(*waits), 30.0)
        clock = Clock()
        for trace in traces:
            dump_event(to_result(trace, "calibration", clock))
        got["cpu"] = time.thread_time() - cpu0
        got["chunks"] = sum(t.tokens for t in traces)

    writer = threading.Thread(target=server, daemon=True)
    writer.start()
    try:
        try:
            import uvloop  # the load process's loop (kimitui.loadgen.worker); optional off Linux/macOS
        except ImportError:  # pragma: no cover
            asyncio.run(client())
        else:
            uvloop.run(client())
    finally:
        go.set()
        writer.join(10.0)
        for a, b in pairs:
            a.close()
            b.close()
    chunks = int(got.get("chunks") or 0)
    if chunks <= 0:
        raise RuntimeError("the calibration streamed no chunk")
    return ChunkCost(FULL_PATH_FACTOR * got["cpu"] / chunks, "calibrated")


def calibrate() -> ChunkCost:
    """The client's CPU per chunk, measured once per process (blocking, ~0.1 s of CPU; see the module)."""
    global _cached
    with _lock:
        if _cached is None:
            holder: list[ChunkCost | BaseException] = []

            def run() -> None:  # its own thread: the caller may be on a running event loop
                try:
                    holder.append(_measure())
                except BaseException as exc:  # noqa: BLE001 - handed back to the caller below
                    holder.append(exc)

            t = threading.Thread(target=run, name="kimitui-drive-calibration", daemon=True)
            t.start()
            t.join()
            result = holder[0] if holder else RuntimeError("the calibration did not finish")
            if isinstance(result, BaseException):
                raise result
            _cached = result
        return _cached


def cached_calibration() -> ChunkCost | None:
    """The calibration if this process already ran it (no work: for a screen that must not measure)."""
    return _cached


async def server_time_scale(url: str) -> float | None:
    """The simulator's time scale from its ``/server_info`` (``sim_time_scale``); None for a real server
    or one that does not say."""
    from kimitui.launcher.drift import fetch_server_info  # lazily: httpx

    try:
        info = await fetch_server_info(url, timeout=5.0)
    except Exception:  # noqa: BLE001 - no /server_info: a real server of unknown kind, not scaled
        return None
    scale = info.get("sim_time_scale") if info.get("sim") else None
    return float(scale) if isinstance(scale, (int, float)) and scale > 0 else None


def spec_drive(spec: SweepSpec, cost: ChunkCost, time_scale: float | None, levels: list[int] | None = None,
               rates: RateModel | None = None) -> DriveCheck:
    """:func:`~kimitui.loadgen.drive_budget.check_drive` for a sweep spec (its levels, unless ``levels``)."""
    rate = spec.rate_rps if spec.mode == "rate" else None
    return check_drive(levels or spec.levels, cost, time_scale=time_scale, rates=rates, rate_rps=rate,
                       tokens_per_request=float(spec.max_tokens))


async def preflight(spec: SweepSpec, *, levels: list[int] | None = None, time_scale: float | None = None,
                    rates: RateModel | None = None) -> DriveCheck:
    """What the client can drive for ``spec`` against its server: the calibration (off the event loop)
    and the server's time scale (asked when None; 0: known not to be a simulator)."""
    if time_scale is None:
        time_scale = await server_time_scale(spec.url)
    cost = await asyncio.to_thread(calibrate)
    return spec_drive(spec, cost, time_scale, levels, rates)
