"""The autopilot never plans, prints or saves a secret: a profile that differs from the start only by
``[env] HF_TOKEN`` is no candidate, and a tune's state, report and files are the owner's alone (0600 in 0700)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.events import SweepSpec
from kimitui.profiles import load_profile, scan_profiles
from kimitui.profiles.loader import user_dir
from kimitui.tune import candidates as cands
from kimitui.tune import report as tune_report
from kimitui.tune import state as store
from kimitui.tune.state import TunePlan
from kimitui.tune.tuner import new_state
from kimitui.tune.variants import materialize, step_settings

TOKEN = "hf_abcdefSECRETtoken"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        (tmp_path / var).mkdir()
        monkeypatch.setenv(var, str(tmp_path / var))
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    monkeypatch.delenv("KIMITUI_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    user_dir().mkdir(parents=True)
    (user_dir() / "ep8-token.toml").write_text(
        f'name = "ep8-token"\nextends = "ep8-tuned"\nenv = {{ HF_TOKEN = "{TOKEN}" }}\n')
    (user_dir() / "ep8-eplb-token.toml").write_text(
        f'name = "ep8-eplb-token"\nextends = "ep8-tuned"\nenable_eplb = true\nenv = {{ HF_TOKEN = "{TOKEN}" }}\n')
    (user_dir() / "ep8-nccl.toml").write_text(
        'name = "ep8-nccl"\nextends = "ep8-tuned"\nenv = { NCCL_P2P_DISABLE = "1" }\n')
    return tmp_path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_profile_differing_only_by_a_token_is_no_candidate_and_the_token_is_never_saved(home: Path) -> None:
    """The reported defect: ``ep8-token`` became a candidate, its token printed and saved in the state and report."""
    start = load_profile("ep8-tuned")
    good, _ = scan_profiles()
    found, skipped = cands.default_candidates(start, good)
    assert not any(c.source == "profile ep8-token" for c in found)
    assert "ep8-token: differs only by env.HF_TOKEN, a secret: not a knob" in skipped
    assert any(s.startswith("ep8-nccl: changes env.NCCL_P2P_DISABLE: an [env] variable") for s in skipped)
    eplb = next(c for c in found if c.family == "enable_eplb")
    assert all(not k.startswith("env.") for c in found for k in c.settings)
    assert TOKEN not in repr(found) + repr(skipped)

    plan = TunePlan(start="ep8-tuned", candidates=found, skipped=skipped,
                    workload=SweepSpec(url="", model="", levels=[1, 64]))
    tune_id, where = store.new_tune_dir("sim")
    st = new_state(tune_id, "sim", plan)
    store.save(st, where)
    st.best = "ep8-eplb-token"
    st.best_settings = step_settings({}, eplb)
    tune_report.write(st, where, [])
    files = sorted(p for p in where.iterdir() if p.is_file())
    assert {p.name for p in files} >= {"state.json", "report.md", "report.json", "winner.toml"}
    for p in files:
        assert _mode(p) == 0o600, p
        if p.name != "winner.toml":  # the winner is the operator's own profile file, token and all
            assert TOKEN not in p.read_text(), p
    assert _mode(where) == 0o700 and _mode(where.parent) == 0o700


def test_a_candidate_from_a_profile_with_a_token_runs_that_profile_but_keeps_no_token(home: Path) -> None:
    start = load_profile("ep8-tuned")
    cand, why = cands.from_profile(start, load_profile("ep8-eplb-token"))
    assert cand is not None and why is None and cand.settings == {"enable_eplb": True}
    assert materialize(start, step_settings({}, cand), cand.label, [], existing="ep8-eplb-token") == "ep8-eplb-token"
    eplb, _ = cands.from_profile(start, load_profile("ep8-eplb"))  # its [env] heatmap interval is observability
    assert eplb is not None and "env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL" not in eplb.settings
    assert materialize(start, step_settings({}, eplb), eplb.label, [], existing="ep8-eplb") == "ep8-eplb"


@pytest.mark.parametrize("change", ["env.HF_TOKEN=" + TOKEN, "api_key=" + TOKEN, "env.NCCL_P2P_DISABLE=1"])
def test_the_command_line_cannot_plan_an_env_variable_or_a_secret(home: Path, change: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="never"):
        cands.parse_change(change)
    assert main(["tune", "--from", "ep8-tuned", "--change", change, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "never" in err and TOKEN not in err


def test_the_dry_run_never_prints_a_token(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--from", "ep8-tuned", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "ep8-token: differs only by env.HF_TOKEN" in out and TOKEN not in out


def test_profiles_show_prints_a_token_as_stars(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (user_dir() / "ep8-keyed.toml").write_text(
        f'name = "ep8-keyed"\nextends = "ep8-token"\nextra_args = ["--api-key", "{TOKEN}"]\n')
    assert main(["profiles", "show", "ep8-keyed"]) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out and "HF_TOKEN=***" in out and "--api-key ***" in out.replace("\\\n", " ")
