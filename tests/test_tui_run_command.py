"""``kimitui [--host NAME] [--record PATH | --no-record]``: options, and a bad config is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimitui.cli import build_parser, main
from kimitui.live import LiveController


def test_run_is_the_default_command_with_its_options():
    parser = build_parser()
    args = parser.parse_args(["run", "--host", "gpu-host.example", "--no-record"])
    assert (args.host, args.no_record, args.record) == (["gpu-host.example"], True, None)
    fleet = parser.parse_args(["run", "--host", "a", "--host", "b"])  # several: a fleet (docs/fleet.md)
    assert fleet.host == ["a", "b"]
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


@pytest.mark.parametrize("argv", [["--sim-port", "30011"], ["run", "--sim-port", "30011"], ["--sim-port=30011", "run"],
                                  ["--config", "c.toml", "--sim-port", "30011", "--no-record"]])
def test_sim_port_is_a_top_level_and_a_run_option(argv: list[str], tmp_path: Path, monkeypatch, capsys) -> None:
    """Every spelling reaches the cockpit's controller (the UI itself is not started here)."""
    import kimitui.tui.app as app

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text("")
    seen: list[LiveController] = []

    def run_app(controller: LiveController, **_: object) -> int:
        seen.append(controller)
        return 0

    monkeypatch.setattr(app, "run_app", run_app)
    assert main(argv) == 0
    assert seen[0].sim_port == 30011


@pytest.mark.parametrize("value", ["0", "65536", "high"])
def test_a_bad_sim_port_is_one_clear_line(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--sim-port", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--sim-port" in err and "is not a port number (1-65535)" in err and "Traceback" not in err


def test_the_config_sim_port_is_used_and_the_flag_wins(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg = tmp_path / "config.toml"
    cfg.write_text("[sim]\nport = 30011\n")
    assert LiveController(config_path=str(cfg), record=False).sim_port == 30011
    assert LiveController(config_path=str(cfg), record=False, sim_port=30012).sim_port == 30012
