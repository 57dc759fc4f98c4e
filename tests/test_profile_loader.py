"""Profiles from files: inheritance, search path, and errors that name file, line and field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kimitui.profiles import (
    Profile,
    ProfileError,
    list_profiles,
    load_profile,
    profile_dirs,
    scan_profiles,
    shipped_dir,
)
from kimitui.profiles.loader import locate_field
from tests.support.profiles import BASE, ProfileDirs, profile_env, write_profile  # noqa: F401

SEED_PROFILES = {"tp8", "ep8", "ep8-tuned", "ep8-v2", "ep4", "ep8-cont4", "ep8-dense-tp1", "ep8-eplb", "ep8-cont16"}


# --------------------------------------------------------------------------- inheritance


def test_child_wins_and_tables_merge_key_by_key(profile_env: ProfileDirs) -> None:
    d = profile_env.local
    write_profile(d, "base", BASE + 'ep_size = 8\nmax_running_requests = 128\n[env]\nA = "1"\nB = "2"\n[sim]\nseed = 3\ntime_scale = 5\n')
    write_profile(d, "child", 'extends = "base"\nmax_running_requests = 256\n[env]\nB = "20"\n[sim]\nseed = 4\n')
    p = load_profile("child")
    assert p.name == "child" and p.extends == "base"
    assert (p.tp_size, p.ep_size, p.max_running_requests) == (8, 8, 256)
    assert p.env == {"A": "1", "B": "20"}
    assert (p.sim.seed, p.sim.time_scale) == (4, 5.0)
    assert p.source_path == d / "child.toml"


def test_description_and_name_are_not_inherited(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "base", BASE + 'description = "the base"\n')
    write_profile(profile_env.local, "child", 'extends = "base"\n')
    p = load_profile("child")
    assert p.name == "child" and p.description == ""


def test_lists_are_replaced_not_appended(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "base", BASE + 'extra_args = ["--a", "--b"]\n')
    write_profile(profile_env.local, "child", 'extends = "base"\nextra_args = ["--c"]\n')
    assert load_profile("child").extra_args == ["--c"]


def test_multi_level_inheritance(profile_env: ProfileDirs) -> None:
    d = profile_env.local
    write_profile(d, "a", BASE + "ep_size = 2\ncuda_graph_max_bs = 64\nmax_running_requests = 64\n")
    write_profile(d, "b", 'extends = "a"\nep_size = 4\nmax_running_requests = 32\n')
    write_profile(d, "c", 'extends = "b"\nep_size = 8\n')
    p = load_profile("c")
    assert (p.tp_size, p.ep_size, p.max_running_requests, p.cuda_graph_max_bs) == (8, 8, 32, 64)
    where = locate_field(p, ["max_running_requests"])
    assert where == (d / "b.toml", 3)
    assert locate_field(p, ["cuda_graph_max_bs"]) == (d / "a.toml", 4)


def test_extends_cycle_is_an_error(profile_env: ProfileDirs) -> None:
    d = profile_env.local
    write_profile(d, "x", BASE + 'extends = "y"\n')
    write_profile(d, "y", 'extends = "z"\n')
    write_profile(d, "z", 'extends = "x"\n')
    with pytest.raises(ProfileError) as err:
        load_profile("x")
    assert "extends cycle: x -> y -> z -> x" in str(err.value)
    assert err.value.field == "extends" and err.value.path == d / "z.toml" and err.value.line == 1


def test_self_extension_is_a_cycle_when_nothing_to_shadow(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "solo", BASE + 'extends = "solo"\n')
    with pytest.raises(ProfileError) as err:
        load_profile("solo")
    assert err.value.field == "extends" and "no profile named 'solo'" in err.value.message


def test_a_profile_can_refine_a_shadowed_profile_of_the_same_name(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "ep8-tuned", 'extends = "ep8-tuned"\nmax_running_requests = 512\n')
    p = load_profile("ep8-tuned")
    assert p.source_path == profile_env.local / "ep8-tuned.toml"
    assert (p.max_running_requests, p.ep_size, p.num_continuous_decode_steps) == (512, 8, 8)


@pytest.mark.parametrize("value", ["../lib/parent.toml", "../../../../etc/hostname", "parent.toml", "/etc/hostname",
                                   "lib/parent", "lib\\\\parent", "a..b"])
def test_extends_names_a_profile_never_a_path(profile_env: ProfileDirs, value: str) -> None:
    """extends never leaves the profile search path (``../../../../etc/hostname`` was read)."""
    write_profile(profile_env.tmp / "lib", "parent", BASE + "ep_size = 4\n")
    child = write_profile(profile_env.local, "child", BASE + f"extends = {value!r}\n".replace("'", '"'))
    with pytest.raises(ProfileError) as err:
        load_profile("child")
    assert (err.value.path, err.value.line, err.value.field) == (child, 3, "extends")
    assert "names a profile, not a file" in err.value.message and "--profiles DIR" in err.value.message


def test_a_profile_in_another_folder_is_extended_through_the_search_path(profile_env: ProfileDirs) -> None:
    lib = profile_env.tmp / "lib"
    write_profile(lib, "parent", BASE + "ep_size = 4\n")
    child = write_profile(profile_env.tmp / "mine", "child", 'extends = "parent"\n')
    assert load_profile(str(child), [lib]).ep_size == 4


def test_a_300_character_extends_is_one_broken_profile(profile_env: ProfileDirs) -> None:
    """Was an OSError traceback (file name too long) that broke listing, show, lint and swap for all."""
    long = write_profile(profile_env.local, "long", BASE + f'extends = "{"a" * 300}"\n')
    write_profile(profile_env.local, "fine", BASE)
    good, bad = scan_profiles()
    assert "fine" in {p.name for p in good} and "ep8-tuned" in {p.name for p in good}
    [e] = bad
    assert (e.path, e.line, e.field) == (long, 3, "extends") and "at most 250 characters" in e.message
    assert load_profile("fine").name == "fine"
    with pytest.raises(ProfileError, match="invalid profile name"):
        load_profile("b" * 300)


def test_missing_parent_names_the_child_file(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "orphan", BASE + 'extends = "nowhere"\n')
    with pytest.raises(ProfileError) as err:
        load_profile("orphan")
    assert (err.value.path, err.value.line, err.value.field) == (profile_env.local / "orphan.toml", 3, "extends")
    assert "no profile named 'nowhere'" in str(err.value)


# --------------------------------------------------------------------------- errors


def test_unknown_knob_names_file_line_and_field(profile_env: ProfileDirs) -> None:
    path = write_profile(profile_env.local, "typo", BASE + "\nep_sise = 8\n")
    with pytest.raises(ProfileError) as err:
        load_profile("typo")
    e = err.value
    assert (e.path, e.line, e.field) == (path, 4, "ep_sise")
    assert str(e).startswith(f"{path}:4: ep_sise: unknown field")


def test_error_in_a_parent_points_at_the_parent(profile_env: ProfileDirs) -> None:
    parent = write_profile(profile_env.local, "parent", BASE + "[sim]\nseed = 1\nfault = \"meltdown\"\n")
    write_profile(profile_env.local, "kid", 'extends = "parent"\n')
    with pytest.raises(ProfileError) as err:
        load_profile("kid")
    assert (err.value.path, err.value.line, err.value.field) == (parent, 5, "sim.fault")
    assert "crash_load" in err.value.message


def test_wrong_type_and_range(profile_env: ProfileDirs) -> None:
    path = write_profile(profile_env.local, "bad", BASE + 'port = "http"\n')
    with pytest.raises(ProfileError) as err:
        load_profile("bad")
    assert (err.value.path, err.value.line, err.value.field) == (path, 3, "port")
    write_profile(profile_env.local, "bad2", BASE + "mem_fraction_static = 1.5\n")
    with pytest.raises(ProfileError) as err:
        load_profile("bad2")
    assert err.value.field == "mem_fraction_static" and err.value.line == 3


def test_dotted_and_inline_keys_are_located(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "dotted", BASE + "sim.time_scale = -1\n")
    with pytest.raises(ProfileError) as err:
        load_profile("dotted")
    assert (err.value.line, err.value.field) == (3, "sim.time_scale")
    write_profile(profile_env.local, "inline", BASE + "launcher = { kind = \"docker\" }\n")
    with pytest.raises(ProfileError) as err:
        load_profile("inline")
    assert (err.value.line, err.value.field) == (3, "launcher.kind")


def test_toml_syntax_error_carries_the_line(profile_env: ProfileDirs) -> None:
    path = write_profile(profile_env.local, "broken", BASE + "\nep_size = = 8\n")
    with pytest.raises(ProfileError) as err:
        load_profile("broken")
    assert (err.value.path, err.value.line) == (path, 4)
    assert "TOML syntax error" in str(err.value)


def test_missing_model_path(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "empty", "tp_size = 8\n")
    with pytest.raises(ProfileError) as err:
        load_profile("empty")
    assert err.value.field == "model_path" and "missing" in err.value.message


def test_name_must_match_file(profile_env: ProfileDirs) -> None:
    path = write_profile(profile_env.local, "one", 'name = "two"\n' + BASE)
    with pytest.raises(ProfileError) as err:
        load_profile("one")
    assert (err.value.path, err.value.line, err.value.field) == (path, 1, "name")


def test_unknown_profile_lists_where_it_looked(profile_env: ProfileDirs) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile("no-such-profile")
    assert str(profile_env.local) in str(err.value) and str(shipped_dir()) in str(err.value)


def test_missing_file_path(profile_env: ProfileDirs) -> None:
    with pytest.raises(ProfileError) as err:
        load_profile(str(profile_env.tmp / "absent.toml"))
    assert err.value.path == profile_env.tmp / "absent.toml" and "not found" in str(err.value)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('model_path = "/m\\nExecStartPre=/bin/sh"\n', "model_path"),
        ('model_path = "/m"\ndescription = "tab\\there"\n', "description"),
        ('model_path = "/m"\nserved_model_name = "k\\u001b[31m"\n', "served_model_name"),
        ('model_path = "/m"\nextra_args = ["--ok", "bad\\rvalue"]\n', "extra_args.1"),
        ('model_path = "/m"\n[env]\nNCCL_DEBUG = "INFO\\n"\n', "env.NCCL_DEBUG"),
        ('model_path = "/m"\n[env]\n"BAD NAME" = "x"\n', "env.BAD NAME.[key]"),
        ('model_path = "/m"\n[launcher]\nworkdir = "/srv\\u2028x"\n', "launcher.workdir"),
        ('model_path = "/m"\n[sim]\ngpu_name = "GPU\\u0085"\n', "sim.gpu_name"),
        ('model_path = """/m\nx"""\n', "model_path"),
    ],
)
def test_control_characters_and_newlines_are_rejected(profile_env: ProfileDirs, body: str, field: str) -> None:
    path = write_profile(profile_env.local, "ctl", body)
    with pytest.raises(ProfileError) as err:
        load_profile("ctl")
    assert err.value.field == field
    assert err.value.path == path and err.value.line is not None


# --------------------------------------------------------------------------- search path


def test_search_path_precedence(profile_env: ProfileDirs, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_dir = profile_env.tmp / "cli"
    env_a, env_b = profile_env.tmp / "envA", profile_env.tmp / "envB"
    monkeypatch.setenv("KIMITUI_PROFILES", os.pathsep.join([str(env_a), str(env_b)]))
    dirs = profile_dirs([cli_dir])
    assert dirs == [cli_dir, env_a, env_b, profile_env.local, profile_env.user, shipped_dir()]

    # tp8 exists in the shipped dir; each higher location shadows the lower ones in turn.
    assert load_profile("tp8").source_path == shipped_dir() / "tp8.toml"
    for port, d in ((30011, profile_env.user), (30012, profile_env.local), (30013, env_b), (30014, env_a), (30015, cli_dir)):
        write_profile(d, "tp8", BASE + f"port = {port}\n")
        p = load_profile("tp8", [cli_dir])
        assert (p.port, p.source_path) == (port, d / "tp8.toml")


def test_name_or_path_both_work(profile_env: ProfileDirs) -> None:
    path = write_profile(profile_env.tmp / "elsewhere", "mine", BASE)
    assert load_profile(str(path)).name == "mine"
    assert load_profile("mine", [profile_env.tmp / "elsewhere"]).source_path == path


def test_shipped_seed_profiles(profile_env: ProfileDirs) -> None:
    profiles = {p.name: p for p in list_profiles()}
    assert SEED_PROFILES <= set(profiles)
    for p in profiles.values():
        assert (p.model_path, p.port, p.mem_fraction_static, p.context_length, p.trust_remote_code) == (
            "/root/models/Kimi-K2.6",
            30001,
            0.88,
            32768,
            True,
        )
        # one host's 8 GPUs, but for the deployments: TP16 over two nodes, TP4 per PD server
        assert p.tp_size == {"ep16-2node": 16, "pd-1p1d": 4}.get(p.name, 8), p.name
    tuned = profiles["ep8-tuned"]
    assert (tuned.ep_size, tuned.max_running_requests, tuned.num_continuous_decode_steps, tuned.enable_eplb) == (8, 256, 8, False)
    v2 = profiles["ep8-v2"]
    assert (v2.num_continuous_decode_steps, v2.enable_eplb) == (16, True)
    assert profiles["tp8"].ep_size is None
    assert profiles["ep4"].ep_size == 4
    assert profiles["ep8-cont4"].num_continuous_decode_steps == 4
    assert profiles["ep8-dense-tp1"].moe_dense_tp_size == 1
    assert profiles["ep8-eplb"].enable_eplb and profiles["ep8-eplb"].num_continuous_decode_steps == 8
    assert profiles["ep8-cont16"].num_continuous_decode_steps == 16 and not profiles["ep8-cont16"].enable_eplb


def test_shipped_dir_is_the_repo_profiles_dir() -> None:
    """kimitui/data/profiles -> ../../profiles: one canonical copy, shipped in the wheel."""
    repo_profiles = Path(__file__).resolve().parent.parent / "profiles"
    assert shipped_dir().resolve() == repo_profiles.resolve()
    assert {f.stem for f in shipped_dir().glob("*.toml")} >= SEED_PROFILES


def test_scan_reports_bad_files_without_hiding_good_ones(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "zz-bad", BASE + "bogus = 1\n")
    good, bad = scan_profiles()
    assert "ep8-tuned" in {p.name for p in good}
    assert [e.field for e in bad] == ["bogus"]
    with pytest.raises(ProfileError):
        list_profiles()


def test_knobs_exclude_identity_launcher_and_sim() -> None:
    p = Profile(name="k", model_path="/m", tp_size=2)
    knobs = p.knobs()
    assert knobs["tp_size"] == 2 and knobs["model_path"] == "/m" and knobs["port"] == 30001
    assert not {"name", "description", "extends", "sim", "launcher", "source_path"} & set(knobs)
    assert "source_path" not in p.model_dump()


def test_a_profile_outside_the_search_path_can_refine_a_shipped_one(profile_env: ProfileDirs) -> None:
    path = write_profile(profile_env.tmp / "scratch", "ep8-tuned", 'extends = "ep8-tuned"\ncuda_graph_max_bs = 128\n')
    p = load_profile(str(path))
    assert (p.cuda_graph_max_bs, p.max_running_requests, p.source_path) == (128, 256, path)


def test_bidi_controls_are_rejected(profile_env: ProfileDirs) -> None:
    write_profile(profile_env.local, "bidi", 'model_path = "/m/\\u202egpj.exe"\n')
    with pytest.raises(ProfileError) as err:
        load_profile("bidi")
    assert err.value.field == "model_path" and "control character" in err.value.message


def test_constructed_profiles_are_validated_too() -> None:
    with pytest.raises(ValueError):
        Profile(name="bad name", model_path="/m")
    with pytest.raises(ValueError):
        Profile(name="ok", model_path="")
    p = Profile(name="ok", model_path="/m")
    with pytest.raises(ValueError):
        p.extra_args = ["fine", "not\nfine"]  # assignment is validated as well
