"""How much load can kimitui's client drive, next to SGLang's bench_serving?

Prints, for each concurrency C (default 64 and 256):

* streamed content chunks per client CPU-second, for kimitui's load process and
  for ``sglang.bench_serving`` driven the same way (same server, same C, same
  number of requests and output length, one warm-up request, both pinned to
  CPU 0 while the server is pinned to CPU 1).  CPU is read from
  ``/proc/PID/stat`` over the window in which the server had streams open, so
  interpreter start-up and tokenizer loading are not counted;
* the dispatch delay (actual minus intended send) at a C=256 burst start, with
  warm connections and cold;
* 1024 concurrent streams: client-side errors and the most streams open at once.

The server is ``bench/minimal_server.py`` in paced mode (one chunk per stream
every ``--tick-ms``), which is what a real server looks like: about one SSE
event per read.  Note kimitui asks for ``continuous_usage_stats`` (per-chunk
token counts), so its chunks are ~40 % larger than bench_serving's.

bench_serving needs its own venv (never needed by tests)::

    python3.11 -m venv /tmp/sglbench
    /tmp/sglbench/bin/pip download sglang==0.5.23 --no-deps -d /tmp/sglwheel
    /tmp/sglbench/bin/pip install --no-deps /tmp/sglwheel/sglang-0.5.23-*.whl
    /tmp/sglbench/bin/pip install numpy aiohttp tqdm requests msgspec orjson pybase64 \\
        transformers==5.19.0 tokenizers==0.23.2 pillow psutil datasets pyzmq jinja2

Run: ``.venv/bin/python bench/bench_client.py [--levels 64,256] [--sgl-venv /tmp/sglbench]``.
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

ROOT = Path(__file__).resolve().parents[1]
CLIENT_CPU, SERVER_CPU = 0, 1
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
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "minimal_server.py"), "--port", "0", "--uvloop",
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
        proc = subprocess.Popen([sys.executable, "-m", "kimitui.bench.worker"], stdin=subprocess.PIPE, stdout=f,
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
    argv = [str(venv / "bin" / "python"), str(ROOT / "bench" / "sgl_bench_shim.py"), "--backend", "sglang-oai-chat",
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="64,256")
    ap.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    ap.add_argument("--tick-ms", type=float, default=10.0, help="server pacing: one chunk per stream per tick")
    ap.add_argument("--rounds", type=int, default=2, help="requests per level = rounds x C")
    ap.add_argument("--sgl-venv", type=Path, default=Path("/tmp/sglbench"))
    ap.add_argument("--trials", type=int, default=3, help="runs per client and level (medians are compared)")
    ap.add_argument("--skip-1024", action="store_true")
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        print("note: fewer than 2 CPUs available; client and server share one", flush=True)
    levels = [int(x) for x in args.levels.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="kimitui-bench-"))
    server, url = start_server(args.tick_ms)
    sgl_python = args.sgl_venv / "bin" / "python"
    have_sgl = sgl_python.exists()
    tok_dir = tmp / "tok"
    if have_sgl:
        subprocess.run([str(sgl_python), "-c", TOKENIZER_SCRIPT, str(tok_dir)], check=True,
                       env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"server {url} tick {args.tick_ms:g} ms (CPU {SERVER_CPU}); clients on CPU {CLIENT_CPU}; "
          f"{args.tokens} tokens/request, {args.rounds} x C requests per level", flush=True)
    try:
        for c in levels:
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
                print(f"C={c:<4} ratio kimitui/bench_serving = {med['kimitui'] / med['bench_serving']:.2f}x "
                      f"(with per-chunk usage); {med['kimitui-no-usage'] / med['bench_serving']:.2f}x "
                      f"(same stream_options as bench_serving)", flush=True)
            else:
                print(f"C={c:<4} bench_serving skipped: install with the commands in this script's docstring "
                      f"(venv expected at {args.sgl_venv}, or pass --sgl-venv)", flush=True)
        for label, warm in (("warm connections", 256), ("cold", 0)):
            _, events = run_kimitui(url, kimitui_spec(url, 256, 256, 32, mode="burst", warmup_requests=warm),
                                    tmp / f"burst{warm}.jsonl")
            lv = next(e for e in events if e["kind"] == "level_result")
            delays = sorted((e["sent"] - e["intended_send"]) * 1000 for e in events
                            if e["kind"] == "request_result" and not e["warmup"])
            sends = sorted(e["sent"] for e in events if e["kind"] == "request_result" and not e["warmup"])
            gaps = sorted((b - a) * 1e6 for a, b in zip(sends, sends[1:]))
            print(f"C=256 burst start, {label}: dispatch delay p50 {delays[len(delays) // 2]:.2f} ms, "
                  f"p99 {lv['dispatch_delay_p99_ms']:.2f} ms, max {delays[-1]:.2f} ms; median gap between "
                  f"sends {gaps[len(gaps) // 2]:.0f} us (x255 = {gaps[len(gaps) // 2] * 255 / 1000:.1f} ms "
                  f"without preemption)", flush=True)
        if not args.skip_1024:
            before = get_json(url + "/stats")["max_in_flight"]
            k, events = run_kimitui(url, kimitui_spec(url, 1024, 1024, 64, stall_timeout_s=60.0), tmp / "k1024.jsonl")
            results = [e for e in events if e["kind"] == "request_result" and not e["warmup"]]
            errors = [e for e in results if not e["ok"]]
            peak = get_json(url + "/stats")["max_in_flight"]
            print(f"C=1024 streams: {len(results)} requests, {len(errors)} client-side errors, "
                  f"{max(peak, before)} streams open at once on the server; {fmt(k)}", flush=True)
            for e in errors[:5]:
                print(f"  {e['error_class']}: {e['error']}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
