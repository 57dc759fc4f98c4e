"""How cheaply the simulator serves many concurrent streams (one scheduler loop, no task per token).

Starts ``kimitui sim serve`` for a profile, opens C concurrent streaming
requests (aiohttp, ignore_eos, N tokens each), and prints the server's CPU
time per streamed chunk (from /proc/<pid>/stat), its CPU share over the run,
and the aggregate rate compared with the model's own steady-state figure (a
server that keeps up delivers what the model says).

    .venv/bin/python bench/sim_streams.py --profile tp8 --concurrency 1024 --tokens 128 --time-scale 1

Goals, PASS/FAIL each (exit 1 on FAIL): every chunk streamed; the aggregate rate >= 80 % of the model's steady
state (a server that keeps up delivers what the model says, less the ramp up and down).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kimitui.sim.perf_model import PerfModel  # noqa: E402
from kimitui.sim.settings import load_settings  # noqa: E402
from tests.support.simserver import start_sim  # noqa: E402

from benchutil import verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def stream(session: aiohttp.ClientSession, url: str, tokens: int) -> int:
    body = {"messages": [{"role": "user", "content": "go"}], "max_tokens": tokens, "ignore_eos": True, "stream": True}
    chunks = 0
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        async for raw in resp.content:
            if raw.startswith(b"data: {") and b'"content":"' in raw and b'"role"' not in raw:
                chunks += 1
    return chunks


async def run(url: str, c: int, tokens: int) -> tuple[int, float]:
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None)) as session:
        t0 = time.perf_counter()
        counts = await asyncio.gather(*(stream(session, url, tokens) for _ in range(c)))
        return sum(counts), time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="tp8")
    ap.add_argument("--concurrency", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--time-scale", type=float, default=1.0)
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    model = PerfModel(load_settings(args.profile))
    batch = min(args.concurrency, model.max_running_requests)
    steady = batch / model.decode_step_s(batch, batch * (args.tokens // 2 + 10))
    with start_sim(args.profile, time_scale=args.time_scale) as sim:
        assert sim.proc is not None
        cpu0 = cpu_seconds(sim.proc.pid)
        chunks, wall = asyncio.run(run(sim.url, args.concurrency, args.tokens))
        cpu = cpu_seconds(sim.proc.pid) - cpu0
        decode_lines = [line for line in sim.lines() if "Decode batch" in line]
    print(f"profile {args.profile}, C={args.concurrency}, {args.tokens} tokens each, time-scale {args.time_scale}")
    print(f"  chunks streamed: {chunks} in {wall:.1f}s wall = {chunks / wall:.0f} chunks/s")
    print(f"  server CPU: {cpu:.2f}s = {cpu / wall * 100:.0f}% of one core, {cpu / max(1, chunks) * 1e6:.0f} us per chunk")
    print(f"  aggregate {chunks / wall / args.time_scale:.0f} tok/s at time-scale 1; model steady state at batch {batch}: {steady:.0f} tok/s")
    if decode_lines:
        print("  last Decode line:", decode_lines[-1].split("] ", 1)[1])
    print(json.dumps({"chunks_per_s": round(chunks / wall), "server_cpu_pct": round(cpu / wall * 100), "us_per_chunk": round(cpu / max(1, chunks) * 1e6)}))
    rate = chunks / wall / args.time_scale
    ok = [verdict("chunks streamed", f"{chunks} of {args.concurrency * args.tokens}", "all",
                  chunks == args.concurrency * args.tokens),
          verdict("the simulator keeps up with its model", f"{rate:.0f} tok/s = {rate / steady:.0%} of {steady:.0f}",
                  ">= 80 % of the model's steady state (the ramp up and down costs the rest)", rate >= 0.8 * steady)]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
