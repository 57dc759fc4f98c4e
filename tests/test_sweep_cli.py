"""``kimitui sweep`` headless: tables, --json, --out recording, --like, argument errors."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.commands.sweep import print_tables
from kimitui.events import ClientSummary, LevelResult, SweepResult, SweepStarted
from kimitui.recording import read_recording
from tests.support.strict_server import StrictServer
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
    assert summary["recording"] == str(out) and out.read_bytes()[:1] == b"{"  # the path named, as named

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
    assert rc == 1  # no stop rule tripped, but a level in which every request failed measured nothing
    out = capsys.readouterr()
    assert "C=1  FAILED  ok 0/2" in out.out and "failures: http_status 2" in out.out
    assert "failed: all 2 requests failed (http_status 2); not a peak" in out.out
    assert "first http_status: HTTP 500: injected" in out.out and "no valid level, no peak" in out.out
    assert "every request at C=1 failed: HTTP 500: injected" in out.err


def test_a_wrong_model_shows_the_servers_message_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with StrictServer() as srv:
        rc = main(["sweep", "--url", srv.url, "--model", "kimi-k2", "--levels", "1,4", "--requests", "3",
                   "--no-progress"])
    assert rc == 1
    out = capsys.readouterr()
    assert "first http_status: HTTP 404: The model `kimi-k2` does not exist." in out.out
    assert "every request at C=1 failed: HTTP 404: The model `kimi-k2` does not exist. (is --model right?)" in out.err
    with StrictServer() as srv:
        rc = main(["sweep", "--url", srv.url, "--model", "kimi-k2", "--levels", "1", "--requests", "2", "--json",
                   "--no-progress"])
    assert rc == 1
    [lv] = json.loads(capsys.readouterr().out)["levels"]
    assert lv["status"] == "failed" and lv["valid"] is False
    assert lv["errors"] == {"http_status": "HTTP 404: The model `kimi-k2` does not exist."}


def test_missing_flush_cache_and_server_info_are_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    with StrictServer() as srv:
        rc = main(["sweep", "--url", srv.url, "--levels", "1,2,3", "--requests", "2", "--max-tokens", "4",
                   "--flush-cache", "--no-progress"])
        flushes = srv.hits["/flush_cache"]
    assert rc == 0 and flushes == 1
    err = capsys.readouterr().err
    assert err.count("this server has no /flush_cache: levels run with the prefix cache warm") == 1
    assert err.count("has no /server_info (nor /get_server_info)") == 1


def test_levels_show_client_health_and_status_in_tables_and_json(minimal_server,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["sweep", "--url", minimal_server.url, "--model", "minimal", "--levels", "2", "--requests", "2",
               "--max-tokens", "5", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "client: loop lag max " in text and "CPU max " in text and "dispatch p99 max " in text
    assert "peak " in text and " tok/s at C=2" in text
    rc = main(["sweep", "--url", minimal_server.url, "--model", "minimal", "--levels", "2", "--requests", "2",
               "--max-tokens", "40", "--extra-body", '{"tick_ms": 5}', "--json", "--no-progress"])
    [lv] = json.loads(capsys.readouterr().out)["levels"]
    assert lv["status"] == "ok" and lv["valid"] is True and lv["status_reason"] == ""
    assert lv["client"]["loop_lag_max_ms"] is not None and lv["client"]["cpu_max_pct"] is not None
    assert "client_distorted" in lv


def test_the_table_marks_aborted_and_distorted_levels_and_never_peaks_them(capsys: pytest.CaptureFixture[str]) -> None:
    ok = LevelResult(sweep_id="s", concurrency=8, requests=8, ok=8, agg_tok_s=400.0, status="ok")
    aborted = LevelResult(sweep_id="s", concurrency=64, requests=64, failed=64, failures={"aborted": 64},
                          status="aborted", status_reason="all 64 requests aborted (aborted by operator)",
                          client=ClientSummary(samples=3, loop_lag_max_ms=547.0, loop_lag_p50_ms=3.0, cpu_max_pct=97.0),
                          client_distorted="client saturated: event-loop lag up to 547 ms (limit 50 ms)")
    old = LevelResult.model_validate({"sweep_id": "s", "concurrency": 256, "requests": 512, "failed": 512,
                                      "failures": {"http_status": 512}, "agg_tok_s": 586.0})  # recorded before status
    print_tables([ok, aborted, old], SweepResult(sweep_id="s", outcome="aborted", peak_tok_s=400.0), None)
    text = capsys.readouterr().out
    assert "C=64  ABORTED  ok 0/64" in text
    assert "aborted: all 64 requests aborted (aborted by operator); not a peak" in text
    assert "C=256  FAILED" in text and "failed: all 512 requests failed (http_status 512); not a peak" in text
    assert "client: loop lag max 547.0 ms (p50 3.0), CPU max 97 %" in text
    assert "client distorted: client saturated: event-loop lag up to 547 ms" in text
    assert "peak 400 tok/s at C=8 (seed-comparable aggregate)" in text


def test_the_peak_is_the_aggregate_the_cockpit_and_the_report_name_and_steady_is_labelled(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: the cockpit's peak was the aggregate (1,566 tok/s), ``kimitui sweep`` printed the steady rate
    (1,570); the steady level is not the peak here, its aggregate is lower."""
    a = LevelResult(sweep_id="s", concurrency=192, requests=192, ok=192, agg_tok_s=1530.0, steady_tok_s=1590.0)
    b = LevelResult(sweep_id="s", concurrency=256, requests=256, ok=256, agg_tok_s=1566.0, steady_tok_s=1570.0)
    print_tables([a, b], SweepResult(sweep_id="s", outcome="completed", peak_tok_s=1566.0), None)
    text = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert "peak 1,566 tok/s at C=256 (seed-comparable aggregate; steady 1,570)" in text


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
