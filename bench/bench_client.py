"""How much load can kimitui's client drive, next to SGLang's bench_serving?

Prints, for each concurrency C (default 64 and 256):

* streamed content chunks per client CPU-second, for kimitui's load process and
  for ``sglang.bench_serving`` driven the same way (same server, same C, same
  number of requests and output length, one warm-up request, both pinned to
  CPU 0 while the server is pinned to CPU 1).  CPU is read from
  ``/proc/PID/stat`` over the window in which the server had streams open, so
  interpreter start-up and tokenizer loading are not counted;
* the dispatch delay (actual minus intended send, the send stamped just before
  the request's bytes go to the transport) at a C=256 burst start, median of
  ``--burst-trials`` runs of the real load process, next to the goal
  (p99 <= 5 ms), after 256 warm-up requests and without any (connections are
  opened before the clock starts either way: set-up is not dispatch);
* what one send costs, in-process on the client CPU with 256 warm
  connections: aiohttp building and sending a request vs the load path's
  HTTP/1.1 client (``kimitui.loadgen.h1client``), CPU and wall, so the burst's
  floor (255 x one send's CPU) and the share lost to pre-emption are visible;
* 1024 concurrent streams: client-side errors and the most streams open at once.

The server is ``tests/support/minimal_server.py`` in paced mode (one chunk per stream
every ``--tick-ms``), which is what a real server looks like: about one SSE
event per read.  Note kimitui asks for ``continuous_usage_stats`` (per-chunk
token counts), so its chunks are ~40 % larger than bench_serving's.

bench_serving needs its own venv (never needed by tests)::

    python3.11 -m venv /tmp/sglbench
    /tmp/sglbench/bin/pip download sglang==0.5.23 --no-deps -d /tmp/sglwheel
    /tmp/sglbench/bin/pip install --no-deps /tmp/sglwheel/sglang-0.5.23-*.whl
    /tmp/sglbench/bin/pip install numpy aiohttp tqdm requests msgspec orjson pybase64 \\
        transformers==5.19.0 tokenizers==0.23.2 pillow psutil datasets pyzmq jinja2

Run: ``.venv/bin/python bench/bench_client.py [--levels 64,256] [--sgl-venv /tmp/sglbench]``
(``--only-dispatch`` skips the throughput and 1024-stream parts).  Goals, each printed PASS/FAIL (exit 1 on
FAIL): dispatch delay p99 <= 5 ms at the C=256 burst start; kimitui >= 1.0x bench_serving's chunks per
CPU-second (when bench_serving is installed); no client-side error at C=1024.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchutil import exit_on, verdict  # bench/ is on sys.path (the script's own folder)

ROOT = Path(__file__).resolve().parents[1]
CLIENT_CPU, SERVER_CPU = 0, 1
CHECKS: list[bool] = []
"""Each goal's PASS (True) or FAIL, as printed; exit 1 when any failed."""
HZ = os.sysconf("SC_CLK_TCK")

TOKENIZER_SCRIPT = r"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
words = ("the of and to in is it that for on was with as be at by this had not are but from or have an they "
         "which one you were all we her she there would their will when who him been has more if no out do so").split()
corpus = [" ".join(words[(i * 7 + j) % len(words)] for j in range(40)) for i in range(400)]
tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"],
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
fast.save_pretrained(sys.argv[1])
"""


def cpu_s(pid: int) -> float:
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def start_server(tick_ms: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "minimal_server.py"), "--port", "0", "--uvloop",
                             "--tick-ms", str(tick_ms), "--cpu", str(SERVER_CPU)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        raise RuntimeError(f"minimal server did not start: {line!r}")
    return proc, line.split()[1]


def pinned() -> None:
    os.sched_setaffinity(0, {CLIENT_CPU})


def watch(proc: subprocess.Popen[Any], url: str) -> dict[str, float]:
    """Sample the client's CPU and the server's open streams until the client exits."""
    first = last = None
    c0 = c1 = 0.0
    k0 = k1 = 0
    while proc.poll() is None:
        try:
            cpu = cpu_s(proc.pid)
        except (FileNotFoundError, ProcessLookupError):
            break
        st = get_json(url + "/stats")
        now = time.perf_counter()
        if st["in_flight"] > 0:
            if first is None:
                first, c0, k0 = now, cpu, st["chunks"]
            last, c1, k1 = now, cpu, st["chunks"]
        time.sleep(0.02)
    proc.wait()
    if first is None or last is None or last <= first:
        return {"chunks": 0, "cpu_s": 0.0, "wall_s": 0.0}
    return {"chunks": k1 - k0, "cpu_s": c1 - c0, "wall_s": last - first}


def run_kimitui(url: str, spec: dict[str, Any], out: Path) -> tuple[dict[str, float], list[dict[str, Any]]]:
    config = {"spec": spec, "sweep_id": "bench", "host": "bench", "progress_hz": 4.0}
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kimitui.loadgen.worker"], stdin=subprocess.PIPE, stdout=f,
                                preexec_fn=pinned, cwd=ROOT)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        figures = watch(proc, url)
        proc.stdin.close()
    events = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return figures, events


def run_bench_serving(url: str, venv: Path, tok_dir: Path, c: int, n: int, tokens: int, out: Path) -> dict[str, float]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    argv = [str(venv / "bin" / "python"), str(ROOT / "tests" / "support" / "sgl_bench_shim.py"), "--backend", "sglang-oai-chat",
            "--base-url", url, "--dataset-name", "random-ids", "--random-input-len", "32",
            "--random-output-len", str(tokens), "--random-range-ratio", "1.0", "--num-prompts", str(n),
            "--max-concurrency", str(c), "--tokenizer", str(tok_dir), "--model", str(tok_dir),
            "--served-model-name", "minimal", "--output-file", str(out), "--disable-tqdm", "--warmup-requests", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=pinned, env=env,
                            cwd=out.parent)
    figures = watch(proc, url)
    text = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
    if proc.returncode != 0:
        raise RuntimeError(f"bench_serving failed ({proc.returncode}):\n{text[-2000:]}")
    row = json.loads(out.read_text().splitlines()[-1])
    figures["completed"] = row.get("completed", 0)
    return figures


def kimitui_spec(url: str, c: int, n: int, tokens: int, **kw: Any) -> dict[str, Any]:
    spec = {"url": url, "model": "minimal", "levels": [c], "mode": "sustained", "max_tokens": tokens,
            "prompts": "random:32", "requests_per_level": n, "warmup_requests": 1, "stall_timeout_s": 30.0}
    spec.update(kw)
    return spec


def fmt(f: dict[str, float]) -> str:
    rate = f["chunks"] / f["cpu_s"] if f["cpu_s"] > 0 else float("nan")
    cpu_pct = 100 * f["cpu_s"] / f["wall_s"] if f["wall_s"] > 0 else float("nan")
    return (f"{rate:9.0f} chunks/CPU-s  ({f['chunks']:.0f} chunks in {f['wall_s']:.1f} s = "
            f"{f['chunks'] / max(f['wall_s'], 1e-9):7.0f}/s at {cpu_pct:4.0f} % of a core)")


SEND_PROBE = r"""
import asyncio, gc, os, sys, time, json
import aiohttp, uvloop
from kimitui.loadgen import h1client
from kimitui.loadgen.client import Deadlines, RequestTrace, build_body, make_session
url, c, trials = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ep = url + "/v1/chat/completions"
body = build_body("minimal", "hello there", 4)

async def aio_once(http):
    async def one(i):
        async with http.post(ep, data=body, headers={"Content-Type": "application/json", "X-Request-ID": f"a{i}"}) as r:
            await r.read()
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(one(i)) for i in range(c)]
    gc.disable(); c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    await asyncio.sleep(0)  # every task runs to its first yield: request built and handed to the transport
    t1, c1 = time.perf_counter_ns(), time.thread_time_ns(); gc.enable()
    await asyncio.gather(*tasks)
    return (c1 - c0) / c / 1e3, (t1 - t0) / c / 1e3, None

async def h1_once(pool):
    await pool.warm(c)
    traces = [RequestTrace(f"h{i}", c, False, 0) for i in range(c)]
    batch = [(pool.idle.pop(), t, pool.request_bytes(body, t.request_id)) for t in traces]
    futs = [conn.prime(t) for conn, t, _ in batch]
    gc.disable(); c0 = time.thread_time_ns()
    t0 = h1client.send_burst(batch)
    c1 = time.thread_time_ns(); t1 = traces[-1].sent_ns; gc.enable()
    await asyncio.gather(*futs)
    assert all(t.ok for t in traces), [t.error for t in traces if not t.ok][:3]
    delays = sorted((t.sent_ns - t0) / 1e6 for t in traces)
    return (c1 - c0) / c / 1e3, (t1 - t0) / (c - 1) / 1e3, delays[int(0.99 * (c - 1))]

async def main():
    out = {"aiohttp_cpu": [], "aiohttp_wall": [], "h1_cpu": [], "h1_wall": [], "h1_p99": []}
    async with make_session(c) as http:
        pool = h1client.Pool(ep, Deadlines())
        await aio_once(http)  # warm aiohttp's pool
        for _ in range(trials):  # interleaved: a noisy neighbour hurts both alike
            cpu, wall, _ = await aio_once(http)
            out["aiohttp_cpu"].append(cpu); out["aiohttp_wall"].append(wall)
            cpu, wall, p99 = await h1_once(pool)
            out["h1_cpu"].append(cpu); out["h1_wall"].append(wall); out["h1_p99"].append(p99)
        pool.close()
    print(json.dumps(out))

uvloop.run(main())
"""


def send_probe(url: str, c: int, trials: int) -> dict[str, float]:
    """Medians of the in-process send-cost probe (a subprocess pinned to the client CPU)."""
    res = subprocess.run([sys.executable, "-c", SEND_PROBE, url, str(c), str(trials)], capture_output=True,
                         text=True, preexec_fn=pinned, cwd=ROOT, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"send probe failed:\n{res.stderr[-2000:]}")
    return {k: statistics.median(v) for k, v in json.loads(res.stdout.splitlines()[-1]).items()}


def burst_delays(url: str, warmup: int, out: Path) -> tuple[float, float, float]:
    """One C=256 burst through the real load process: dispatch delay p50, p99, max (ms)."""
    _, events = run_kimitui(url, kimitui_spec(url, 256, 256, 32, mode="burst", warmup_requests=warmup), out)
    results = [e for e in events if e["kind"] == "request_result" and not e["warmup"]]
    bad = [e for e in results if not e["ok"]]
    if bad or len(results) != 256:
        raise RuntimeError(f"burst: {len(results)} results, {len(bad)} failed: {bad[:1]}")
    lv = next(e for e in events if e["kind"] == "level_result")
    delays = sorted((e["sent"] - e["intended_send"]) * 1000 for e in results)
    return delays[len(delays) // 2], lv["dispatch_delay_p99_ms"], delays[-1]


def dispatch_report(url: str, trials: int, tmp: Path) -> list[str]:
    """The C=256 burst-start dispatch delay, and what one send costs; returns the summary lines."""
    summary = []
    runs: dict[str, list[tuple[float, float, float]]] = {"after 256 warm-up requests": [], "no warm-up requests": []}
    for trial in range(trials):  # interleaved
        for label, warm in (("after 256 warm-up requests", 256), ("no warm-up requests", 0)):
            p50, p99, mx = burst_delays(url, warm, tmp / f"burst{warm}-{trial}.jsonl")
            runs[label].append((p50, p99, mx))
            print(f"C=256 burst start, {label:<27} trial {trial + 1}: dispatch delay p50 {p50:6.2f} ms, "
                  f"p99 {p99:6.2f} ms, max {mx:6.2f} ms", flush=True)
    for label, rows in runs.items():
        p50 = statistics.median(r[0] for r in rows)
        p99 = statistics.median(r[1] for r in rows)
        best = min(r[1] for r in rows)
        line = (f"C=256 burst start, {label}: dispatch delay p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                f"(median of {trials}; best p99 {best:.2f} ms)  goal p99 <= 5 ms: {'MET' if p99 <= 5 else 'NOT met'}")
        print(line, flush=True)
        CHECKS.append(verdict(f"C=256 burst start, {label}, dispatch delay p99", f"{p99:.2f} ms (median of {trials})",
                              "<= 5 ms", p99 <= 5))
        summary.append(line)
    pr = send_probe(url, 256, max(3, trials))
    line = (f"one send, in-process, 256 warm connections (median of {max(3, trials)}): aiohttp {pr['aiohttp_cpu']:.0f} us "
            f"CPU ({pr['aiohttp_wall']:.0f} us wall) per request = {pr['aiohttp_cpu'] * 255 / 1000:.1f} ms for the "
            f"256th; h1client {pr['h1_cpu']:.1f} us CPU ({pr['h1_wall']:.1f} us wall) = "
            f"{pr['h1_cpu'] * 255 / 1000:.1f} ms CPU floor for the 256th, p99 {pr['h1_p99']:.2f} ms here; "
            f"aiohttp/h1client = {pr['aiohttp_cpu'] / pr['h1_cpu']:.1f}x")
    print(line, flush=True)
    summary.append(line)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="64,256")
    ap.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    ap.add_argument("--tick-ms", type=float, default=10.0, help="server pacing: one chunk per stream per tick")
    ap.add_argument("--rounds", type=int, default=2, help="requests per level = rounds x C")
    ap.add_argument("--sgl-venv", type=Path, default=Path("/tmp/sglbench"))
    ap.add_argument("--trials", type=int, default=3, help="runs per client and level (medians are compared)")
    ap.add_argument("--skip-1024", action="store_true")
    ap.add_argument("--burst-trials", type=int, default=5, help="C=256 bursts per case (medians are reported)")
    ap.add_argument("--only-dispatch", action="store_true", help="only the C=256 burst start and the send probe")
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("note: fewer than 2 CPUs available; client and server share one", flush=True)
    levels = [int(x) for x in args.levels.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="kimitui-bench-"))
    server, url = start_server(args.tick_ms)
    sgl_python = args.sgl_venv / "bin" / "python"
    have_sgl = sgl_python.exists() and not args.only_dispatch
    tok_dir = tmp / "tok"
    if have_sgl:
        subprocess.run([str(sgl_python), "-c", TOKENIZER_SCRIPT, str(tok_dir)], check=True,
                       env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"server {url} tick {args.tick_ms:g} ms (CPU {SERVER_CPU}); clients on CPU {CLIENT_CPU}; "
          f"{args.tokens} tokens/request, {args.rounds} x C requests per level", flush=True)
    summary: list[str] = []
    try:
        summary += dispatch_report(url, args.burst_trials, tmp)
        for c in levels if not args.only_dispatch else []:
            n = args.rounds * c
            rates: dict[str, list[float]] = {"kimitui": [], "kimitui-no-usage": [], "bench_serving": []}
            for trial in range(args.trials):  # interleaved, so a noisy neighbour hurts every client alike
                for name, extra in (("kimitui", {}), ("kimitui-no-usage", {"stream_options": {"include_usage": True}})):
                    k, events = run_kimitui(url, kimitui_spec(url, c, n, args.tokens, extra_body=extra),
                                            tmp / f"k{c}-{trial}.jsonl")
                    bad = [e for e in events if e["kind"] == "request_result" and not e["ok"]]
                    rates[name].append(k["chunks"] / k["cpu_s"])
                    print(f"C={c:<4} {name:<17} {fmt(k)}  errors {len(bad)}", flush=True)
                if have_sgl:
                    s = run_bench_serving(url, args.sgl_venv, tok_dir, c, n, args.tokens, tmp / f"s{c}-{trial}.jsonl")
                    rates["bench_serving"].append(s["chunks"] / s["cpu_s"])
                    print(f"C={c:<4} {'bench_serving':<17} {fmt(s)}  completed {s['completed']:.0f}/{n}", flush=True)
            med = {k: statistics.median(v) for k, v in rates.items() if v}
            line = f"C={c:<4} median chunks/CPU-s over {args.trials} trials: " + ", ".join(
                f"{k} {v:.0f}" for k, v in med.items())
            print(line, flush=True)
            if have_sgl:
                line = (f"C={c:<4} ratio kimitui/bench_serving = {med['kimitui'] / med['bench_serving']:.2f}x "
                        f"(with per-chunk usage); {med['kimitui-no-usage'] / med['bench_serving']:.2f}x "
                        f"(same stream_options as bench_serving)  goal >= 1.0x")
                print(line, flush=True)
                summary.append(line)
                ratio = med["kimitui"] / med["bench_serving"]
                CHECKS.append(verdict(f"C={c} chunks per CPU-second, kimitui / bench_serving", f"{ratio:.2f}x",
                                      ">= 1.0x", ratio >= 1.0))
            else:
                print(f"C={c:<4} bench_serving skipped: install with the commands in this script's docstring "
                      f"(venv expected at {args.sgl_venv}, or pass --sgl-venv)", flush=True)
        if not args.skip_1024 and not args.only_dispatch:
            before = get_json(url + "/stats")["max_in_flight"]
            k, events = run_kimitui(url, kimitui_spec(url, 1024, 1024, 64, stall_timeout_s=60.0), tmp / "k1024.jsonl")
            results = [e for e in events if e["kind"] == "request_result" and not e["warmup"]]
            errors = [e for e in results if not e["ok"]]
            peak = get_json(url + "/stats")["max_in_flight"]
            print(f"C=1024 streams: {len(results)} requests, {len(errors)} client-side errors, "
                  f"{max(peak, before)} streams open at once on the server; {fmt(k)}", flush=True)
            for e in errors[:5]:
                print(f"  {e['error_class']}: {e['error']}")
            summary.append(f"C=1024 streams: {len(errors)} client-side errors of {len(results)}")
            CHECKS.append(verdict("C=1024 streams, client-side errors", f"{len(errors)} of {len(results)}", "0",
                                  not errors and len(results) == 1024))
        print("\nsummary:\n  " + "\n  ".join(summary), flush=True)
    finally:
        server.terminate()
        server.wait()
    exit_on(CHECKS)


if __name__ == "__main__":
    main()
