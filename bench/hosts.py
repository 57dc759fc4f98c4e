"""Host figures: command latency, stream throughput, link-loss detection, reconnect.

Runs LocalHost and SSHHost (against the in-process test SSH server on
127.0.0.1, whose sessions run real bash) and PRINTS the figures:

    .venv/bin/python bench/hosts.py [--runs 100] [--lines 200000]

Goals, PASS/FAIL each (exit 1 on FAIL): a command's p99 <= 100 ms (a key's budget); a stream >= 10k lines/s
(a busy server logs thousands a second); a lost link noticed within its 3 missed keepalives + 1 s; a server
back on its port reconnected within 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kimitui.host.base import Host  # noqa: E402
from kimitui.host.local import LocalHost  # noqa: E402
from tests.support.sshd import SSHTestServer  # noqa: E402

from benchutil import verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

CHECKS: list[bool] = []


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


async def run_latency(host: Host, runs: int) -> str:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await host.run(["true"])
        times.append((time.perf_counter() - t0) * 1000)
    CHECKS.append(verdict(f"{type(host).__name__} run(['true']) p99", f"{pct(times, 0.99):.1f} ms over {runs}",
                          "<= 100 ms", pct(times, 0.99) <= 100))
    return f"run(['true']) x{runs}: p50 {statistics.median(times):.1f} ms, p99 {pct(times, 0.99):.1f} ms"


async def stream_rate(host: Host, lines: int) -> str:
    t0 = time.perf_counter()
    stream = await host.stream(["seq", "1", str(lines)])
    n = 0
    async for _ in stream:
        n += 1
    dt = time.perf_counter() - t0
    assert n == lines, n
    CHECKS.append(verdict(f"{type(host).__name__} stream", f"{n / dt / 1000:.0f}k lines/s", ">= 10k lines/s",
                          n / dt >= 10_000))
    return f"stream(seq {lines}): {n / dt / 1000:.0f}k lines/s"


async def link_loss(server: SSHTestServer) -> list[str]:
    out = []
    for how, keepalive in (("abort (server crash)", 2.0), ("freeze (no FIN/RST)", 0.5)):
        lost = asyncio.get_running_loop().create_future()
        back = asyncio.get_running_loop().create_future()

        def on_event(e, lost=lost, back=back) -> None:
            if e.state == "lost" and not lost.done():
                lost.set_result(time.perf_counter())
            if e.state == "connected" and lost.done() and not back.done():
                back.set_result(time.perf_counter())

        host = server.make_host("gpu", keepalive_s=keepalive, on_event=on_event)
        await host.connect()
        t0 = time.perf_counter()
        if how.startswith("abort"):
            await server.stop()
        else:
            server.freeze()
        t_lost = await asyncio.wait_for(lost, 10)
        out.append(f"link loss, {how}, keepalive {keepalive:g} s x3: noticed in {(t_lost - t0) * 1000:.0f} ms")
        CHECKS.append(verdict(f"link loss noticed, {how}", f"{t_lost - t0:.2f} s", f"<= {3 * keepalive + 1:g} s",
                              t_lost - t0 <= 3 * keepalive + 1))
        t1 = time.perf_counter()
        await server.restart()
        await host.wait_connected(10)
        out.append(f"  server back on the same port -> connected again in {(time.perf_counter() - t1) * 1000:.0f} ms")
        back_s = time.perf_counter() - t1
        CHECKS.append(verdict(f"reconnected after {how}", f"{back_s:.2f} s", "<= 5 s", back_s <= 5))
        await host.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    local = LocalHost()
    print("LocalHost:")
    print("  " + await run_latency(local, args.runs))
    print("  " + await stream_rate(local, args.lines))
    server = SSHTestServer()
    await server.start()
    host = server.make_host("gpu")
    print("SSHHost (in-process asyncssh server on 127.0.0.1, real bash per command):")
    print("  " + await run_latency(host, args.runs))
    print("  " + await stream_rate(host, args.lines))
    await host.close()
    for line in await link_loss(server):
        print("  " + line)
    await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
    if not all(CHECKS):
        sys.exit(1)
