"""What the real SGLang 0.5.18 server said (../shared/data/sglang-0.5.18-cpu), read back for tests.

Each `*.txt` there is a captured `curl -i` exchange: a `$ curl ...` line, then the HTTP status line,
the headers, a blank line and the body. A few files hold no HTTP answer: the raw SSE stream
(`chat_stream_raw.txt`, the bytes as they came) and calls that killed the server (`curl: (52) Empty
reply from server`); for those `read_http` gives status 0, no headers, and the rest as the body.
The folder is test data the suite must read; a test skips (with the path in its reason) only where
it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
REAL_OUTPUT_DIR = REPO_ROOT.parent / "shared" / "data" / "sglang-0.5.18-cpu"
MODELS = ("tiny-llama", "tiny-qwen3moe")
"""The two model folders: a dense Llama and a Qwen3-MoE (4 experts, top-2)."""


def real_output_dir() -> Path:
    """The real-output folder; skips the calling test (module-level too) where it is absent."""
    if not (REAL_OUTPUT_DIR / "README.md").is_file():
        pytest.skip(f"no real SGLang output at {REAL_OUTPUT_DIR} (the captured 0.5.18 server's files)",
                    allow_module_level=True)
    return REAL_OUTPUT_DIR


def read_http(path: Path) -> tuple[int, dict[str, str], str]:
    """(status, headers with lower-case names, body) of one captured exchange.

    The body is cut to `content-length` where the server sent one (the capture added a newline
    after it); a chunked body (/metrics) is kept as curl wrote it, less that added newline.
    """
    raw = path.read_bytes()
    first_nl = raw.find(b"\n")
    rest = raw[first_nl + 1:] if raw.startswith(b"$ ") and first_nl >= 0 else raw
    if not rest.startswith(b"HTTP/"):
        return 0, {}, rest.decode("utf-8")
    head, sep, body = rest.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError(f"{path}: an HTTP status line but no end of headers")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length")
    if length is not None:
        body = body[: int(length)]
    elif body.endswith(b"\n\n"):
        body = body[:-1]
    return status, headers, body.decode("utf-8")


def metric_families(text: str) -> dict[str, tuple[str, frozenset[str], str]]:
    """Prometheus text as family name -> (type, label names, HELP); ``le``/``quantile`` are the type's own."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, tuple[str, frozenset[str], str]] = {}
    for family in text_string_to_metric_families(text):
        labels = {label for sample in family.samples for label in sample.labels}
        labels -= {"le"} if family.type == "histogram" else {"quantile"} if family.type == "summary" else set()
        out[family.name] = (family.type, frozenset(labels), family.documentation)
    return out
