"""``kimitui profiles ...`` through the real CLI entry point."""

from __future__ import annotations

import shlex

import pytest

from kimitui.cli import main
from kimitui.profiles import load_profile, render_command, render_unit
from tests.support.profiles import BASE, ProfileDirs, profile_env, write_profile  # noqa: F401


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``profiles list`` remembers profile keys: in this test's own state directory."""
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_seed_profiles(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "profiles", "list")
    assert code == 0 and err == ""
    for name in ("tp8", "ep8-tuned", "ep8-v2", "ep8-eplb", "ep8-cont16", "ep4", "ep8-cont4", "ep8-dense-tp1"):
        assert name in out
    assert "enable_eplb=true" in out  # a variant's own knob is shown


def test_list_reports_invalid_files(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_profile(profile_env.local, "broken", BASE + "tp_sise = 2\n")
    code, out, err = run(capsys, "profiles", "list")
    assert code == 2
    assert "ep8-tuned" in out
    assert f"{path}:3: tp_sise: unknown field" in err.replace("\n", "")


def test_show(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "profiles", "show", "ep8-v2")
    assert code == 0
    assert "num_continuous_decode_steps" in out and "ep8-v2.toml:4" in out and "ep8-tuned.toml:4" in out
    assert "has had no effect in SGLang since late 2024" in out
    assert "--enable-eplb" in out


def test_diff_warns_of_confound_and_offers_single_knob_profiles(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "profiles", "diff", "ep8-tuned", "ep8-v2")
    assert code == 0
    assert "enable_eplb: false -> true" in out and "num_continuous_decode_steps: 8 -> 16" in out
    assert "confounded: 2 knobs changed (enable_eplb, num_continuous_decode_steps)" in out
    assert "ep8-eplb (enable_eplb)" in out and "ep8-cont16" in out
    code, out, _ = run(capsys, "profiles", "diff", "ep8-tuned", "ep8-eplb")
    assert "confounded" not in out and "enable_eplb: false -> true" in out


def test_render_cmd_and_unit_are_exact(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    p = load_profile("ep8-tuned")
    code, out, _ = run(capsys, "profiles", "render", "ep8-tuned", "--as", "cmd")
    assert code == 0 and out == render_command(p) + "\n"
    assert shlex.split(out)[:3] == ["python3", "-m", "sglang.launch_server"]
    code, out, _ = run(capsys, "profiles", "render", "ep8-tuned", "--as", "unit")
    assert code == 0 and out == render_unit(p)
    assert "[Unit]" in out and "[Service]" in out  # no rich markup eaten
    code, out, _ = run(capsys, "profiles", "render", "ep8-tuned", "--simulated")
    assert shlex.split(out)[2:5] == ["kimitui", "sim", "serve"]


def test_lint_exit_codes(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "profiles", "lint", "ep8-tuned")
    assert code == 0 and "warning" in out and "num_continuous_decode_steps" in out and err == ""
    write_profile(profile_env.local, "bad-ep", BASE + "ep_size = 3\nenable_eplb = true\nextra_args = [\"--enable-ep-moe\"]\n")
    code, out, err = run(capsys, "profiles", "lint", "bad-ep")
    assert code == 1
    flat = err.replace("\n", "")
    assert "profiles/bad-ep.toml:3: error: ep_size" in flat
    assert "profiles/bad-ep.toml:5: error: extra_args[0]: --enable-ep-moe was removed" in flat
    code, _, _ = run(capsys, "profiles", "lint")
    assert code == 1  # linting everything includes the bad one


def test_extra_dir_option_and_bad_profile_errors(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    extra = profile_env.tmp / "extra"
    path = write_profile(extra, "mine", BASE + 'served_model_name = "ok"\n[sim]\nfault = "nope"\n')
    code, out, err = run(capsys, "--profiles", str(extra), "profiles", "show", "mine")
    assert code == 2 and out == ""
    assert f"{path}:5: sim.fault:" in err.replace("\n", "")
    assert "Traceback" not in err
    code, _, err = run(capsys, "profiles", "render", "nonexistent")
    assert code == 2 and "no profile named 'nonexistent'" in err
    write_profile(extra, "mine", BASE)
    code, out, _ = run(capsys, "--profiles", str(extra), "profiles", "render", "mine")
    assert code == 0 and "--model-path /models/m" in out


def test_a_broken_extends_never_breaks_the_other_profiles(profile_env: ProfileDirs,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    long = write_profile(profile_env.local, "long", BASE + f'extends = "{"a" * 300}"\n')
    esc = write_profile(profile_env.local, "esc", BASE + 'extends = "../../../../etc/hostname"\n')
    code, out, err = run(capsys, "profiles", "list")
    assert code == 2 and "ep8-tuned" in out and "Traceback" not in err
    flat = err.replace("\n", "")
    assert f"{long}:3: extends: invalid profile name" in flat and f"{esc}:3: extends: names a profile" in flat
    code, out, err = run(capsys, "profiles", "show", "ep8-tuned")
    assert code == 0 and "ep8-tuned" in out
    code, out, err = run(capsys, "profiles", "lint")
    assert "Traceback" not in out + err and f"{long}:3" in (out + err).replace("\n", "") and "ok tp8" in out


def test_diff_names_the_drafter_as_one_knob_family(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    """``profiles diff ep8-tuned ep8-dflash``: three knobs, one family, no confound (the algorithm, draft model and
    block size resolve together in 0.5.23 arg_groups/speculative_hook.py _handle_dflash)."""
    code, out, err = run(capsys, "profiles", "diff", "ep8-tuned", "ep8-dflash")
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "ep8-tuned -> ep8-dflash",
        "  speculative_algorithm: (default) -> DFLASH",
        "  speculative_draft_model_path: (default) -> /root/models/Kimi-K2.6-DFlash",
        "  speculative_dflash_block_size: (default) -> 16",
        "one knob family changed: speculative decoding (speculative_algorithm, speculative_draft_model_path, "
        "speculative_dflash_block_size)",
    ]
    code, out, _ = run(capsys, "profiles", "diff", "ep8-tuned", "ep8-eplb")
    assert "confounded" not in out and "(not a confound)" in out and "expert_balancedness_report_mode" in out


def test_render_the_drafter_as_a_unit_with_0523_flags(profile_env: ProfileDirs, capsys: pytest.CaptureFixture[str]) -> None:
    """``profiles render ep8-dflash --as unit``: 0.5.23's flags (arg_groups/fields/spec.py
    --speculative-dflash-block-size; fields/observability.py --tokenizer-metrics-allowed-custom-labels, a List[str]
    that arg_groups/arg_utils.py parses with nargs="+": the labels follow the flag as separate words)."""
    p = load_profile("ep8-dflash")
    code, out, _ = run(capsys, "profiles", "render", "ep8-dflash", "--as", "unit")
    assert code == 0 and out == render_unit(p)
    [exec_start] = [ln for ln in out.splitlines() if ln.startswith("ExecStart=")]
    words = shlex.split(exec_start.removeprefix("ExecStart="))
    at = words.index("--speculative-algorithm")
    assert words[at:at + 6] == ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                                "/root/models/Kimi-K2.6-DFlash", "--speculative-dflash-block-size", "16"]
    at = words.index("--tokenizer-metrics-allowed-custom-labels")
    assert words[at + 1:at + 3] == ["kimitui_sweep", "kimitui_level"] and words[at + 3].startswith("--")
    assert "--speculative-num-steps" not in words  # DFLASH forces 1 itself
    code, out, _ = run(capsys, "profiles", "render", "ep8-dflash", "--as", "cmd")
    assert code == 0 and shlex.split(out) == shlex.split(render_command(p))
    code, out, _ = run(capsys, "profiles", "render", "ep8-eagle3", "--as", "cmd")
    words = shlex.split(out)
    at = words.index("--speculative-num-steps")
    assert code == 0 and words[at:at + 6] == ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                                              "--speculative-num-draft-tokens", "4"]
