"""kimitui's load worker beside a bare client: CPU per streamed event, and the loop lag of its own ramp.

The bare client is the floor (issue 33): a uvloop ``asyncio.Protocol`` per connection doing the same
HTTP/1.1 request bytes, chunked decoding, SSE line split and ``json.loads`` per event as kimitui's
worker, and nothing else (no timestamps, no results, no events out).  Both run against the same simulated
SGLang server (``kimitui sim serve``, profile tp8, time scale 50, in its own process), as separate
processes started by this one, interleaved (bare, kimitui, bare, kimitui, ...) so a busy neighbour slows
both alike.  CPU is each client process's own, from just after its imports to its exit
(``time.process_time``), divided by the SSE events it streamed (``data:`` lines, the role, usage and
``[DONE]`` lines included; the bare client counts them, kimitui streamed the same requests).

On a box of two cores or more the server is pinned to one core and each client to another
(``--no-pin`` to let the scheduler place them): then a client never waits for the server's core, and how
many events it reads per wake-up, which moves its CPU per event by +-20 % here, depends less on where the
scheduler put the two.

Both clients also run a ticker (every 2 ms) that records how late it fires.  The ramp's loop lag is the
worst lateness of a tick due between the level's start and the send of its C-th request (the ramp); the
level's worst lateness is printed beside it.

``--workers N`` runs kimitui's level with N load processes (``SweepSpec.workers``): ``--scaling`` prints
kimitui's events per second at 1 and N workers (interleaved) at a C where one process saturates.

Goals, PASS/FAIL each (exit 1 on FAIL):

* kimitui's CPU per event <= 1.1x the bare client's at every C (median of the trials' ratios);
* the ramp's loop lag <= 50 ms at every C (the worst trial).

Run: ``.venv/bin/python bench/bench_bare_client.py [--levels 64,256,1024,2048] [--trials 3] [--tokens 256]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if os.environ.get("KIMITUI_BENCH_ROOT"):  # --vs: kimitui's worker as it was at another revision (a git archive)
    sys.path.insert(0, os.environ["KIMITUI_BENCH_ROOT"])
sys.path.insert(0, str(ROOT / "bench"))
from benchutil import exit_on, load_average, verdict  # noqa: E402

TICK_S = 0.002
RATIO_GOAL = 1.1
LAG_GOAL_MS = 50.0


# --------------------------------------------------------------------------- both children
class Ticker:
    """How late a 2 ms timer fires, each tick's due time kept (perf_counter ns) to find the ramp's."""

    def __init__(self) -> None:
        self.ticks: list[tuple[int, int]] = []  # (due ns, late ns)

    async def run(self) -> None:
        step = int(TICK_S * 1e9)
        while True:  # perf_counter, not loop.time(): uvloop's clock steps in whole milliseconds
            due_ns = time.perf_counter_ns() + step
            await asyncio.sleep(TICK_S)
            self.ticks.append((due_ns, max(0, time.perf_counter_ns() - due_ns)))

    def worst_ms(self, lo_ns: int = 0, hi_ns: int = 1 << 62) -> float:
        return max((late for due, late in self.ticks if lo_ns <= due <= hi_ns), default=0) / 1e6


# --------------------------------------------------------------------------- the bare client
class BareConn(asyncio.Protocol):
    """One keep-alive connection sending its requests one after another: parse, count, nothing else."""

    def __init__(self, client: BareClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.state = "head"
        self.buf = b""
        self.left = 0
        self.pending = b""
        self.done: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(f"lost: {exc}"))

    def send(self, data: bytes) -> asyncio.Future[None]:
        self.state, self.buf, self.left, self.pending = "head", b"", 0, b""
        self.done = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(data)
        return self.done

    def data_received(self, data: bytes) -> None:
        if self.state == "head":
            self.buf += data
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if self.buf[9:12] != b"200":
                raise RuntimeError(f"status {self.buf[:40]!r}")
            data, self.buf, self.state = self.buf[end + 4:], b"", "body"
        self.dechunk(data)

    def dechunk(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos = 0
        while True:
            if self.left > 0:
                take = buf[pos:pos + self.left]
                pos += len(take)
                self.left -= len(take)
                self.sse(take)
                if self.left > 0:
                    break
                self.left = -2
            if self.left == -2:
                if len(buf) - pos < 2:
                    break
                pos += 2
                self.left = 0
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            pos = eol + 2
            if size == 0:
                self.buf = b""
                assert self.done is not None
                self.done.set_result(None)
                return
            self.left = size
        self.buf = buf[pos:]

    def sse(self, data: bytes) -> None:
        if self.pending:
            data = self.pending + data
        lines = data.split(b"\n")
        self.pending = lines.pop()
        loads = json.loads
        n = 0
        for line in lines:
            if line[:5] == b"data:":
                payload = line[5:].strip()
                n += 1
                if payload != b"[DONE]":
                    loads(payload)
        self.client.events += n


class BareClient:
    def __init__(self, host: str, port: int, head: bytes, bodies: list[bytes]) -> None:
        self.host, self.port, self.head, self.bodies = host, port, head, bodies
        self.events = 0
        self.requests = 0
        self.first_round_sent_ns = 0

    def request(self, idx: int) -> bytes:
        body = self.bodies[idx % len(self.bodies)]
        return b"%sX-Request-ID: bare-%d\r\nContent-Length: %d\r\n\r\n%s" % (self.head, idx, len(body), body)

    async def run(self, c: int, n: int) -> None:
        loop = asyncio.get_running_loop()
        counter = iter(range(n))
        started = 0

        async def slot() -> None:
            nonlocal started
            _, conn = await loop.create_connection(lambda: BareConn(self), self.host, self.port)
            for idx in counter:
                await conn.send(self.request(idx))
                if started < c:
                    started += 1
                    if started == c:
                        self.first_round_sent_ns = time.perf_counter_ns()
                self.requests += 1
            assert conn.transport is not None
            conn.transport.close()

        await asyncio.gather(*(slot() for _ in range(c)))


MIN_REQUESTS = 512
"""Requests per level at least (C=64 runs 8 rounds): 2 x 64 requests streamed in ~1.7 s, and such a short trial's CPU
per event moved by +-25 % from one process to the next, the bare client's as much as kimitui's."""

CLIENT_CPU_ENV = "KIMITUI_BENCH_CLIENT_CPU"
"""The core a client child pins itself to (set by the measuring process with ``--pin``)."""


def pin_cores() -> tuple[set[int], set[int]] | None:
    """(the server's cores, the clients' core) on a box with two or more, or None."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2:
        return None
    return set(cores[:-1]), {cores[-1]}


def pin_process(pid: int, cores: set[int]) -> None:
    """Every thread of ``pid`` onto ``cores`` (the server's threads already run when it is pinned)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cores)


def pin_self() -> None:
    core = os.environ.get(CLIENT_CPU_ENV)
    if core:
        os.sched_setaffinity(0, {int(core)})


def bare_child(url: str, c: int, n: int, tokens: int, out: str) -> None:
    import uvloop
    import yarl

    from kimitui.loadgen.client import build_body
    from kimitui.loadgen.prompts import SEED_PROMPTS

    u = yarl.URL(url)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {u.host}:{u.port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\n").encode()

    async def main() -> dict[str, Any]:
        cpu0, t0 = time.process_time(), time.perf_counter_ns()
        ticker = Ticker()
        tick = asyncio.get_running_loop().create_task(ticker.run())
        bodies = [build_body("m", p, tokens) for p in SEED_PROMPTS]
        client = BareClient(u.host or "127.0.0.1", u.port or 80, head, bodies)
        await client.run(c, n)
        tick.cancel()
        return {"cpu_s": time.process_time() - cpu0, "wall_s": (time.perf_counter_ns() - t0) / 1e9,
                "events": client.events, "requests": client.requests,
                "ramp_lag_ms": ticker.worst_ms(t0, client.first_round_sent_ns), "level_lag_ms": ticker.worst_ms()}

    Path(out).write_text(json.dumps(uvloop.run(main())))


# --------------------------------------------------------------------------- kimitui's worker
def kimitui_child(out: str) -> None:
    """``kimitui.loadgen.worker.main()`` as is (config on stdin, events on stdout), with the ticker beside it."""
    import uvloop  # noqa: F401  # imported before the clock starts, as the worker's own imports are

    from kimitui.loadgen import worker

    ticker = Ticker()
    original = worker._amain

    async def amain(cfg: dict[str, Any]) -> int:
        tick = asyncio.get_running_loop().create_task(ticker.run())
        try:
            return await original(cfg)
        finally:
            tick.cancel()

    worker._amain = amain
    cpu0, t0 = time.process_time(), time.perf_counter_ns()
    rc = worker.main()
    offset_ns = int((time.time() - time.perf_counter_ns() / 1e9) * 1e9)  # wall = perf + offset, for the events
    Path(out).write_text(json.dumps({"cpu_s": time.process_time() - cpu0, "wall_s": (time.perf_counter_ns() - t0) / 1e9,
                                     "rc": rc, "ticks": ticker.ticks, "offset_ns": offset_ns}))


# --------------------------------------------------------------------------- the measuring process
def spec_for(url: str, model: str, c: int, n: int, tokens: int, workers: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": url, "model": model, "levels": [c], "mode": "sustained", "max_tokens": tokens,
                            "prompts": "seed", "requests_per_level": n, "warmup_requests": 0,
                            "stop_on_oversaturation": False}
    if workers != 1:
        spec["workers"] = workers
    return spec


def run_bare(url: str, c: int, n: int, tokens: int, tmp: Path) -> dict[str, Any]:
    out = tmp / "bare.json"
    subprocess.run([sys.executable, __file__, "--child", "bare", url, str(c), str(n), str(tokens), str(out)],
                   check=True, cwd=ROOT, timeout=900)
    res = json.loads(out.read_text())
    if res["requests"] != n:
        raise RuntimeError(f"bare client: {res['requests']} of {n} requests")
    return res


def checkout(rev: str, tmp: Path) -> Path:
    """kimitui's package as it was at ``rev`` (``git archive``), for the old worker beside the new."""
    where = tmp / f"rev-{rev.replace('/', '_')}"
    where.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "kimitui"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def run_kimitui(url: str, model: str, c: int, n: int, tokens: int, tmp: Path, workers: int = 1,
                root: Path | None = None) -> dict[str, Any]:
    out, events_path = tmp / "kimitui.json", tmp / "events.jsonl"
    config = {"spec": spec_for(url, model, c, n, tokens, workers), "sweep_id": "bench", "host": "bench"}
    with open(events_path, "wb") as f:
        # Events through a pipe, as SweepRunner reads them (the worker's non-blocking pipe transport; a file
        # would be a blocking write that a busy disk can stall); this process copies them to the file.
        # stdin stays open while it runs: its end means "the parent went away" (abort).
        env = dict(os.environ, KIMITUI_BENCH_ROOT=str(root)) if root is not None else None
        proc = subprocess.Popen([sys.executable, __file__, "--child", "kimitui", str(out)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, cwd=ROOT, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        copier = threading.Thread(target=shutil.copyfileobj, args=(proc.stdout, f, 1 << 20))
        copier.start()
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        rc = proc.wait(timeout=900)
        copier.join()
        proc.stdin.close()
    if rc != 0:
        raise RuntimeError(f"kimitui's worker exited with {rc}")
    res = json.loads(out.read_text())
    events = [json.loads(line) for line in events_path.read_text().splitlines() if line.strip()]
    results = [e for e in events if e["kind"] == "request_result"]
    bad = [e for e in results if not e["ok"]]
    levels = [e for e in events if e["kind"] == "level_result"]
    if bad or len(results) != n or not levels:
        errors = [e for e in events if e["kind"] == "error"][:3]
        raise RuntimeError(f"kimitui: {len(results)} results of {n}, {len(bad)} failed: {bad[:1]} {errors}")
    level_start = next(e["t"] for e in events if e["kind"] == "level_started")
    sends = sorted(e["t"] for e in events if e["kind"] == "request_started")
    to_ns = lambda t: int(t * 1e9) - res["offset_ns"]  # noqa: E731
    ticks = [tuple(x) for x in res["ticks"]]
    lo, hi = to_ns(level_start), to_ns(sends[c - 1])
    res["ramp_lag_ms"] = max((late for due, late in ticks if lo <= due <= hi), default=0) / 1e6
    res["level_lag_ms"] = max((late for due, late in ticks if due >= lo), default=0) / 1e6
    res["chunks"] = sum(e["chunks"] for e in results)
    res["requests"] = len(results)
    res["health_lag_ms"] = (levels[0].get("client") or {}).get("loop_lag_max_ms")
    res["dispatch_p99_ms"] = levels[0].get("dispatch_delay_p99_ms")
    res["level"] = levels[0]
    res.pop("ticks")
    return res


def us_per_event(res: dict[str, Any], events: int) -> float:
    return res["cpu_s"] / events * 1e6


def compare(url: str, model: str, levels: list[int], trials: int, tokens: int, rounds: int, tmp: Path,
            old: tuple[str, Path] | None = None) -> list[bool]:
    checks = []
    for c in levels:
        n = max(rounds * c, MIN_REQUESTS)
        ratios, lags, bare_us, kim_us = [], [], [], []
        old_ratios: list[float] = []
        for trial in range(trials):  # interleaved: bare, kimitui, bare, kimitui, ...
            b = run_bare(url, c, n, tokens, tmp)
            k = run_kimitui(url, model, c, n, tokens, tmp)
            per_req = b["events"] / b["requests"]
            if old is not None:  # the worker at another revision, in the same turn
                o = run_kimitui(url, model, c, n, tokens, tmp, root=old[1])
                ou = us_per_event(o, int(per_req * o["requests"]))
                old_ratios.append(ou / us_per_event(b, b["events"]))
                print(f"C={c:<5} trial {trial + 1}: kimitui at {old[0]} {ou:6.2f} us/event ({o['cpu_s']:.2f} s CPU; ramp "
                      f"lag {o['ramp_lag_ms']:.1f} ms, dispatch p99 {o['dispatch_p99_ms']} ms) | ratio {old_ratios[-1]:.2f}x",
                      flush=True)
            bu, ku = us_per_event(b, b["events"]), us_per_event(k, int(per_req * k["requests"]))
            bare_us.append(bu)
            kim_us.append(ku)
            ratios.append(ku / bu)
            lags.append(k["ramp_lag_ms"])
            print(f"C={c:<5} trial {trial + 1}: bare {bu:6.2f} us/event ({b['cpu_s']:.2f} s CPU, {b['events']} events, "
                  f"{b['events'] / b['wall_s']:.0f}/s; ramp lag {b['ramp_lag_ms']:.1f} ms) | kimitui {ku:6.2f} us/event "
                  f"({k['cpu_s']:.2f} s CPU, chunks {k['chunks']}; ramp lag {k['ramp_lag_ms']:.1f} ms, level lag "
                  f"{k['level_lag_ms']:.1f} ms, health lag {k['health_lag_ms']} ms, dispatch p99 {k['dispatch_p99_ms']} ms)"
                  f" | ratio {ku / bu:.2f}x  [{load_average()}]", flush=True)
        ratio = statistics.median(ratios)
        if old is not None:
            print(f"C={c} kimitui at {old[0]} / bare client: {statistics.median(old_ratios):.2f}x (median of {trials}; "
                  f"ratios {', '.join(f'{r:.2f}' for r in old_ratios)})", flush=True)
        checks.append(verdict(f"C={c} kimitui / bare client CPU per event",
                              f"{ratio:.2f}x (median of {trials}: kimitui {statistics.median(kim_us):.2f} us, "
                              f"bare {statistics.median(bare_us):.2f} us; ratios {', '.join(f'{r:.2f}' for r in ratios)})",
                              f"<= {RATIO_GOAL}x", ratio <= RATIO_GOAL))
        checks.append(verdict(f"C={c} loop lag of the ramp", f"{max(lags):.1f} ms (worst of {trials})",
                              f"<= {LAG_GOAL_MS:g} ms", max(lags) <= LAG_GOAL_MS))
    return checks


def minimal_server() -> tuple[subprocess.Popen[str], str]:
    """tests/support/minimal_server.py writing each response at once: far cheaper per event than the
    simulator, so the client, not the server, is what saturates."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "minimal_server.py"), "--port", "0",
                             "--uvloop", "--tick-ms", "0"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        raise RuntimeError(f"minimal server did not start: {line!r}")
    return proc, line.split()[1]


def scaling(url: str, model: str, c: int, workers: int, trials: int, tokens: int, rounds: int, tmp: Path) -> None:
    """Events per second at saturation with 1 and ``workers`` load processes (interleaved).

    Never pinned: the helpers would inherit their coordinator's one core."""
    os.environ.pop(CLIENT_CPU_ENV, None)
    rates: dict[int, list[float]] = {1: [], workers: []}
    for trial in range(trials):
        for w in (1, workers):
            k = run_kimitui(url, model, c, rounds * c, tokens, tmp, workers=w)
            lv = k["level"]
            rate = k["chunks"] / lv["wall_s"] if lv.get("wall_s") else float("nan")
            rates[w].append(rate)
            print(f"C={c} workers {w} trial {trial + 1}: {k['chunks']} chunks, {rate:.0f} chunks/s over the level's "
                  f"wall, {k['cpu_s']:.2f} s CPU in the first process  [{load_average()}]", flush=True)
    one, many = statistics.median(rates[1]), statistics.median(rates[workers])
    print(f"scaling C={c}: 1 worker {one:.0f} chunks/s, {workers} workers {many:.0f} chunks/s = {many / one:.2f}x "
          f"(median of {trials})  [{load_average()}]", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        pin_self()
        if sys.argv[2] == "bare":
            bare_child(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
        else:
            kimitui_child(sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="64,256,1024,2048")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    ap.add_argument("--rounds", type=int, default=2, help=f"requests per level = rounds x C (at least {MIN_REQUESTS})")
    ap.add_argument("--time-scale", type=float, default=50.0)
    ap.add_argument("--profile", default="tp8", help="a profile that runs 2048 requests at once")
    ap.add_argument("--scaling", type=int, metavar="C", help="also measure 1 vs --workers processes at this C")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--vs", metavar="REV", help="also run kimitui's worker as it was at this git revision, interleaved")
    ap.add_argument("--no-compare", action="store_true", help="only the scaling measurement")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave the server and the clients where the scheduler puts them (default: the server on "
                         "one core, each client on another, when there are two or more)")
    ap.add_argument("--scaling-server", choices=("minimal", "sim"), default="minimal",
                    help="what --scaling streams from: the minimal server (cheap per event: the client saturates) "
                         "or the simulator")
    args = ap.parse_args()
    from tests.support.simserver import start_sim

    tmp = Path(tempfile.mkdtemp(prefix="kimitui-bare-"))
    checks: list[bool] = []
    with contextlib.ExitStack() as stack:
        if args.no_compare and args.scaling_server == "minimal":
            sim = None
        else:
            sim = stack.enter_context(start_sim(args.profile, time_scale=args.time_scale))
            cores = None if args.no_pin else pin_cores()
            if cores is not None and sim.proc is not None:
                pin_process(sim.proc.pid, cores[0])
                os.environ[CLIENT_CPU_ENV] = str(min(cores[1]))
                print(f"pinned: the server on core(s) {sorted(cores[0])}, each client on core {min(cores[1])}",
                      flush=True)
            print(f"simulated server {sim.url}, profile {args.profile}, time scale {args.time_scale:g}; "
                  f"{args.tokens} tokens per request, {args.rounds} x C requests per level (at least {MIN_REQUESTS})  "
                  f"[{load_average()}]",
                  flush=True)
        if sim is not None and not args.no_compare:
            old = (args.vs, checkout(args.vs, tmp)) if args.vs else None
            checks += compare(sim.url, sim.model, [int(x) for x in args.levels.split(",")], args.trials, args.tokens,
                              args.rounds, tmp, old)
        if sim is not None and args.scaling and args.scaling_server == "sim":
            scaling(sim.url, sim.model, args.scaling, args.workers, args.trials, args.tokens, args.rounds, tmp)
    if args.scaling and args.scaling_server == "minimal":
        server, url = minimal_server()
        try:
            print(f"minimal server {url} (whole responses at once)  [{load_average()}]", flush=True)
            scaling(url, "minimal", args.scaling, args.workers, args.trials, args.tokens, args.rounds, tmp)
        finally:
            server.terminate()
            server.wait()
    exit_on(checks)


if __name__ == "__main__":
    main()
