"""Secrets in the server's own log lines never get past the parser (issue 29).

SGLang logs ``server_args=ServerArgs(... api_key='…', admin_api_key='…', ssl_keyfile_password='…')`` at
start; kimitui recorded that line verbatim and showed it in the cockpit's log.  The line here is the real
0.5.18 server's (``/work/shared/data/sglang-0.5.18-cpu/logs/tiny-llama.log``, ~15 KB) with values put where
it said ``None``.  The log follower turns it into
an event whose text and fields say ``***``; a recording of it holds no secret; a command line's ``--api-key
VALUE`` / ``--api-key=VALUE`` goes the same way.  Lines that name no key, token, secret or password (and
decode, prefill, EPLB lines) never reach the redaction's regex.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.events import LogLine
from kimitui.host.local import LocalHost
from kimitui.recording import write_recording
from kimitui.session import Session
from kimitui.sglang.log import secrets
from kimitui.sglang.log import parse_line, to_event
from kimitui.telemetry.logs import LogFollower
from tests.support.logsamples import realistic_mix
from tests.support.telemetry import Collector

LOG = Path("/work/shared/data/sglang-0.5.18-cpu/logs/tiny-llama.log")
needs_data = pytest.mark.skipif(not LOG.exists(), reason=f"{LOG} (the real server's log) is not here")
SECRETS = {"api_key": "sk-live-4f9a1c", "admin_api_key": "adm-77b2e0", "ssl_keyfile_password": "pem-pass-31d"}


def _real_line() -> str:
    return next(line for line in LOG.read_text().splitlines() if "server_args=ServerArgs(" in line)


def _with_secrets() -> str:
    line = _real_line()
    assert line.count("api_key=None") == 2 and "ssl_keyfile_password=None" in line  # api_key and admin_api_key
    for name, value in SECRETS.items():
        line = line.replace(f" {name}=None,", f" {name}='{value}',", 1)
    assert all(v in line for v in SECRETS.values())
    return line


@needs_data
def test_the_real_server_args_line_keeps_only_stars() -> None:
    ev = to_event(_with_secrets(), host="h", source="server.log")
    assert not any(v in ev.raw for v in SECRETS.values())
    assert all(f" {name}='***'," in ev.raw for name in SECRETS)
    args = ev.fields["args"]
    assert ev.line_kind == "startup" and ev.fields["step"] == "args"
    assert {name: args[name] for name in SECRETS} == {name: "***" for name in SECRETS}
    assert args["model_path"] == "models/tiny-llama" and args["ssl_keyfile"] is None  # a path, not a secret
    unset = _real_line()
    assert to_event(unset, host="h", source="s").raw == unset  # api_key=None: nothing set, nothing changed
    assert parse_line(_with_secrets()).fields["args"]["api_key"] == "***"  # the launcher's readiness parse too


@pytest.mark.parametrize("line, shown", [
    ("+ python3 -m sglang.launch_server --model-path m --api-key sk-1 --port 30000",
     "+ python3 -m sglang.launch_server --model-path m --api-key *** --port 30000"),
    ("[2026-05-28 10:00:00] Command: sglang serve --api-key=sk-1 --tp-size 8",
     "[2026-05-28 10:00:00] Command: sglang serve --api-key=*** --tp-size 8"),
    ("launching ['python', '-m', 'sglang.launch_server', '--admin-api-key', 'adm-2', '--tp', '8']",
     "launching ['python', '-m', 'sglang.launch_server', '--admin-api-key', '***', '--tp', '8']"),
    ("ERROR: bad args: --hf-token hf_abc --max-total-tokens 4096",
     "ERROR: bad args: --hf-token *** --max-total-tokens 4096"),
    ("env HF_TOKEN=hf_abc PGPASSWORD=pw NCCL_P2P_DISABLE=1", "env HF_TOKEN=*** PGPASSWORD=*** NCCL_P2P_DISABLE=1"),
    ('INFO:     127.0.0.1:4242 - "GET /v1/models?api_key=sk-9&x=1 HTTP/1.1" 200 OK',
     'INFO:     127.0.0.1:4242 - "GET /v1/models?api_key=***&x=1 HTTP/1.1" 200 OK'),
])
def test_a_logged_command_line_or_assignment_keeps_only_stars(line: str, shown: str) -> None:
    assert to_event(line, host="h", source="s").raw == shown


@needs_data
def test_lines_naming_no_secret_never_reach_the_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log path stays cheap: only a line with ``=``/``--`` and key/token/secret/passw in it is redacted."""
    calls: list[str] = []
    real = secrets.redact_line

    def counted(text: str) -> str:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(secrets, "redact_line", counted)
    hinted = ("key", "token", "secret", "passw", "KEY", "TOKEN", "SECRET", "PASSW")
    plain = [line for line in realistic_mix() if not any(h in line for h in hinted)]
    busy = [line for line in realistic_mix() if parse_line(line).line_kind in ("decode", "prefill", "eplb")]
    assert len(plain) > 100 and len(busy) > 100 and any("token" in line for line in busy)
    calls.clear()
    for line in [*plain, *busy]:
        to_event(line, host="h", source="s")
    assert calls == []
    to_event(_with_secrets(), host="h", source="s")
    assert len(calls) == 1


@needs_data
async def test_the_follower_and_a_recording_of_it_hold_no_secret(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(_with_secrets() + "\n" + "+ exec python -m sglang.launch_server --api-key sk-live-4f9a1c\n")
    session = Session()
    seen = Collector(session)
    follower = LogFollower(LocalHost("sim"), session, path=str(log), backlog=10)
    await follower.start()
    try:
        await seen.wait_for(lambda ev: len(seen.of("log_line")) >= 2)
    finally:
        await follower.stop()
    lines = [e for e in seen.of("log_line") if isinstance(e, LogLine)]
    assert len(lines) == 2 and lines[0].fields["args"]["api_key"] == "***"
    assert lines[1].raw.endswith("--api-key ***")
    path = write_recording(tmp_path / "rec.jsonl", lines)
    text = Path(path).read_text()
    assert "***" in text and not any(v in text for v in SECRETS.values())
