"""Calibration of the simulator's performance model against the seeds' figures.

For each profile it starts the real ``kimitui sim serve`` at a time-scale,
then, like the seeds' script:
- C=1: N sequential requests of 512 tokens (per-request tok/s = tokens / wall);
- sweep: for each C, a burst of C concurrent requests of 512 tokens
  (aggregate tok/s = all tokens / level wall time).
Requests stream (aiohttp) with ``ignore_eos`` so every request makes 512 tokens.
Every figure is divided by the time-scale, i.e. converted back to time-scale 1,
and printed next to the seeds' numbers.  Goal: each within 20 % of its seed (PASS/FAIL per profile on the
worst; exit 1 on FAIL).

    .venv/bin/python bench/calibrate_sim.py                       # all three, scale 4
    .venv/bin/python bench/calibrate_sim.py --profiles tp8 --time-scale 8 --levels 1,8,16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.simserver import start_sim  # noqa: E402

from benchutil import verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

TOLERANCE = 0.20
"""Goal: each measured figure within this share of its seed (C=1 median, each seeded level, the peak)."""


def _seed_number(text: str) -> float | None:
    """A seed's figure: its first number (``"63.4 / 7.7 / 56.7"`` is C=1's first request, then ...), or None."""
    try:
        return float(text.split("/")[0])
    except ValueError:
        return None

SEEDS = {
    "ep8-tuned": {"c1": "65", 16: "345", "peak": "1538"},
    "tp8": {"c1": "26", "peak": "-"},
    "ep8-v2": {"c1": "63.4 / 7.7 / 56.7", 1: "13.3", 8: "46.7", 32: "204.1", 64: "356.6", "peak": "862"},
}


async def one(session: aiohttp.ClientSession, url: str, model: str, prompt: str, max_tokens: int) -> tuple[int, float]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    tokens = 0
    async with session.post(url + "/v1/chat/completions", json=body) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return tokens, time.perf_counter() - t0


async def measure(url: str, model: str, scale: float, levels: list[int], c1_requests: int) -> dict:
    prompts = [
        "Write a Python quicksort implementation with detailed comments.",
        "Explain the theory of relativity in 3 sentences.",
        "What is 2+2? Answer with just the number.",
        "Write a haiku about programming.",
        "Write a Python JSON parser that handles nested objects.",
    ]
    conn = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    out: dict = {"c1": [], "levels": {}}
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        await one(session, url, model, "Say OK", 16)
        for i in range(c1_requests):
            tokens, wall = await one(session, url, model, prompts[i % 5] + f" #{i}", 512)
            out["c1"].append(tokens / wall / scale)
        for c in levels:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(one(session, url, model, prompts[i % 5] + f" c{c}-{i}", 512) for i in range(c)))
            wall = time.perf_counter() - t0
            out["levels"][c] = sum(t for t, _ in results) / wall / scale
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default="ep8-tuned,tp8,ep8-v2")
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--levels", default="1,8,16,32,64,128,256")
    ap.add_argument("--c1-requests", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x]
    ok: list[bool] = []
    print(f"# kimitui sim calibration: time-scale {args.time_scale}, 512-token requests (ignore_eos), figures at time-scale 1")
    for profile in args.profiles.split(","):
        t0 = time.perf_counter()
        with start_sim(profile, time_scale=args.time_scale, seed=args.seed) as sim:
            res = asyncio.run(measure(sim.url, sim.model, args.time_scale, levels, args.c1_requests))
            rebalances = sum(1 for line in sim.lines() if "TP0 EP0] [EPLBManager] rebalance start" in line)
        seeds = SEEDS.get(profile, {})
        c1 = res["c1"]
        print(f"\n== {profile}  (bench wall {time.perf_counter() - t0:.0f}s, EPLB rebalances: {rebalances})")
        print(f"  C=1 per-request tok/s: {' / '.join(f'{x:.1f}' for x in c1)}   median {statistics.median(c1):.1f}   seed: {seeds.get('c1', '-')}")
        peak = max(res["levels"].values()) if res["levels"] else 0.0
        for c, agg in res["levels"].items():
            print(f"  C={c:>4}: aggregate {agg:8.1f} tok/s   seed: {seeds.get(c, '-')}")
        print(f"  peak aggregate {peak:.1f} tok/s   seed peak: {seeds.get('peak', '-')}")
        pairs = [("C=1 median", statistics.median(c1), seeds.get("c1", "-")), ("peak", peak, seeds.get("peak", "-"))]
        pairs += [(f"C={c}", agg, seeds.get(c, "-")) for c, agg in res["levels"].items()]
        off = [(abs(got / want - 1), name) for name, got, seed in pairs if (want := _seed_number(seed))]
        if off:
            worst, name = max(off)
            ok.append(verdict(f"{profile} against the seeds", f"worst {name} off by {worst:.0%} ({len(off)} figures)",
                              f"each within {TOLERANCE:.0%}", worst <= TOLERANCE))
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
