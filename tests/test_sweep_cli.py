"""``kimitui sweep`` headless: tables, --json, --out recording, --like, argument errors."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.events import SweepStarted
from kimitui.recording import read_recording
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(60)


def test_json_summary_recording_and_like(minimal_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rec.jsonl"
    rc = main(["sweep", "--url", minimal_server.url, "--levels", "1,2", "--max-tokens", "8", "--requests", "3",
               "--json", "--out", str(out), "--no-progress"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["outcome"] == "completed"
    assert summary["spec"]["model"] == "minimal"  # asked /v1/models
    assert [lv["concurrency"] for lv in summary["levels"]] == [1, 2]
    assert all(lv["ok"] == 3 and lv["output_tokens"] == 24 for lv in summary["levels"])
    assert summary["recording"].endswith("rec.jsonl.gz")

    rec = read_recording(summary["recording"])
    assert rec.skipped == [] and rec.header.hosts == ["127.0.0.1"]
    kinds = [e.kind for e in rec.events]
    # the minimal server has no /server_info: said once, and the sweep goes on
    assert kinds[0] == "error" and "/server_info unavailable" in rec.events[0].message
    assert kinds[1] == "sweep_started" and kinds[-1] == "sweep_result"
    assert kinds.count("level_result") == 2 and kinds.count("request_result") == 6

    # --like repeats that workload; an explicit option still wins
    rc = main(["sweep", "--like", summary["recording"], "--levels", "4", "--json", "--no-progress"])
    assert rc == 0
    again = json.loads(capsys.readouterr().out)
    recorded = next(e for e in rec.events if isinstance(e, SweepStarted)).spec
    assert again["spec"] == recorded.model_copy(update={"levels": [4]}).model_dump(mode="json")
    assert again["levels"][0]["requests"] == 3 and again["levels"][0]["output_tokens"] == 24


def test_tables_name_each_level_and_the_outcome(minimal_server, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["sweep", "--url", minimal_server.url, "--model", "minimal", "--levels", "2", "--mode", "burst",
               "--max-tokens", "5", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "C=2  ok 2/2" in text and "TTFT ms" in text and "decode tok/s" in text
    assert "completed" in text and minimal_server.state.requests == 2


def test_failures_are_listed_under_the_table(minimal_server, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["sweep", "--url", minimal_server.url, "--model", "minimal", "--levels", "1", "--requests", "2",
               "--extra-body", '{"status": 500}', "--max-error-rate", "1", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "ok 0/2" in text and "failures: http_status 2" in text


def test_bad_arguments_exit_2_with_a_clear_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--url", "http://127.0.0.1:1", "--levels", "1,x"])
    assert exc.value.code == 2 and "levels '1,x'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sweep", "--url", "http://127.0.0.1:1", "--extra-body", "[1]"])
    assert "must be a JSON object" in capsys.readouterr().err
    assert main(["sweep", "--url", "http://127.0.0.1:1", "--prompts", "random:x"]) == 2
    assert "random:N with N an integer" in capsys.readouterr().err
    assert main(["sweep", "--url", "http://127.0.0.1:1", "--mode", "rate"]) == 2
    assert "--rate RPS" in capsys.readouterr().err
    assert main(["sweep", "--levels", "1"]) == 2
    assert "--url is required" in capsys.readouterr().err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["sweep", "--url", f"http://127.0.0.1:{port}", "--levels", "1"]) == 2
    assert "pass --model" in capsys.readouterr().err
    assert main(["sweep", "--like", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
