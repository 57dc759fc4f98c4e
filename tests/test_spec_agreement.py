"""Tokens counted from usage when chunks carry several: kimitui and SGLang's own bench_serving, side by side,
against the simulated DFLASH server (several tokens per stream chunk, per-request spec details asked for).

bench_serving (0.5.23 ``sglang/benchmark/serving.py``, the ``sglang-oai-chat`` backend) takes its output length
from ``usage.completion_tokens`` and TPOT as (latency - TTFT) / (output_len - 1); kimitui must count the same
tokens (never the chunks) and so agree on both.  Runs from the engine's venv (tests/support/real_engine.py),
like tests/test_real_engine.py: skipped without it, required in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kimitui.loadgen.prompts import prompt_source
from tests.support import dev_venv
from tests.support import real_engine
from tests.support.simserver import start_sim

pytestmark = pytest.mark.timeout(300)
REQUESTS, TOKENS = 8, 160


def _engine_python() -> Path:
    return dev_venv.python_or_skip(real_engine.engine_python(), real_engine.engine_venv(), "engine",
                                   "real_engine.py", "KIMITUI_REQUIRE_ENGINE")


def _bench_serving(py: Path, url: str, prompts: Path, out: Path) -> dict:
    argv = [str(py), str(real_engine.REPO_ROOT / "tests" / "support" / "sgl_bench_shim.py"), "--backend", "sglang-oai-chat",
            "--base-url", url, "--model", "/root/models/Kimi-K2.6", "--tokenizer", str(real_engine.TOKENIZER_DIR),
            "--dataset-name", "custom", "--dataset-path", str(prompts), "--sharegpt-output-len", str(TOKENS),
            "--num-prompts", str(REQUESTS), "--max-concurrency", "1", "--warmup-requests", "0",
            "--output-file", str(out), "--disable-tqdm",
            "--extra-request-body", json.dumps({"stream_options": {"include_usage": True, "continuous_usage_stats": True}})]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240, cwd=out.parent)
    assert res.returncode == 0 and out.exists(), (res.stdout + res.stderr)[-3000:]
    return json.loads(out.read_text().splitlines()[-1])


def test_multi_token_chunks_are_counted_from_usage_as_bench_serving_counts_them(tmp_path: Path) -> None:
    py = _engine_python()
    make = prompt_source("seed", 0)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"conversations": [{"from": "human", "value": make(i)},
                                                             {"from": "gpt", "value": "ok"}]}) + "\n"
                               for i in range(REQUESTS)))
    with start_sim("ep8-dflash", time_scale=10) as sim:
        proc = subprocess.run([sys.executable, "-m", "kimitui", "sweep", "--url", sim.url, "--json", "--no-progress",
                               "--levels", "1", "--requests", str(REQUESTS), "--max-tokens", str(TOKENS),
                               "--prompts", "seed", "--mode", "sustained"], capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stderr[-2000:]
        k = json.loads(proc.stdout)["levels"][0]
        b = _bench_serving(py, sim.url, prompts, tmp_path / "bs.jsonl")
    # same tokens: from usage, though a chunk carries up to 16 of them
    assert k["output_tokens"] == b["total_output_tokens"] == REQUESTS * TOKENS
    assert k["spec_requests"] == REQUESTS and 3.0 < k["spec_accept_len_level"] < 9.0
    # the same per-token time within 15 % (the simulator's pace; the box's noise is the rest)
    k_tpot, b_tpot = k["tpot"]["p50"] * 1000, b["median_tpot_ms"]
    assert abs(k_tpot / b_tpot - 1) <= 0.15, (k_tpot, b_tpot)
    k_tput, b_tput = k["agg_tok_s"], b["output_throughput"]
    assert abs(k_tput / b_tput - 1) <= 0.15, (k_tput, b_tput)
