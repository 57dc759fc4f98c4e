"""Does kimitui's sweep measure what SGLang's bench_serving measures, on the same server?

Starts the real simulated SGLang server (``kimitui sim serve --profile ep8-tuned
--enable-metrics``, a free 127.0.0.1 port, ``--time-scale 2``) pinned to CPU 1,
then for each concurrency C runs, pinned to CPU 0 and interleaved (A B, B A,
A B ... per trial, so drift and a noisy neighbour hit both alike):

* kimitui's real load path: ``kimitui sweep --url ... --levels C --mode sustained
  --requests N --max-tokens T --prompts seed --warmup 0 --json --out ...``
  (the CLI, its SweepRunner and load process; figures from its ``--json``
  level and its recording);
* SGLang 0.5.23's ``bench_serving`` (``sglang.benchmark.serving.cli_main``, run
  through ``tests/support/sgl_bench_shim.py`` because ``sglang/__init__`` imports torch):
  ``--backend sglang-oai-chat --max-concurrency C --num-prompts N
  --warmup-requests 0`` with the same prompts, the same fixed output length
  with ``ignore_eos`` (its default) and, through ``--extra-request-body``, the
  same ``stream_options`` as kimitui, so the server does the same work and
  bench_serving takes token counts from ``usage``.  Its figures come from its
  ``--output-file`` JSONL (``--output-details``).

Prompts: kimitui's own set (``--prompts``, default ``seed``: the field notes'
five, cycled), handed to bench_serving verbatim as a ``conversations`` JSONL
(its ``custom`` dataset, ``--sharegpt-output-len T``), so both send the same
prompt multiset.  With ``--prompts random:N`` kimitui first calibrates the word
count against the server (1-token probes before its level); a priming run reads
the count from its recording's note so bench_serving gets the same prompts, and
the probes then show in the server-side rows of kimitui's runs.
``--sgl-dataset random`` uses bench_serving's ``random`` dataset instead
(``--random-input-len``/``--random-output-len``, ``--random-range-ratio 1.0``)
with those prompts as its source text, cut to a fixed count of the tokenizer's
tokens: the prompts then differ (the prompt-token row shows by how much).  The
tokenizer is the tiny one in ``shared/data/tok-tiny`` (``HF_HUB_OFFLINE=1``).

Per level it prints medians over the trials, kimitui vs bench_serving, the ratio
and PASS/DIFF against these tolerances:

=========================================  ======================================
TTFT p50                                   within 5 % or 2 ms
TTFT p99                                   within 10 % or 3 ms (a tail of N samples)
TTFT mean minus the server scheduler's     within 2 ms (what the client and the server's
TTFT mean (``/metrics``: request parsed    HTTP side add; the scheduler's batching of
-> first token)                            the arrivals cancels out)
TPOT p50                                   within 2 %
ITL p50, pooled per chunk                  within 5 % or 0.3 ms
E2E p50                                    within 2 %
output tok/s                               within 2 % (kimitui ``agg_tok_s`` vs ``output_throughput``)
output tokens (server usage)               exact
prompt tokens (server-counted)             exact (``custom`` dataset only)
=========================================  ======================================

and, for information, figures defined differently (kimitui's steady tok/s and
per-request ITL, bench_serving's re-tokenized output count, its throughput less
the GET /server_info its duration includes) and how the server grouped each
client's arrivals into prefill passes (its log), which is what moves TTFT at
C > 1.  The definitions and how this bench lines them up: docs/sweeps.md,
"Agreement with SGLang's bench_serving".

bench_serving needs its own venv outside the repo (never needed by tests or CI);
the same recipe as ``bench/bench_client.py``'s (pip's "sglang 0.5.23 requires
..." complaints after the last step are expected: the package is installed
``--no-deps`` and the benchmark needs none of those)::

    python3.11 -m venv /root/sglbench
    /root/sglbench/bin/pip download sglang==0.5.23 --no-deps -d /root/sglwheel
    /root/sglbench/bin/pip install --no-deps /root/sglwheel/sglang-0.5.23-*.whl
    /root/sglbench/bin/pip install numpy aiohttp tqdm requests msgspec orjson pybase64 \\
        transformers==5.19.0 tokenizers==0.23.2 pillow psutil datasets pyzmq jinja2

Run: ``.venv/bin/python bench/bench_agreement.py [--levels 1,8,64] [--trials 3]
[--tokens 64] [--time-scale 2] [--prompts seed|random:N] [--sgl-venv /root/sglbench]
[--sgl-dataset custom|random]`` (about 3 minutes with the defaults on a 2-core box).  Goal: every check
PASS; the closing line says PASS/FAIL and the exit status is 1 when any check is DIFF.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.net import free_port  # noqa: E402

CLIENT_CPU, SERVER_CPU = 0, 1
HZ = os.sysconf("SC_CLK_TCK")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
RECIPE = __doc__.split("::\n\n", 1)[1].split("\n\n", 1)[0]

# (key, label, relative tolerance, absolute tolerance, exact)
CHECKS: list[tuple[str, str, float, float, bool]] = [
    ("ttft_p50_ms", "TTFT p50 (ms)", 0.05, 2.0, False),
    ("ttft_p99_ms", "TTFT p99 (ms)", 0.10, 3.0, False),
    ("ttft_client_ms", "TTFT mean minus the scheduler's own (ms)", 0.0, 2.0, False),
    ("tpot_p50_ms", "TPOT p50 (ms)", 0.02, 0.0, False),
    ("itl_pooled_p50_ms", "ITL p50, pooled per chunk (ms)", 0.05, 0.3, False),
    ("e2e_p50_ms", "E2E p50 (ms)", 0.02, 0.0, False),
    ("tok_s", "output tok/s", 0.02, 0.0, False),
    ("output_tokens", "output tokens (usage)", 0.0, 0.0, True),
    ("prompt_tokens", "prompt tokens (server)", 0.0, 0.0, True),
]
INFO: list[tuple[str, str, str]] = [  # (key, label, which side has it)
    ("ttft_mean_ms", "TTFT mean (ms)", "ks"),
    ("server_ttft_mean_ms", "scheduler's TTFT mean, /metrics (ms)", "ks"),
    ("ttfb_p50_ms", "kimitui TTFB p50, response headers (ms)", "k"),
    ("steady_tok_s", "kimitui steady tok/s", "k"),
    ("itl_level_p50_ms", "kimitui ITL p50 (request medians, per token)", "k"),
    ("retokenized_tokens", "bench_serving output tokens, re-tokenized", "s"),
    ("duration_s", "wall (s): level wall / bench_serving duration", "ks"),
    ("tok_s_no_info", "bench_serving tok/s less its /server_info GET", "s"),
]


# --------------------------------------------------------------------------- helpers

def quantile(vals: list[float], q: float) -> float | None:
    """numpy's default (linear) percentile, as both tools use."""
    if not vals:
        return None
    v = sorted(vals)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def pin(cpu: int):  # noqa: ANN201 - a preexec_fn
    return lambda: os.sched_setaffinity(0, {cpu})


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def core_times() -> dict[int, tuple[int, int]]:
    """(busy, total) jiffies per CPU from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                v = [int(x) for x in vals]
                idle = v[3] + (v[4] if len(v) > 4 else 0)
                out[int(name[3:])] = (sum(v[:8]) - idle, sum(v[:8]))
    return out


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def find_tokenizer(given: Path | None) -> Path | None:
    for cand in ([given] if given else []) + [ROOT / "shared/data/tok-tiny", ROOT.parent / "shared/data/tok-tiny"]:
        if cand and (cand / "tokenizer.json").exists():
            return cand
    return None


def default_venv() -> Path:
    if os.environ.get("SGL_VENV"):
        return Path(os.environ["SGL_VENV"])
    for cand in (Path("/root/sglbench"), Path("/tmp/sglbench")):
        if (cand / "bin" / "python").exists():
            return cand
    return Path("/root/sglbench")


def check_sgl_venv(venv: Path) -> Path:
    py = venv / "bin" / "python"
    probe = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('sglang') and u.find_spec('transformers') else 3)"
    ok = py.exists() and subprocess.run([str(py), "-c", probe], capture_output=True).returncode == 0
    if not ok:
        print(f"bench_agreement: no SGLang bench_serving venv at {venv} ({py} missing or without sglang/"
              f"transformers).\nBuild it (outside the repo; never needed by tests or CI):\n\n{RECIPE}\n\n"
              f"or pass --sgl-venv PATH.", file=sys.stderr)
        sys.exit(2)
    return py


# --------------------------------------------------------------------------- the server

class Sim:
    """``kimitui sim serve`` pinned to SERVER_CPU, logging to a file we can slice per run."""

    def __init__(self, profile: str, time_scale: float, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "sim.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "kimitui", "sim", "serve", "--profile", profile, "--host", "127.0.0.1",
                "--port", str(self.port), "--time-scale", str(time_scale), "--seed", "0", "--enable-metrics"]
        env = dict(os.environ, KIMITUI_SIM_STATE=str(tmp / "gpus.json"), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                     preexec_fn=pin(SERVER_CPU), start_new_session=True)
        deadline = time.monotonic() + 30.0 + 60.0 / time_scale  # start-up is ~45 simulated seconds
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sim exited {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sim not healthy in time:\n{self.log_tail()}")
            time.sleep(0.25)
        self.model = get_json(self.url + "/v1/models")["data"][0]["id"]

    def log_tail(self, n: int = 2000) -> str:
        return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")

    def mark(self) -> int:
        self._log.flush()
        return self.log_path.stat().st_size

    def prefill_groups(self, start: int, end: int) -> list[int]:
        """``#new-seq`` of every prefill pass logged between two marks: how arrivals were batched."""
        with open(self.log_path, "rb") as f:
            f.seek(start)
            text = f.read(max(0, end - start)).decode("utf-8", "replace")
        return [int(line.split("#new-seq: ", 1)[1].split(",", 1)[0]) for line in text.splitlines()
                if "Prefill batch, #new-seq: " in line]

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid)

    def server_info_ms(self, n: int = 7) -> float:
        """Median time of one GET /server_info, which bench_serving's duration includes (sglang backends)."""
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            with urllib.request.urlopen(self.url + "/server_info", timeout=5) as r:
                r.read()
            times.append((time.perf_counter() - t0) * 1000.0)
        return statistics.median(times)

    def ttft_totals(self) -> tuple[float, float]:
        """(sum, count) of the server's own TTFT histogram (arrival to first token), from /metrics."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        total = count = 0.0
        for line in text.splitlines():
            if line.startswith("sglang:time_to_first_token_seconds_sum"):
                total += float(line.rsplit(" ", 1)[1])
            elif line.startswith("sglang:time_to_first_token_seconds_count"):
                count += float(line.rsplit(" ", 1)[1])
        return total, count

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


# --------------------------------------------------------------------------- the two clients

class Meter:
    """CPU use of both cores, the client (our children) and the server over one run."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim

    def __enter__(self) -> Meter:
        self.t0, self.cores0 = time.monotonic(), core_times()
        self.child0, self.srv0 = children_cpu_s(), self.sim.cpu_s()
        self.log0 = self.sim.mark()
        self.ttft0 = self.sim.ttft_totals()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self.t0
        cores = core_times()
        self.busy = {c: 100.0 * (cores[c][0] - self.cores0[c][0]) / max(1, cores[c][1] - self.cores0[c][1])
                     for c in (CLIENT_CPU, SERVER_CPU) if c in cores and c in self.cores0}
        self.client_pct = 100.0 * (children_cpu_s() - self.child0) / wall
        self.server_pct = 100.0 * (self.sim.cpu_s() - self.srv0) / wall
        self.groups = self.sim.prefill_groups(self.log0, self.sim.mark())
        t1 = self.sim.ttft_totals()
        n = t1[1] - self.ttft0[1]
        self.server_ttft_ms = 1000.0 * (t1[0] - self.ttft0[0]) / n if n > 0 else None
        self.load = os.getloadavg()[0]

    def line(self) -> str:
        b = self.busy
        return (f"cpu{CLIENT_CPU} busy {b.get(CLIENT_CPU, float('nan')):3.0f} % (this client {self.client_pct:3.0f} %), "
                f"cpu{SERVER_CPU} busy {b.get(SERVER_CPU, float('nan')):3.0f} % (server {self.server_pct:3.0f} %), "
                f"load {self.load:.2f}")


PROMPTS_SCRIPT = r"""
import json, sys
from kimitui.loadgen.prompts import prompt_source
spec, n, path, custom, words = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "custom", sys.argv[5]
# the sweep's default seed 0, and for random:N the word count its calibration chose; with no warm-up,
# request i sends prompt i
make = prompt_source(spec, 0, words=int(words)) if words else prompt_source(spec, 0)
rows = [{"conversations": [{"from": "human", "value": make(i)}, {"from": "gpt", "value": "ok"}]} for i in range(n)]
with open(path, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in rows) if custom else json.dumps(rows))
"""


def write_prompts(prompts: str, words: int | None, n: int, path: Path, dataset: str) -> None:
    """kimitui's prompts as bench_serving reads them, made by a fresh interpreter (the code the sweep runs now)."""
    subprocess.run([sys.executable, "-c", PROMPTS_SCRIPT, prompts, str(n), str(path), dataset, str(words or "")],
                   check=True, cwd=ROOT)


def calibrated_words(events: list[dict[str, Any]]) -> int | None:
    """The word count a ``random:N`` sweep's prompt calibration chose (its Note), if it ran one."""
    for e in events:  # a note or an info-level event, by its text
        for text in (e.get("text"), e.get("message")):
            m = re.match(r"prompt calibration: \S+ = (\d+) words per prompt", text or "")
            if m:
                return int(m.group(1))
    return None


def run_kimitui(sim: Sim, c: int, n: int, tokens: int, prompts: str, out: Path) -> tuple[dict[str, Any], Meter]:
    """One ``kimitui sweep`` of one level.  For ``random:N`` the sweep first sends its 1-token calibration
    probes; they are outside its level but inside this run's server-side TTFT and prefill counts."""
    argv = [sys.executable, "-m", "kimitui", "sweep", "--url", sim.url, "--model", sim.model, "--levels", str(c),
            "--mode", "sustained", "--requests", str(n), "--max-tokens", str(tokens), "--prompts", prompts,
            "--warmup", "0", "--json", "--no-progress", "--out", str(out)]
    with Meter(sim) as meter:
        res = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, preexec_fn=pin(CLIENT_CPU), timeout=900)
    if res.returncode != 0:
        raise RuntimeError(f"kimitui sweep exited {res.returncode}:\n{res.stderr[-2000:]}")
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    lv = summary["levels"][0]
    rec = Path(summary["recording"])
    raw = rec.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    from kimitui.events import RequestResult

    reqs = [RequestResult.model_validate(e) for e in events if e.get("kind") == "request_result" and not e["warmup"]]
    ok = [r for r in reqs if r.ok]
    gaps = [b - a for r in ok for a, b in zip(r.chunk_offsets_ms or [], (r.chunk_offsets_ms or [])[1:])]
    ms = lambda v: None if v is None else v * 1000.0  # noqa: E731
    fig = {
        "ttft_p50_ms": ms(lv["ttft"]["p50"]),
        "ttft_p99_ms": ms(lv["ttft"]["p99"]),
        "ttft_mean_ms": ms(lv["ttft"]["mean"]),
        "ttfb_p50_ms": ms(quantile([r.ttfb_s for r in ok if r.ttfb_s is not None], 0.5)),
        "tpot_p50_ms": ms(lv["tpot"]["p50"]),
        "itl_pooled_p50_ms": quantile(gaps, 0.5),
        "e2e_p50_ms": ms(quantile([r.e2e_s for r in ok if r.e2e_s is not None], 0.5)),
        "tok_s": lv["agg_tok_s"],
        "output_tokens": lv["output_tokens"],
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "steady_tok_s": lv["steady_tok_s"],
        "itl_level_p50_ms": ms(lv["itl"]["p50"]),
        "duration_s": lv["wall_s"],
        "completed": lv["ok"],
        "failed": lv["failed"],
        "chunks_per_req": statistics.median(r.chunks for r in ok) if ok else None,
        "note": lv.get("client_distorted") or "",
        "words": calibrated_words(events),
    }
    return fig, meter


def run_bench_serving(sim: Sim, py: Path, tok: Path, c: int, n: int, tokens: int, prompts: str,
                      words: int | None, dataset: str, input_len: int, out: Path) -> tuple[dict[str, Any], Meter]:
    body = {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}  # kimitui's body
    data = out.with_name(out.stem + ("-prompts.jsonl" if dataset == "custom" else "-prompts.json"))
    argv = [str(py), str(ROOT / "tests" / "support" / "sgl_bench_shim.py"), "--backend", "sglang-oai-chat", "--base-url", sim.url,
            "--model", sim.model, "--tokenizer", str(tok), "--num-prompts", str(n), "--max-concurrency", str(c),
            "--output-file", str(out), "--output-details", "--disable-tqdm", "--warmup-requests", "0",
            "--extra-request-body", json.dumps(body)]
    if dataset == "custom":
        argv += ["--dataset-name", "custom", "--dataset-path", str(data), "--sharegpt-output-len", str(tokens)]
    else:
        argv += ["--dataset-name", "random", "--dataset-path", str(data), "--random-input-len", str(input_len),
                 "--random-output-len", str(tokens), "--random-range-ratio", "1.0"]
    out.unlink(missing_ok=True)
    write_prompts(prompts, words, n, data, dataset)
    with Meter(sim) as meter:
        res = subprocess.run(argv, capture_output=True, text=True, cwd=out.parent, preexec_fn=pin(CLIENT_CPU),
                             env=dict(os.environ, **OFFLINE), timeout=900)
    if res.returncode != 0 or not out.exists():
        raise RuntimeError(f"bench_serving exited {res.returncode}:\n{(res.stdout + res.stderr)[-3000:]}")
    row = json.loads(out.read_text().splitlines()[-1])
    ok = [i for i, e in enumerate(row["errors"]) if not e]
    fig = {
        "ttft_p50_ms": row["median_ttft_ms"],
        "ttft_p99_ms": row["p99_ttft_ms"],
        "ttft_mean_ms": row["mean_ttft_ms"],
        "tpot_p50_ms": row["median_tpot_ms"],
        "itl_pooled_p50_ms": row["median_itl_ms"],
        "e2e_p50_ms": row["median_e2e_latency_ms"],
        "tok_s": row["output_throughput"],
        "output_tokens": row["total_output_tokens"],
        "prompt_tokens": sum(row["input_lens"][i] for i in ok),  # usage.prompt_tokens (_record_server_prompt_len)
        "retokenized_tokens": row["total_output_tokens_retokenized"],
        "duration_s": row["duration"],
        "completed": row["completed"],
        "failed": n - row["completed"],
        "chunks_per_req": statistics.median(len(row["itls"][i]) + 1 for i in ok) if ok else None,
        "note": next((e.strip().splitlines()[-1] for e in row["errors"] if e), ""),
    }
    return fig, meter


# --------------------------------------------------------------------------- report

def verdict(k: float | None, s: float | None, rel: float, abs_: float, exact: bool) -> str:
    if k is None or s is None:
        return "n/a"
    if exact:
        return "PASS" if k == s else "DIFF"
    return "PASS" if abs(k - s) <= max(rel * abs(s), abs_) else "DIFF"


def tol_text(rel: float, abs_: float, exact: bool) -> str:
    if exact:
        return "exact"
    return f"{rel:.0%}" + (f" or {abs_:g} ms" if abs_ else "")


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.2f}"


def med(runs: list[dict[str, Any]], key: str) -> Any:
    vals = [r[key] for r in runs if r.get(key) is not None]
    if not vals:
        return None
    m = statistics.median(vals)
    return int(m) if all(isinstance(v, int) for v in vals) and m == int(m) else m


def level_report(c: int, n: int, tokens: int, k_runs: list[dict[str, Any]], s_runs: list[dict[str, Any]],
                 k_groups: list[list[int]], s_groups: list[list[int]], dataset: str,
                 probes: bool = False) -> tuple[list[str], int, int]:
    lines = [f"C={c}: {n} requests x {tokens} tokens, medians of {len(k_runs)} trials",
             f"  {'figure':<46} {'kimitui':>10} {'bench_serving':>14} {'ratio':>7}  {'tolerance':<12} verdict"]
    passed = total = 0
    for key, label, rel, abs_, exact in CHECKS:
        k, s = med(k_runs, key), med(s_runs, key)
        v = verdict(k, s, rel, abs_, exact)
        tol = tol_text(rel, abs_, exact)
        if key == "prompt_tokens" and dataset != "custom":
            v, tol = "info", "(prompts differ)"
        elif key == "ttft_client_ms" and probes:
            v, tol = "info", "(+probes)"
        elif v in ("PASS", "DIFF"):
            total += 1
            passed += v == "PASS"
        ratio = f"{k / s:.3f}" if k is not None and s else "-"
        lines.append(f"  {label:<46} {fmt(k):>10} {fmt(s):>14} {ratio:>7}  {tol:<12} {v}")
    for key, label, side in INFO:
        k = med(k_runs, key) if "k" in side else None
        s = med(s_runs, key) if "s" in side else None
        lines.append(f"  {label:<46} {fmt(k):>10} {fmt(s):>14} {'':>7}  {'(info)':<12}")
    kc, sc = med(k_runs, "chunks_per_req"), med(s_runs, "chunks_per_req")
    lines.append(f"  {'content chunks per request (median)':<46} {fmt(kc):>10} {fmt(sc):>14} {'':>7}  {'(info)':<12}")
    lines.append(f"  prefill passes' #new-seq (server log), trial 1: kimitui {_groups(k_groups[0])}, "
                 f"bench_serving {_groups(s_groups[0])}")
    failed_k, failed_s = sum(r["failed"] for r in k_runs), sum(r["failed"] for r in s_runs)
    if failed_k or failed_s:
        lines.append(f"  failed requests over all trials: kimitui {failed_k}, bench_serving {failed_s}")
    notes = {r["note"] for r in k_runs if r["note"]}
    for note in notes:
        lines.append(f"  kimitui client_distorted: {note}")
    return lines, passed, total


def _groups(g: list[int]) -> str:
    if len(g) <= 12:
        return str(g)
    return f"{len(g)} passes, median {statistics.median(g):g}, max {max(g)}"


# --------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,8,64")
    ap.add_argument("--trials", type=int, default=3, help="interleaved runs per client and level (medians)")
    ap.add_argument("--tokens", type=int, default=64, help="output tokens per request (ignore_eos)")
    ap.add_argument("--rounds", type=int, default=2, help="requests per level = max(rounds x C, --min-requests)")
    ap.add_argument("--min-requests", type=int, default=16)
    ap.add_argument("--prompts", default="seed", help="kimitui's prompt set, sent to both: seed or random:N")
    ap.add_argument("--time-scale", type=float, default=2.0, help="the simulator's clock speed-up")
    ap.add_argument("--profile", default="ep8-tuned")
    ap.add_argument("--sgl-venv", type=Path, default=default_venv(),
                    help="bench_serving's venv (default: $SGL_VENV, else /root/sglbench, else bench_client's /tmp/sglbench)")
    ap.add_argument("--sgl-dataset", choices=["custom", "random"], default="custom",
                    help="custom: kimitui's prompts verbatim; random: bench_serving's random dataset over them")
    ap.add_argument("--sgl-input-len", type=int, default=100,
                    help="--random-input-len (tokenizer tokens) for --sgl-dataset random")
    ap.add_argument("--tokenizer", type=Path, default=None, help="default: shared/data/tok-tiny")
    args = ap.parse_args()
    py = check_sgl_venv(args.sgl_venv)
    tok = find_tokenizer(args.tokenizer)
    if tok is None:
        print("bench_agreement: no tokenizer: shared/data/tok-tiny not found (pass --tokenizer DIR)", file=sys.stderr)
        return 2
    if len(os.sched_getaffinity(0)) < 2:
        print("note: fewer than 2 CPUs available; client and server share one", flush=True)
    levels = [int(x) for x in args.levels.split(",")]
    prompts = args.prompts
    tmp = Path(tempfile.mkdtemp(prefix="kimitui-agree-"))
    started = time.time()
    load0 = os.getloadavg()
    sim = Sim(args.profile, args.time_scale, tmp)
    print(f"sim {args.profile} at {sim.url}, time-scale {args.time_scale:g}, CPU {SERVER_CPU}; clients on CPU "
          f"{CLIENT_CPU}; model {sim.model}; prompts {prompts} ({args.sgl_dataset} dataset for bench_serving), "
          f"tokenizer {tok}; load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} "
          f"on {os.cpu_count()} CPUs", flush=True)
    results: dict[int, dict[str, Any]] = {}
    try:
        for c in levels:
            results[c] = {"n": max(args.rounds * c, args.min_requests), "k": [], "s": [], "kg": [], "sg": []}
        # Priming, not measured: both clients once (start-up paths, the server's first requests), and for
        # random:N the word count kimitui's calibration picks, so bench_serving gets the very same prompts.
        fig, _ = run_kimitui(sim, 1, 2, 8, prompts, tmp / "k-prime.jsonl")
        words = fig["words"]
        run_bench_serving(sim, py, tok, 1, 2, 8, prompts, words, args.sgl_dataset, args.sgl_input_len,
                          tmp / "s-prime.jsonl")
        if words is not None:
            print(f"kimitui's prompt calibration: {prompts} = {words} words per prompt; bench_serving gets the "
                  f"same prompts (the calibration's 1-token probes precede every kimitui run: they show in the "
                  f"server-side TTFT and prefill counts of kimitui's runs, not in its figures)", flush=True)
        for trial in range(args.trials):
            for li, c in enumerate(levels):
                n = results[c]["n"]
                order = ["k", "s"] if (trial + li) % 2 == 0 else ["s", "k"]
                for who in order:
                    if who == "k":
                        fig, m = run_kimitui(sim, c, n, args.tokens, prompts, tmp / f"k-c{c}-t{trial}.jsonl")
                        if fig["words"] != words:
                            print(f"note: kimitui's calibration now picks {fig['words']} words (was {words}); "
                                  f"bench_serving's prompts follow from its next run", flush=True)
                            words = fig["words"]
                    else:
                        fig, m = run_bench_serving(sim, py, tok, c, n, args.tokens, prompts, words, args.sgl_dataset,
                                                   args.sgl_input_len, tmp / f"s-c{c}-t{trial}.jsonl")
                    fig["server_ttft_mean_ms"] = m.server_ttft_ms
                    if who == "s":  # its duration ends after a blocking GET /server_info; timed here, just after
                        info_s = sim.server_info_ms() / 1000.0
                        fig["tok_s_no_info"] = fig["output_tokens"] / max(1e-9, fig["duration_s"] - info_s)
                    if fig["ttft_mean_ms"] is not None and m.server_ttft_ms is not None:
                        fig["ttft_client_ms"] = fig["ttft_mean_ms"] - m.server_ttft_ms
                    results[c][who].append(fig)
                    results[c][who + "g"].append(m.groups)
                    name = "kimitui" if who == "k" else "bench_serving"
                    print(f"trial {trial + 1} C={c:<3} {name:<13} TTFT p50 {fmt(fig['ttft_p50_ms']):>7} p99 "
                          f"{fmt(fig['ttft_p99_ms']):>7} ms, TPOT p50 {fmt(fig['tpot_p50_ms']):>6} ms, "
                          f"{fmt(fig['tok_s']):>7} tok/s, {fig['output_tokens']} tokens, "
                          f"{fig['completed']}/{n} ok | {m.line()}", flush=True)
    finally:
        sim.stop()
    load1 = os.getloadavg()
    print(f"\n=== kimitui sweep vs SGLang 0.5.23 bench_serving on kimitui sim ({args.profile}, time-scale "
          f"{args.time_scale:g}); {args.trials} interleaved trials; load average {load0[0]:.2f} at start, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at end; {time.time() - started:.0f} s ===")
    passed = total = 0
    for c in levels:
        r = results[c]
        lines, p, t = level_report(c, r["n"], args.tokens, r["k"], r["s"], r["kg"], r["sg"], args.sgl_dataset,
                                   probes=words is not None)
        passed, total = passed + p, total + t
        print("\n".join(lines) + "\n")
    print(f"{passed}/{total} checks PASS (tolerances in this script's docstring; definitions in docs/sweeps.md, "
          f"'Agreement with SGLang's bench_serving')")
    from benchutil import verdict  # bench/ is on sys.path (the script's own folder)

    return 0 if verdict("kimitui agrees with bench_serving", f"{passed}/{total} checks within tolerance",
                        "every check", passed == total) else 1


if __name__ == "__main__":
    sys.exit(main())
