"""``kimitui [--host NAME] [--record PATH | --no-record]``: options, and a bad config is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.cli import build_parser, main


def test_run_is_the_default_command_with_its_options():
    parser = build_parser()
    args = parser.parse_args(["run", "--host", "gpu-host.example", "--no-record"])
    assert (args.host, args.no_record, args.record) == ("gpu-host.example", True, None)
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--record", "x.jsonl", "--no-record"])


def test_bad_config_is_reported_without_a_traceback(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg = tmp_path / "config.toml"
    cfg.write_text("[hosts.ct200]\nport = 99999999\n")
    assert main(["--config", str(cfg), "--no-record"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kimitui: cannot start the cockpit: ") and "config.toml" in err
    assert "Traceback" not in err
